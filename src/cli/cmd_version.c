// `parity --version` / `parity version`: what this binary is, from the same
// provenance a results.json records (verify/harness/vf_prov.c): source commit,
// compiler, flags, MPI library, MPFR; the kernel variant in use and whether
// the cuda trainer is built in.
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "par_kernels.h"
#include "vf_harness.h"

static const char *field(const json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "unknown";
}

int cmd_version(int argc, char **argv)
{
    int help = 0;
    const cli_opt opts[] = {
        {"--help", CLI_FLAG, &help, "   this text"},
        {NULL, CLI_FLAG, NULL, NULL},
    };
    const int rc = cli_flags("version", argc, argv, opts, &help,
                             "parity version   (or parity --version)\n\n"
                             "Prints the source commit, compiler, build type, flags, kernels, "
                             "MPI, mpirun, MPFR,\njansson, libsodium and CUDA of this binary.");
    if (rc >= 0) return rc;
    const vf_build_info b = {PARITY_SOURCE_DIR[0] ? PARITY_SOURCE_DIR : NULL, PARITY_C_COMPILER,
                             PARITY_C_FLAGS, PARITY_BUILD_TYPE, PARITY_MPIEXEC};
    json_t *p = vf_provenance(&b, NULL);
    if (!p) {
        fprintf(stderr, "parity version: out of memory\n");
        return EXIT_RUNTIME;
    }
    const json_t *dirty = json_object_get(p, "git_dirty");
    printf("parity %s%s\n", field(p, "git_commit"),
           json_is_true(dirty) ? " (source tree has uncommitted changes)" : "");
    printf("source:     %s\n", b.source_dir ? b.source_dir : "unknown");
    printf("compiler:   %s\n", field(p, "compiler"));
    printf("build type: %s\n", field(p, "build_type"));
    printf("flags:      %s\n", field(p, "c_flags"));
    const par_kernel_set *best = NULL;
    par_kernels_available(&best, 1);
    if (best && strcmp(best->name, par_kernels_variant()) != 0)
        printf("kernels:    %s (PARITY_KERNELS; this CPU's best: %s)\n", par_kernels_variant(),
               best->name);
    else
        printf("kernels:    %s\n", par_kernels_variant());
    printf("MPI:        %s\n", field(p, "mpi_library"));
    printf("mpirun:     %s\n", field(p, "mpirun_version"));
    printf("MPFR:       %s\n", field(p, "mpfr_version"));
    printf("jansson:    %s\n", field(p, "jansson_version"));
    printf("libsodium:  %s\n", field(p, "libsodium_version"));
    printf("CUDA:       %s\n", PARITY_CUDA_INFO);
    json_decref(p);
    return EXIT_OK;
}
