// `parity train`'s flags (train_args.h): the flag table, --batch, --optim,
// --select, the output paths, OMP_NUM_THREADS, and the settings --resume DIR
// takes from its checkpoint. Tests: tests/cli/test_cli.sh, tests/cli/test_resume.sh.
#define _POSIX_C_SOURCE 200809L
#include "train_args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "par_ckpt.h"
#include "cli_mpi_launch.h"

int cli_train_parse(train_opts *o, int argc, char **argv)
{
    *o = (train_opts){
        .cfg = {.run = {.cfg = {.batch = 64, .chunk = 8, .lr = 0.01, .threads = 1},
                        .seed = 42, .epochs = 1, .check_every = 100},
                .dataset = "fashion-mnist"},
        .model = NULL, .act = "relu", .trainer = "serial", .mode = "exact", .dtype = "f32",
        .ranks = -1, .batch_s = "64", .optim_s = "sgd", .select = "last",
        .momentum = NAN, .beta1 = NAN, .beta2 = NAN, .eps = NAN,
    };
    par_session_cfg *c = &o->cfg;
    par_run_opts *r = &c->run;
    const cli_opt opts[] = {
        {"--dataset", CLI_STR, &c->dataset, "NAME|DIR  mnist, fashion-mnist, cifar10 or a folder of IDX or CIFAR-10 files (fashion-mnist)"},
        {"--upscale", CLI_INT, &c->upscale, "S         resample images to S x S, bilinear (28 -> 57: 3249 inputs, 112: 12544)"},
        {"--model", CLI_STR, &o->model, "SPEC      mlp:N0-N1-...-Nk (mlp:F-256-128-10, F = the dataset's features) or cnn:CxHxW-... (docs/cnn.md)"},
        {"--act", CLI_STR, &o->act, "relu|sigmoid|tanh  hidden activation (relu)"},
        {"--trainer", CLI_STR, &o->trainer, "NAME      reference, serial, omp, mpi, hybrid, root, cuda (with nvcc) (serial)"},
        {"--mode", CLI_STR, &o->mode, "exact|fast  arithmetic contract kept or relaxed (exact)"},
        {"--dtype", CLI_STR, &o->dtype, "f32|f64   floating-point type (f32)"},
        {"--epochs", CLI_INT, &r->epochs, "N         epochs (1)"},
        {"--steps", CLI_LONG, &r->max_steps, "N         stop after N steps in all, at most what --epochs holds (0: no limit)"},
        {"--warmup-steps", CLI_LONG, &c->warmup_steps, "K         the first K steps are trained but not timed: --json's \"seconds\" covers the rest (0)"},
        {"--batch", CLI_STR, &o->batch_s, "B|full    samples per step; full: the whole training split, one step per epoch (64)"},
        {"--chunk", CLI_SIZE, &r->cfg.chunk, "C         samples per chunk of the ordered fold (8)"},
        {"--lr", CLI_DOUBLE, &r->cfg.lr, "LR        learning rate (0.01)"},
        {"--optim", CLI_STR, &o->optim_s, "NAME      sgd, momentum, nesterov or adam (sgd)"},
        {"--momentum", CLI_DOUBLE, &o->momentum, "MU        momentum and nesterov: v = MU*v + g (0.9)"},
        {"--beta1", CLI_DOUBLE, &o->beta1, "B1        adam: decay of the first moment (0.9)"},
        {"--beta2", CLI_DOUBLE, &o->beta2, "B2        adam: decay of the second moment (0.999)"},
        {"--eps", CLI_DOUBLE, &o->eps, "EPS       adam: added to sqrt(vhat) (1e-8)"},
        {"--select", CLI_STR, &o->select, "last|best-val  weights kept at the end: the last, or the epoch with the best validation accuracy (last)"},
        {"--seed", CLI_U64, &r->seed, "S         seed of initialisation and shuffling (42)"},
        {"--threads", CLI_INT, &r->cfg.threads, "T         OpenMP threads per process (OMP_NUM_THREADS, else 1)"},
        {"--fixed-threads", CLI_FLAG, &o->fixed_threads, "          omp, hybrid, root: every step on --threads threads (default: steps run on one thread while that is measured faster, as on a busy machine; the same bits)"},
        {"--weights-by-messages", CLI_FLAG, &r->cfg.weights_by_messages, "          exact mpi/hybrid: pass the new weights round the ring even when every rank is on one host (default there: one copy in MPI shared memory; the same bits)"},
        {"--ranks", CLI_INT, &o->ranks, "R         launch R MPI ranks through mpirun (mpi/hybrid/root)"},
        {"--log", CLI_STR, &c->log, "FILE      JSONL log: one line per step and per epoch, written as it goes"},
        {"--save", CLI_STR, &c->save, "FILE.npz  final weights"},
        {"--init-save", CLI_STR, &c->init_save, "FILE.npz  initial weights"},
        {"--init-load", CLI_STR, &c->init_load, "FILE.npz  start from these weights"},
        {"--checkpoint-dir", CLI_STR, &c->ckpt_dir, "DIR       write checkpoints there (one run per folder)"},
        {"--checkpoint-every", CLI_LONG, &c->ckpt_every, "N       checkpoint every N steps (default: once per epoch), and at the end"},
        {"--keep", CLI_INT, &c->keep, "K         keep the newest K checkpoints (3)"},
        {"--resume", CLI_STR, &c->resume, "DIR       continue the run of DIR's newest valid checkpoint; flags not given come from it (--steps, --epochs, --trainer, --threads, --ranks, --mode, --log may differ; the others must agree)"},
        {"--check-every", CLI_INT, &r->check_every, "N         NaN/Inf check of all weights every N steps and at the end (100; 0: loss only)"},
        {"--no-digest", CLI_FLAG, &c->no_digest, "          no per-step XXH3-128 digests of weights and loss in --log"},
        {"--no-eval", CLI_FLAG, &c->no_eval, "          no validation or test evaluation after each epoch (timing runs; accuracies null)"},
        {"--json", CLI_FLAG, &o->json, "          print a JSON summary on stdout"},
        {"--quiet", CLI_FLAG, &o->quiet, "          no progress: none on a terminal, and off one no lines every 5 s nor the final summary"},
        {"--help", CLI_FLAG, &o->help, "          this text"},
        {"--fault", CLI_STR, &o->fault, "SPEC      TESTS ONLY: inject a deliberate arithmetic fault"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const char *pos[1];
    int n_pos;
    int rc = cli_parse("train", argc, argv, 2, opts, pos, 0, &n_pos);
    if (rc) return rc;
    if (o->help) {
        cli_usage("parity train [flags]", opts);
        printf("\nSIGINT/SIGTERM: the run finishes its step, writes a checkpoint (with\n"
               "--checkpoint-dir) and exits 130/143; --resume DIR continues it bit for bit.\n");
        return -1;
    }
    return 0;
}

// --batch B|full, --optim and its hyperparameters, --select: into o, or
// one line naming the flag and EXIT_USAGE.
int cli_train_extras(train_opts *o)
{
    int batch = 0;
    int rc = cli_batch_parse("train", o->batch_s, &batch, &o->batch_full);
    o->cfg.run.cfg.batch = (size_t)batch;
    const cli_optim_flags of = {o->optim_s, o->momentum, o->beta1, o->beta2, o->eps};
    if (!rc) rc = cli_optim_resolve("train", &of, &o->optim);
    if (rc) return rc;
    if (strcmp(o->select, "best-val") == 0) {
        o->cfg.best_val = 1;
        if (o->cfg.no_eval) {
            fprintf(stderr, "parity train: --select best-val: not with --no-eval (it picks the "
                            "epoch by its validation accuracy)\n");
            return EXIT_USAGE;
        }
    } else if (strcmp(o->select, "last") != 0) {
        fprintf(stderr, "parity train: --select '%s': expected last or best-val\n", o->select);
        return EXIT_USAGE;
    }
    return 0;
}

// An output of the run, checked before the dataset is read: its folder
// exists and takes new files (the outputs are written as a temporary file
// renamed over the path), and the path, if there, is a regular file (dir:
// a folder). Else one line naming the flag and the path, and EXIT_USAGE.
static int check_output(const char *flag, const char *path, int dir)
{
    char parent[1024], why[1200];
    struct stat sb;
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == '\0') {   // "ck/": the folder is ck
        *slash = '\0';
        slash = strrchr(parent, '/');
    }
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) parent[1] = '\0';   // "/w.npz": the root
    else *slash = '\0';
    why[0] = '\0';
    if (!path[0]) {
        snprintf(why, sizeof why, "expected a path");
    } else if (stat(path, &sb) == 0 && dir && !S_ISDIR(sb.st_mode)) {
        snprintf(why, sizeof why, "not a folder");
    } else if (stat(path, &sb) == 0 && !dir && S_ISDIR(sb.st_mode)) {
        snprintf(why, sizeof why, "a folder, expected a file");
    } else if (stat(path, &sb) == 0 && !dir && !S_ISREG(sb.st_mode)) {
        snprintf(why, sizeof why, "not a regular file (parity writes files whole: a temporary "
                 "file, then a rename over the old one)");
    } else if (stat(path, &sb) == 0 && dir && access(path, W_OK | X_OK) != 0) {
        snprintf(why, sizeof why, "cannot write in it: %s", strerror(errno));
    } else if (stat(parent, &sb) != 0 && errno == ENOENT) {
        snprintf(why, sizeof why, "folder %s does not exist", parent);
    } else if (stat(parent, &sb) != 0) {
        snprintf(why, sizeof why, "folder %s: %s", parent, strerror(errno));
    } else if (!S_ISDIR(sb.st_mode)) {
        snprintf(why, sizeof why, "%s is not a folder", parent);
    } else if (access(parent, W_OK | X_OK) != 0) {
        snprintf(why, sizeof why, "cannot write in folder %s: %s", parent, strerror(errno));
    }
    if (!why[0]) return 0;
    fprintf(stderr, "parity train: %s %s: %s\n", flag, path, why);
    if (dir)
        fprintf(stderr, "hint: give %s a folder that can be written, or a new one in a folder "
                        "that exists\n", flag);
    else
        fprintf(stderr, "hint: give %s a file path in a folder that exists and can be written\n",
                flag);
    return EXIT_USAGE;
}

// Counts, --lr, --upscale, and the flags that need others (see train_args.h).
int cli_train_check_flags(const train_opts *o)
{
    const par_session_cfg *c = &o->cfg;
    const par_run_cfg *rc = &c->run.cfg;
    const struct { const char *flag; long v; } counts[] = {
        {"--epochs", c->run.epochs}, {"--batch", (long)rc->batch}, {"--chunk", (long)rc->chunk},
        {"--threads", rc->threads}, {"--ranks", o->ranks},   // --ranks: -1 when not given
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (counts[i].v == 0) {
            fprintf(stderr, "parity train: %s 0: expected an integer >= 1\n", counts[i].flag);
            return EXIT_USAGE;
        }
    }
    if (!(rc->lr > 0)) {
        fprintf(stderr, "parity train: --lr %g: expected a number > 0\n", rc->lr);
        return EXIT_USAGE;
    }
    if (c->warmup_steps < 0) {
        fprintf(stderr, "parity train: --warmup-steps %ld: expected an integer >= 0\n",
                c->warmup_steps);
        return EXIT_USAGE;
    }
    if (c->upscale > 1024) {
        fprintf(stderr, "parity train: --upscale %d: expected a side of 1..1024\n", c->upscale);
        return EXIT_USAGE;
    }
    if ((c->ckpt_every > 0 || c->keep > 0) && !c->ckpt_dir && !c->resume) {
        fprintf(stderr, "parity train: --checkpoint-every and --keep need --checkpoint-dir DIR\n");
        return EXIT_USAGE;
    }
    if (c->resume && c->init_save) {
        fprintf(stderr, "parity train: --init-save: a resumed run does not start from its "
                        "initial weights\n");
        fprintf(stderr, "hint: drop --init-save (the first run wrote them, if asked)\n");
        return EXIT_USAGE;
    }
    return 0;
}

// Every output path: checked before the run starts, so that a typo costs no
// training (the writes check again).
int cli_train_check_outputs(const train_opts *o)
{
    const par_session_cfg *c = &o->cfg;
    const struct { const char *flag, *path; int dir; } outs[] = {
        {"--save", c->save, 0}, {"--init-save", c->init_save, 0}, {"--log", c->log, 0},
        {"--checkpoint-dir", c->ckpt_dir, 1},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        int rc = outs[i].path ? check_output(outs[i].flag, outs[i].path, outs[i].dir) : 0;
        if (rc) return rc;
    }
    return 0;
}

// Whether `flag` was typed ("--flag V" or "--flag=V").
int cli_flag_given(int argc, char **argv, const char *flag)
{
    const size_t n = strlen(flag);
    for (int i = 2; i < argc; i++)
        if (strncmp(argv[i], flag, n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '=')) return 1;
    return 0;
}

// A threaded trainer without --threads takes OMP_NUM_THREADS as OpenMP
// programs do (its first number, "4" or "4,2"); unset or empty: 1.
int cli_threads_from_env(int *threads)
{
    const char *e = getenv("OMP_NUM_THREADS");
    if (!e || !e[0]) return 0;
    char *end;
    errno = 0;
    const long v = strtol(e, &end, 10);
    if (errno || end == e || v < 1 || v > 4096 || (*end != '\0' && *end != ',')) {
        fprintf(stderr, "parity train: OMP_NUM_THREADS '%s': expected a thread count >= 1 "
                        "(or give --threads T)\n", e);
        return EXIT_USAGE;
    }
    *threads = (int)v;
    return 0;
}

// --resume DIR: every setting not typed is taken from the newest valid
// checkpoint of DIR (its config, trainer, mode, threads, ranks, --select,
// --log, and --epochs/--steps unless either is typed). Typed settings that
// are part of the config are checked against it later (par_session_open: one
// line naming the flag and both values). Nothing happens when DIR holds no
// valid checkpoint: the resume itself says why.
void cli_train_resume_defaults(train_opts *o, int argc, char **argv)
{
    static par_ckpt_meta f;   // its strings stay in use
    static char batch[32], optim[16];
    par_session_cfg *c = &o->cfg;
    if (!c->resume || par_ckpt_find(&f, c->resume, NULL, 0) != PAR_OK) return;
    const par_ckpt_config *cf = &f.cfg;
#define GIVEN(flag) cli_flag_given(argc, argv, flag)
    if (!GIVEN("--dataset")) c->dataset = cf->dataset;
    if (!GIVEN("--model")) o->model = cf->model;
    if (!GIVEN("--act")) o->act = cf->act;
    if (!GIVEN("--dtype")) o->dtype = cf->dtype;
    if (!GIVEN("--chunk")) c->run.cfg.chunk = (size_t)cf->chunk;
    if (!GIVEN("--lr")) c->run.cfg.lr = cf->lr;
    if (!GIVEN("--seed")) c->run.seed = cf->seed;
    if (!GIVEN("--batch")) {
        snprintf(batch, sizeof batch, "%ld", cf->batch);
        o->batch_s = batch;
    }
    if (!GIVEN("--optim")) {   // "sgd", "adam beta1=B1 beta2=B2 eps=E", "momentum momentum=MU"
        sscanf(cf->optimizer, "%15s", optim);
        o->optim_s = optim;
        const char *keys[4] = {"momentum=", "beta1=", "beta2=", "eps="};
        double *dst[4] = {&o->momentum, &o->beta1, &o->beta2, &o->eps};
        const char *flags[4] = {"--momentum", "--beta1", "--beta2", "--eps"};
        for (int i = 0; i < 4; i++) {
            const char *p = strstr(cf->optimizer, keys[i]);
            if (p && !GIVEN(flags[i])) *dst[i] = strtod(p + strlen(keys[i]), NULL);
        }
    }
    if (!GIVEN("--select") && f.select[0]) o->select = f.select;
    if (!GIVEN("--mode") && f.mode[0]) o->mode = f.mode;
    if (!GIVEN("--trainer") && f.trainer[0]) {   // another trainer: its own threads and ranks
        o->trainer = f.trainer;
        if (!GIVEN("--threads") && f.threads > 0) c->run.cfg.threads = f.threads;
        if (!GIVEN("--ranks") && f.ranks > 1 && !cli_mpi_under_launcher()) o->ranks = f.ranks;
    }
    if (!GIVEN("--log") && f.has_log) c->log = f.log.path;
    if (f.has_run) {
        if (!GIVEN("--epochs") && !GIVEN("--steps")) {
            c->run.epochs = f.run_epochs;
            c->run.max_steps = f.run_steps;
        }
        if (!GIVEN("--upscale")) c->upscale = f.upscale;
        if (!GIVEN("--no-digest")) c->no_digest = f.no_digest;
    }
#undef GIVEN
}
