// `parity data order`: the sample order of one epoch, as 0-based record
// numbers of the training file, one per line, so a run can be replayed
// elsewhere (e.g. PyTorch from the --init-save weights).
// `parity data make-cifar DIR`: small synthetic CIFAR-10 binary files (for
// tests; the real set is not packaged here). Tests: tests/cli/test_cifar_cli.sh.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "par_data.h"
#include "par_io.h"
#include "par_run.h"

static int make_cifar(const char *dir, int records, uint64_t seed)
{
    par_status st = par_mkdirs(dir, 0777);
    if (st == PAR_OK) st = par_cifar_make(dir, (size_t)records, seed);
    if (st != PAR_OK) return cli_fail("data", st, NULL);
    printf("%s: data_batch_1..5.bin and test_batch.bin, %d records each (seed %llu)\n", dir,
           records, (unsigned long long)seed);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
}

int cmd_data(int argc, char **argv)
{
    const char *dataset = "fashion-mnist";
    uint64_t seed = 42;
    int epoch = 0, help = 0, records = 100;
    const cli_opt opts[] = {
        {"--dataset", CLI_STR, &dataset, "NAME|DIR  dataset (fashion-mnist)"},
        {"--seed", CLI_U64, &seed, "S         seed (42)"},
        {"--epoch", CLI_INT, &epoch, "E         0-based epoch (0)"},
        {"--records", CLI_INT, &records, "N         make-cifar: records per file (100)"},
        {"--help", CLI_FLAG, &help, "          this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[2];
    int n_pos;
    int rc = cli_parse("data", argc, argv, 2, opts, pos, 2, &n_pos);
    if (rc) return rc;
    if (!help && n_pos == 1 && strcmp(pos[0], "make-cifar") == 0) {
        fprintf(stderr, "parity data: make-cifar needs a folder: parity data make-cifar DIR\n");
        fprintf(stderr, "hint: run 'parity data --help'\n");
        return EXIT_USAGE;
    }
    const int order = n_pos == 1 && strcmp(pos[0], "order") == 0;
    const int make = n_pos == 2 && strcmp(pos[0], "make-cifar") == 0;
    if (!help && !(order || make)) {   // one line saying what is wrong, then the usage
        static const char *const subs[] = {"order", "make-cifar"};
        const char *near = n_pos ? cli_nearest(pos[0], strlen(pos[0]), subs, 2) : NULL;
        if (n_pos == 0)
            fprintf(stderr, "parity data: expected a subcommand: order or make-cifar\n");
        else if (strcmp(pos[0], "order") == 0)
            fprintf(stderr, "parity data: order takes no argument ('%s')\n", pos[1]);
        else if (near)
            fprintf(stderr, "parity data: unknown subcommand '%s'; did you mean %s?\n", pos[0],
                    near);
        else
            fprintf(stderr, "parity data: unknown subcommand '%s': expected order or "
                            "make-cifar\n", pos[0]);
    }
    if (help || !(order || make)) {
        cli_usage("parity data order [--dataset D] [--seed S] [--epoch E]\n"
                  "       parity data make-cifar DIR [--records N] [--seed S]", opts);
        return help ? EXIT_OK : EXIT_USAGE;
    }
    if (make) {
        if (records < 1 || records > 1000000) {
            fprintf(stderr, "parity data: --records %d: expected 1..1000000\n", records);
            return EXIT_USAGE;
        }
        return make_cifar(pos[1], records, seed);
    }
    par_dataset ds;
    par_status st = par_dataset_open(&ds, dataset, 10);
    if (st != PAR_OK) return cli_fail("data", st, "run data/fetch.sh to install the datasets");
    size_t *order_idx;
    st = par_epoch_order(&order_idx, ds.n_train, seed, epoch);
    if (st != PAR_OK) {
        par_dataset_free(&ds);
        return cli_fail("data", st, NULL);
    }
    for (size_t i = 0; i < ds.n_train; i++) printf("%zu\n", order_idx[i]);
    free(order_idx);
    par_dataset_free(&ds);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
}
