// Provenance of a results.json: source commit and dirty flag (git, read
// only), compiler and flags (from the CLI's CMake definitions), CPU, cores,
// OS, MPI library and mpirun version, MPFR, jansson and libsodium versions.
#define _POSIX_C_SOURCE 200809L
#include "vf_harness.h"

#include <mpfr.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifdef PARITY_HAVE_MPI
#include <mpi.h>
#endif

// First line of a shell command's output (trailing newline removed), or "".
static void first_line(char *buf, size_t size, const char *cmd)
{
    buf[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(buf, (int)size, p)) buf[strcspn(buf, "\n")] = '\0';
    char skip[256];
    while (fgets(skip, sizeof skip, p)) {}
    pclose(p);
}

static int safe_path(const char *s)
{
    for (; *s; s++)
        if (*s == '\'' || *s == '\n') return 0;
    return 1;
}

static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t') c++;
                snprintf(buf, size, "%s", c);
                buf[strcspn(buf, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

static void os_name(char *buf, size_t size)
{
    struct utsname u;
    char pretty[200] = "";
    FILE *f = fopen("/etc/os-release", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "PRETTY_NAME=", 12) == 0) {
                char *v = line + 12;
                v[strcspn(v, "\n")] = '\0';
                if (*v == '"') {
                    v++;
                    v[strcspn(v, "\"")] = '\0';
                }
                snprintf(pretty, sizeof pretty, "%.199s", v);
            }
        fclose(f);
    }
    if (uname(&u) == 0)
        snprintf(buf, size, "%.199s%s%.60s %.60s %.60s", pretty, pretty[0] ? ", " : "", u.sysname, u.release,
                 u.machine);
    else snprintf(buf, size, "%s", pretty[0] ? pretty : "unknown");
}

json_t *vf_provenance(const vf_build_info *b, const char *command_line)
{
    const char *source_dir = b->source_dir, *mpiexec = b->mpiexec ? b->mpiexec : "mpirun";
    char commit[128] = "", dirty[8] = "", cpu[256], os[400], host[256] = "";
    char mpirun[256] = "", mpilib[512] = "not built with MPI", cmd[1200];
    if (source_dir && safe_path(source_dir)) {
        snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse HEAD 2>/dev/null", source_dir);
        first_line(commit, sizeof commit, cmd);
        if (commit[0]) {
            // --no-optional-locks: read only, never refresh the index
            snprintf(cmd, sizeof cmd,
                     "git -C '%s' --no-optional-locks status --porcelain --untracked-files=no "
                     "2>/dev/null | head -n 1 | wc -l", source_dir);
            first_line(dirty, sizeof dirty, cmd);
        }
    }
    cpu_model(cpu, sizeof cpu);
    os_name(os, sizeof os);
    gethostname(host, sizeof host - 1);
    snprintf(cmd, sizeof cmd, "'%s' --version 2>&1", mpiexec);
    if (safe_path(mpiexec)) first_line(mpirun, sizeof mpirun, cmd);
#ifdef PARITY_HAVE_MPI
    int len = 0;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
        lib[strcspn(lib, "\n")] = '\0';
        snprintf(mpilib, sizeof mpilib, "%s", lib);
    }
#endif
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    json_t *j = json_object();
    json_object_set_new(j, "git_commit", json_string(commit[0] ? commit : "unknown"));
    json_object_set_new(j, "git_dirty", commit[0] ? json_boolean(dirty[0] == '1') : json_string("unknown"));
    json_object_set_new(j, "compiler", json_string(b->compiler ? b->compiler : "unknown"));
    json_object_set_new(j, "c_flags", json_string(b->c_flags ? b->c_flags : "unknown"));
    json_object_set_new(j, "build_type", json_string(b->build_type ? b->build_type : "unknown"));
    json_object_set_new(j, "cpu", json_string(cpu));
    json_object_set_new(j, "cores", json_integer(cores));
    json_object_set_new(j, "os", json_string(os));
    json_object_set_new(j, "hostname", json_string(host));
    json_object_set_new(j, "mpi_library", json_string(mpilib));
    json_object_set_new(j, "mpirun_version", json_string(mpirun[0] ? mpirun : "not found"));
    json_object_set_new(j, "mpfr_version", json_string(mpfr_get_version()));
    json_object_set_new(j, "jansson_version", json_string(JANSSON_VERSION));
    json_object_set_new(j, "libsodium_version", json_string(sodium_version_string()));
    json_object_set_new(j, "command_line", json_string(command_line ? command_line : ""));
    return j;
}
