// libFuzzer: the flag parser of every subcommand (cli_parse), with a table
// like `parity train`'s. The input is argv, NUL-separated. ci/fuzz.sh runs
// it with -close_fd_mask=2: the parser's one-line errors are not kept (libFuzzer
// and the sanitizers report through their own copy of stderr).
#include "cli.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { MAX_ARGS = 64 };
    char *buf = malloc(size + 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 3] = {"parity", "train"};
    int argc = 2;
    for (size_t i = 0; i <= size && argc < MAX_ARGS + 2;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    const char *s = NULL;
    int n = 0, flag = 0;
    uint64_t u = 0;
    double d = 0;
    const cli_opt opts[] = {
        {"--dataset", CLI_STR, &s, ""}, {"--epochs", CLI_INT, &n, ""},
        {"--seed", CLI_U64, &u, ""},    {"--lr", CLI_DOUBLE, &d, ""},
        {"--json", CLI_FLAG, &flag, ""}, {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[2];
    int n_pos = 0;
    int rc = cli_parse("train", argc, argv, 2, opts, pos, 2, &n_pos);
    if (rc == 0 && (n < 0 || n > 1000000000 || n_pos > 2 || !(d == d))) abort();
    free(buf);
    return 0;
}
