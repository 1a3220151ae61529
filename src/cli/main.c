// parity: parallel NN training proven equal to a serial reference.
// `parity help` lists the subcommands; each has --help.
#include <stdio.h>
#include <string.h>

#include "cli.h"

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
