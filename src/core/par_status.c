// Status table and the thread-local last-error buffer (text and origin apart).
#include "par_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_msg[512];
static _Thread_local char last_origin[96];

const char *par_status_str(par_status st)
{
    switch (st) {
    case PAR_RUN_STOP: return "stopped";
    case PAR_OK: return "ok";
    case PAR_ERR_ALLOC: return "out of memory";
    case PAR_ERR_IO: return "i/o error";
    case PAR_ERR_FORMAT: return "format error";
    case PAR_ERR_CONFIG: return "configuration error";
    case PAR_ERR_MPI: return "mpi error";
    case PAR_ERR_NUMERIC: return "numerical error";
    case PAR_ERR_EXTERNAL: return "external trainer error";
    }
    return "unknown error";
}

const char *par_last_error(void) { return last_msg; }

const char *par_last_error_origin(void) { return last_origin; }

void par_clear_error(void)
{
    last_msg[0] = '\0';
    last_origin[0] = '\0';
}

par_status par_set_error(par_status st, const char *file, int line, const char *fmt, ...)
{
    const char *base = strrchr(file, '/');
    snprintf(last_origin, sizeof last_origin, "%s:%d", base ? base + 1 : file, line);
    // Formatted apart first: a caller may pass par_last_error() itself as an
    // argument, to wrap the message of the error beneath.
    char msg[sizeof last_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_msg, msg, sizeof msg);
    return st;
}
