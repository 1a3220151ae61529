// `parity table keygen|sign|verify`: Ed25519 keys and signatures of results
// tables in the minisign formats (verify/harness/vf_sign.h). A table whose
// results.json has a failed or missing verdict is never signed, and
// `verify` fails (exit 1, one line) on a changed byte, a failed or missing
// verdict, a changed table or plot, or a wrong key. Tests: tests/verify/test_verify.sh.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cli_sign.h"
#include "vf_harness.h"
#include "vf_sign.h"

void cli_default_key(char *buf, size_t n, int pub)
{
    const char *home = getenv("HOME");
    if (home && *home) snprintf(buf, n, "%s/.config/parity/parity.%s", home, pub ? "pub" : "key");
    else buf[0] = '\0';
}

void cli_pub_of(char *buf, size_t n, const char *key)
{
    const size_t len = strlen(key);
    if (len > 4 && strcmp(key + len - 4, ".key") == 0) snprintf(buf, n, "%.*s.pub", (int)(len - 4), key);
    else snprintf(buf, n, "%s.pub", key);
}

static int usage_table(FILE *f)
{
    fprintf(f, "usage: parity table keygen [--key FILE] [--force]\n"
               "       parity table sign DIR [--key FILE]\n"
               "       parity table verify DIR [--pub FILE]\n\n"
               "Ed25519 signatures of verify results, in the minisign formats: a signature\n"
               "DIR/" CLI_SIG_NAME " over DIR/results.json, which lists the SHA-256 of\n"
               "table.md, table.csv and the plots. Default key: ~/.config/parity/parity.key\n"
               "and parity.pub. Also: minisign -Vm DIR/results.json -p KEY.pub\n"
               "(verify reads DIR/" CLI_SIG_OLD " of older tables when there is no .minisig)\n"
               "Every verdict in results.json (overall, per config, nested) must pass:\n"
               "sign refuses and verify fails otherwise, naming the first that does not.\n");
    return f == stdout ? EXIT_OK : EXIT_USAGE;
}

int cli_sign_dir(const char *cmd, const char *dir, const char *key)
{
    char file[1200], sig[1300], tc[600], id[17];
    snprintf(file, sizeof file, "%s/results.json", dir);
    snprintf(sig, sizeof sig, "%s/" CLI_SIG_NAME, dir);
    json_error_t e;
    json_t *res = json_load_file(file, 0, &e);
    const json_t *suite = json_object_get(res, "suite");
    snprintf(tc, sizeof tc, "timestamp:%ld\tfile:results.json\tsuite:%s\tsuite_sha256:%s\tverdict:pass",
             (long)time(NULL), json_string_value(json_object_get(suite, "name")) ? json_string_value(json_object_get(suite, "name")) : "?",
             json_string_value(json_object_get(suite, "sha256")) ? json_string_value(json_object_get(suite, "sha256")) : "?");
    json_decref(res);
    par_status st = vf_sign_file(key, file, sig, tc, id);
    if (st != PAR_OK)
        return cli_fail(cmd, st, st == PAR_ERR_IO ? "make a key with 'parity table keygen' (or give --key FILE)" : NULL);
    printf("signed %s with key %s: %s\n", file, id, sig);
    return EXIT_OK;
}

static int table_keygen(int argc, char **argv)
{
    const char *key = NULL;
    int force = 0, help = 0;
    const cli_opt opts[] = {
        {"--key", CLI_STR, &key,
         "FILE      secret key to write (~/.config/parity/parity.key); public key: FILE's stem "
         "+ .pub (k.key: k.pub; k: k.pub)"},
        {"--force", CLI_FLAG, &force, "          overwrite an existing key pair"},
        {"--help", CLI_FLAG, &help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[1];
    int n_pos, rc = cli_parse("table keygen", argc, argv, 3, opts, pos, 0, &n_pos);
    if (rc) return rc;
    if (help) {
        cli_usage("parity table keygen [--key FILE] [--force]", opts);
        return EXIT_OK;
    }
    char def[1024], pub[1100], id[17];
    if (!key) {
        cli_default_key(def, sizeof def, 0);
        if (!def[0]) {
            fprintf(stderr, "parity table keygen: HOME is not set\nhint: give --key FILE\n");
            return EXIT_USAGE;
        }
        key = def;
    }
    cli_pub_of(pub, sizeof pub, key);
    par_status st = vf_key_generate(key, pub, force, id);
    if (st != PAR_OK) return cli_fail("table keygen", st, st == PAR_ERR_CONFIG ? "use --force to replace it" : NULL);
    printf("secret key: %s (unencrypted, mode 0600: keep it private)\npublic key: %s\nkey id: %s\n",
           key, pub, id);
    return EXIT_OK;
}

static int table_sign(int argc, char **argv)
{
    const char *key = NULL;
    int help = 0;
    const cli_opt opts[] = {
        {"--key", CLI_STR, &key, "FILE      secret key (~/.config/parity/parity.key)"},
        {"--help", CLI_FLAG, &help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[1];
    int n_pos, rc = cli_parse("table sign", argc, argv, 3, opts, pos, 1, &n_pos);
    if (rc) return rc;
    if (help) {
        cli_usage("parity table sign DIR [--key FILE]", opts);
        return EXIT_OK;
    }
    if (n_pos != 1) return usage_table(stderr);
    char def[1024];
    if (!key) {
        cli_default_key(def, sizeof def, 0);
        key = def;
    }
    par_status st = vf_results_check(pos[0]);
    if (st != PAR_OK) {
        fprintf(stderr, "parity table sign: refusing to sign %s: %s\n", pos[0],
                cli_error_text());
        return st == PAR_ERR_IO ? EXIT_RUNTIME : EXIT_VERIFY;
    }
    return cli_sign_dir("table sign", pos[0], key);
}

static int table_verify(int argc, char **argv)
{
    const char *pub = NULL;
    int help = 0;
    const cli_opt opts[] = {
        {"--pub", CLI_STR, &pub, "FILE      public key (~/.config/parity/parity.pub)"},
        {"--help", CLI_FLAG, &help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[1];
    int n_pos, rc = cli_parse("table verify", argc, argv, 3, opts, pos, 1, &n_pos);
    if (rc) return rc;
    if (help) {
        cli_usage("parity table verify DIR [--pub FILE]", opts);
        return EXIT_OK;
    }
    if (n_pos != 1) return usage_table(stderr);
    char def[1024], file[1200], sig[1300], tc[8300], id[17];
    if (!pub) {
        cli_default_key(def, sizeof def, 1);
        pub = def;
    }
    par_status st = vf_key_id(pub, id);
    if (st != PAR_OK) return cli_fail("table verify", st, "give the signer's public key with --pub FILE");
    snprintf(file, sizeof file, "%s/results.json", pos[0]);
    snprintf(sig, sizeof sig, "%s/" CLI_SIG_NAME, pos[0]);
    if (access(sig, F_OK) != 0) {
        char old[1300];
        snprintf(old, sizeof old, "%s/" CLI_SIG_OLD, pos[0]);
        if (access(old, F_OK) == 0) snprintf(sig, sizeof sig, "%s", old);   // an older table
    }
    st = vf_verify_file(pub, file, sig, tc, sizeof tc);
    if (st == PAR_OK) st = vf_results_check(pos[0]);
    if (st != PAR_OK) {
        fprintf(stderr, "parity table verify: %s: FAILED: %s\n", pos[0],
                cli_error_text());
        return EXIT_VERIFY;
    }
    printf("%s: OK: results.json signed by key %s, every verdict passed, table files unchanged\n"
           "trusted comment: %s\n", pos[0], id, tc);
    return EXIT_OK;
}

int cmd_table(int argc, char **argv)
{
    if (argc < 3) return usage_table(stderr);
    const char *sub = argv[2];
    if (strcmp(sub, "keygen") == 0) return table_keygen(argc, argv);
    if (strcmp(sub, "sign") == 0) return table_sign(argc, argv);
    if (strcmp(sub, "verify") == 0) return table_verify(argc, argv);
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0)
        return usage_table(stdout);
    fprintf(stderr, "parity table: unknown subcommand '%s'\nhint: keygen, sign DIR or verify DIR\n", sub);
    return EXIT_USAGE;
}
