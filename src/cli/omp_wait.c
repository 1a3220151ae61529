// How long the parity binary's OpenMP threads spin before they sleep: a
// bounded spin, set by re-executing the binary once (docs/performance.md,
// "Threads on a busy machine"). Not a library setting: the trainers read no
// environment, and tests linking them keep libgomp's defaults. Tested by
// tests/cli/test_omp_wait.sh (through OMP_DISPLAY_ENV).
//
// libgomp spins GOMP_SPINCOUNT = 300000 pauses (milliseconds) before a
// waiting thread sleeps, whenever the threads fit the cores. On a machine
// shared with a busy process a thread waiting at a barrier for a
// descheduled partner then burns the core the partner could have run on,
// and 2 threads run several times slower than 1 (bench/contention.sh
// measures it).
//
// libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its load-time
// constructor, before main(); setenv() in main() is too late, and so is
// one in the executable's .preinit_array (glibc's own initialisation, which
// runs after it, resets environ to the original block). So when the user set
// neither variable, parity sets GOMP_SPINCOUNT and executes itself again
// (/proc/self/exe, same pid, same argv). A marker variable stops a second
// re-exec; the new process removes both variables from its environment as
// it starts (libgomp has read them), so that the processes it starts
// (mpirun's ranks, the runs of parity verify, which may set
// OMP_WAIT_POLICY=passive) see the user's environment and decide alike.
// Under valgrind (which does not follow an exec) nothing is re-executed.
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define SPIN_VAR "GOMP_SPINCOUNT"
#define MARK_VAR "PARITY_OMP_SPIN_SET"   // internal: "this process is the re-exec"

void cli_omp_wait(char **argv)
{
    if (getenv(MARK_VAR)) {   // the re-executed process: libgomp has read SPIN_VAR
        unsetenv(MARK_VAR);
        unsetenv(SPIN_VAR);
        return;
    }
    if (getenv(SPIN_VAR) || getenv("OMP_WAIT_POLICY")) return;   // the user's choice
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload")) return;   // valgrind
    if (setenv(SPIN_VAR, CLI_OMP_SPINCOUNT, 1) == 0 && setenv(MARK_VAR, "1", 1) == 0)
        execv("/proc/self/exe", argv);
    // Not re-executed (no /proc, say): libgomp's defaults, and a clean environment.
    unsetenv(MARK_VAR);
    unsetenv(SPIN_VAR);
}
