// parity: parallel NN training proven equal to a serial reference.
// `parity help` lists the subcommands; each has --help.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "par_kernels.h"

// PARITY_KERNELS=NAME forces a kernel set (avx512vl, avx2, neon, portable: any set this
// CPU runs) for every subcommand and every process it starts (mpirun's ranks
// and verify's runs inherit the variable). All sets give the same bits; the
// switch is there to show it (tests/tools/test_cross.sh) and to time them. The
// library reads no environment: this is the CLI's choice, made before any
// kernel runs. Unset or empty: the best set.
static int kernels_from_env(void)
{
    const char *want = getenv("PARITY_KERNELS");
    if (!want || !*want) return 0;
    const par_kernel_set *k = par_kernels_find(want);
    if (k) {
        par_kernels_use(k);
        return 0;
    }
    const par_kernel_set *sets[8];
    size_t n = par_kernels_available(sets, 8);
    n = n < 8 ? n : 8;
    char names[160] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 sets[i]->name);
    fprintf(stderr, "parity: PARITY_KERNELS=%s: no such kernel set on this CPU (it runs: %s)\n",
            want, names);
    fprintf(stderr, "hint: set PARITY_KERNELS to one of those (or its part before +, as avx2), "
                    "or unset it\n");
    return EXIT_USAGE;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: parity <command> [flags]\n\n"
            "commands:\n"
            "  train        train a model with any trainer (serial, omp, mpi, hybrid, root)\n"
            "  data order   print the sample order of an epoch\n"
            "  data make-cifar DIR  write small synthetic CIFAR-10 binary files (for tests)\n"
            "  model        scaling model: measured costs, predicted speedup up to 1024 ranks\n"
            "  check        recompute one step (or --math: exp/log/tanh) in MPFR and compare\n"
            "  bisect       run two configurations in lockstep: first differing step, tensor, element\n"
            "  verify       run a verify suite: compare with the reference, MPFR checks, timings, signed table\n"
            "  lockstep     check a fast-mode trainer step by step against the reference under the derived bound\n"
            "  table        keygen | sign DIR | verify DIR: Ed25519 (minisign format) signatures of tables\n"
            "  version      commit, compiler, flags, kernels, MPI and MPFR of this build (also --version)\n"
            "  help         this text\n\n"
            "Run 'parity <command> --help' (or -h) for its flags.\n");
}

int main(int argc, char **argv)
{
    cli_omp_wait(argv);
    const int krc = kernels_from_env();
    if (krc) return krc;
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0) return cmd_train(argc, argv);
    if (strcmp(cmd, "data") == 0) return cmd_data(argc, argv);
    if (strcmp(cmd, "model") == 0) return cmd_model(argc, argv);
    if (strcmp(cmd, "check") == 0) return cmd_check(argc, argv);
    if (strcmp(cmd, "bisect") == 0) return cmd_bisect(argc, argv);
    if (strcmp(cmd, "verify") == 0) return cmd_verify(argc, argv);
    if (strcmp(cmd, "lockstep") == 0) return cmd_lockstep(argc, argv);
    if (strcmp(cmd, "table") == 0) return cmd_table(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) return cmd_version(argc, argv);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    fprintf(stderr, "parity: unknown command '%s'\n", cmd);
    fprintf(stderr, "hint: run 'parity help' for the list of commands\n");
    return EXIT_USAGE;
}
