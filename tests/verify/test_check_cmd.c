// `parity check` end to end on a small IDX dataset it writes: the table
// and --json, --step and --samples, faults, CNNs and batchnorm, --weights,
// and the exit codes of bad flags and missing files.
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "par_model.h"
#include "par_npz.h"
#include "par_rng.h"
#include "par_test.h"

// ---- the CLI --------------------------------------------------------------------------

static void put_be32(FILE *f, uint32_t v)
{
    const unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                                (unsigned char)(v >> 8), (unsigned char)v};
    fwrite(b, 1, 4, f);
}

// IDX files of n synthetic 28x28 images with labels, as parity reads them.
static int write_idx(const char *dir, const char *prefix, size_t n, uint64_t salt)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    put_be32(f, 0x803);
    put_be32(f, (uint32_t)n);
    put_be32(f, 28);
    put_be32(f, 28);
    for (size_t i = 0; i < n * 784; i++) {
        const unsigned char px =
            (i % 784) < 56 ? 0 : (unsigned char)(par_rng_bits(salt, PAR_RNG_DATA, 0, i) >> 56);
        fputc(px, f);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    f = fopen(path, "wb");
    if (!f) return 0;
    put_be32(f, 0x801);
    put_be32(f, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        fputc((int)(par_rng_bits(salt, PAR_RNG_DATA, 1, i) % 10), f);
    return fclose(f) == 0;
}

// Runs `parity check ARGS`, output to out; returns the exit code.
static int cli(const char *args, const char *out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s check %s > %s 2>&1", PAR_PARITY_BIN, args, out);
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    static char buf[1 << 20];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, text) != NULL;
}

static void cli_tests(void)
{
    char dir[] = "/tmp/parity_test_check_XXXXXX";
    if (!mkdtemp(dir) || !write_idx(dir, "train", 300, 3) || !write_idx(dir, "t10k", 40, 4)) {
        par_check(0, "CLI: write a small IDX dataset");
        return;
    }
    char args[1024], out[600], npz[600];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(npz, sizeof npz, "%s/w.npz", dir);
    const char *net = "--model mlp:784-16-10 --batch 32";

    snprintf(args, sizeof args, "--dataset %s %s --step 3 --trainer omp --threads 2 --json", dir,
             net);
    par_check(cli(args, out) == 0 && file_has(out, "\"verdict\": \"PASS\"") &&
                  file_has(out, "\"view\": \"CONTRACT\"") && file_has(out, "\"mpfr\""),
              "CLI: check --step 3 --trainer omp --json: exit 0, JSON verdict PASS");
    snprintf(args, sizeof args, "--dataset %s %s --step 9 --dtype f64 --act tanh --prec 128", dir,
             net);
    par_check(cli(args, out) == 0 && file_has(out, "verdict: PASS") &&
                  file_has(out, "LOCAL     layer0.out"),
              "CLI: check --step 9 (epoch 0's short last batch) f64 tanh: exit 0, a table");
    snprintf(args, sizeof args, "--dataset %s %s --samples 5,0,299 --trainer serial --mode fast",
             dir, net);
    par_check(cli(args, out) == 0 && file_has(out, "3 given records"),
              "CLI: check --samples 5,0,299 fast: exit 0");
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --fault half:1:0", dir, net);
    par_check(cli(args, out) == 1 && file_has(out, "FAIL LOCAL layer0.out"),
              "CLI: a faulty run (HALF_FWD layer 0): exit 1, names layer0.out");

    // A CNN (conv + max-pool) through the CLI, f32 omp and f64 serial; a
    // skipped sample in its conv layer exits 1 and names the conv gradient.
    const char *cnn = "--model cnn:1x28x28-c3k3p1-r-m2-f-fc10 --batch 32";
    snprintf(args, sizeof args, "--dataset %s %s --step 2 --trainer omp --threads 2 --json", dir,
             cnn);
    par_check(cli(args, out) == 0 && file_has(out, "\"verdict\": \"PASS\"") &&
                  file_has(out, "layer0.weight.grad") && file_has(out, "\"view\": \"CONTRACT\""),
              "CLI: a CNN, check --step 2 --trainer omp --json: exit 0, JSON verdict PASS");
    snprintf(args, sizeof args, "--dataset %s %s --dtype f64 --trainer serial", dir, cnn);
    par_check(cli(args, out) == 0 && file_has(out, "verdict: PASS") &&
                  file_has(out, "LOCAL     layer1.out"),
              "CLI: a CNN, check --dtype f64: exit 0, a table with the max-pool row");
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --fault skip:1:0:3", dir, cnn);
    par_check(cli(args, out) == 1 && file_has(out, "FAIL LOCAL layer0.weight.grad"),
              "CLI: a CNN with a skipped sample in its conv layer: exit 1, names "
              "layer0.weight.grad");

    // Batchnorm through the CLI: a clean step passes; one ulp in a variance
    // exits 1 and names it.
    const char *bn = "--model cnn:1x28x28-c2k3p1-bn-r-m2-f-fc10 --batch 24";
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --dtype f64", dir, bn);
    par_check(cli(args, out) == 0 && file_has(out, "verdict: PASS") &&
                  file_has(out, "LOCAL     layer1.bn.var"),
              "CLI: a CNN with batchnorm, f64: exit 0, a row per statistic");
    snprintf(args, sizeof args, "--dataset %s %s --trainer serial --fault bnvar:1:1:0", dir, bn);
    par_check(cli(args, out) == 1 && file_has(out, "FAIL LOCAL layer1.bn.var[0]"),
              "CLI: batchnorm var + 1 ulp: exit 1, names layer1.bn.var[0]");

    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:784-16-10", PAR_ACT_RELU));
    float *w = malloc(m.n_params * sizeof *w);
    par_model_init(&m, PAR_F32, 5, w);
    for (size_t i = 0; i < m.n_params; i++)
        w[i] *= 3; // not the --seed weights
    PAR_REQUIRE(par_weights_save(npz, &m, PAR_F32, w));
    free(w);
    snprintf(args, sizeof args, "--dataset %s %s --weights %s --step 4 --trainer serial --json",
             dir, net, npz);
    par_check(cli(args, out) == 0 && file_has(out, "\"verdict\": \"PASS\""),
              "CLI: check --weights W.npz: exit 0");

    snprintf(args, sizeof args, "--dataset %s %s --step 2 --samples 1", dir, net);
    par_check(cli(args, out) == 2, "CLI: --step with --samples: exit 2");
    snprintf(args, sizeof args, "--dataset %s %s --samples 1,300", dir, net);
    par_check(cli(args, out) == 2 && file_has(out, "--samples"),
              "CLI: a record past the file: exit 2");
    snprintf(args, sizeof args, "--dataset %s %s --prec 32", dir, net);
    par_check(cli(args, out) == 2, "CLI: --prec 32: exit 2");
    snprintf(args, sizeof args, "--dataset %s %s --trainer omp --ranks 2", dir, net);
    par_check(cli(args, out) == 2 && file_has(out, "--ranks 2: trainer omp is not an MPI trainer"),
              "CLI: --trainer omp --ranks 2: exit 2 naming --ranks");
    snprintf(args, sizeof args, "--dataset %s %s --trainer reference --mode fast", dir, net);
    par_check(cli(args, out) == 2, "CLI: --trainer reference --mode fast: exit 2");
    snprintf(args, sizeof args, "--dataset %s/nothing-here %s", dir, net);
    par_check(cli(args, out) == 3 && file_has(out, "hint:"),
              "CLI: a missing dataset: exit 3 with a hint");
    snprintf(args, sizeof args, "--dataset %s %s --weights %s/missing.npz", dir, net, dir);
    par_check(cli(args, out) == 3, "CLI: missing --weights file: exit 3");
    par_check(cli("--math --points 3000 --json", out) == 0 && file_has(out, "\"max_ulp\"") &&
                  file_has(out, "\"verdict\": \"PASS\""),
              "CLI: check --math --points 3000 --json: exit 0, every function < 1 ulp");
    par_check(cli("--help", out) == 0 && file_has(out, "--prec"), "CLI: check --help");

    const char *files[] = {"train-images-idx3-ubyte",
                           "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte",
                           "out.txt",
                           "w.npz"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", dir, files[k]);
        remove(p);
    }
    rmdir(dir);
}

int main(void)
{
    cli_tests();
    return par_test_exit();
}
