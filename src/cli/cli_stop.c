// Ctrl-C and SIGTERM while a command talks to an external trainer: a flag
// the step protocol polls (ext_opts.interrupted), so that it stops the
// trainer's process group and removes its folder before parity exits. Not a
// general signal layer: one catch at a time, in the main thread. Tests:
// tests/external/test_ext_check.sh (Ctrl-C: exit 3, nothing left behind).
#define _POSIX_C_SOURCE 200809L
#include <signal.h>

#include "cli.h"

static volatile int stop;
static struct sigaction old_int, old_term;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

volatile int *cli_stop_catch(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    stop = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    return &stop;
}

void cli_stop_release(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}
