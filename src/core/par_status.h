// Status codes and the last error message. Library code never prints or exits:
// it records the text and its origin (file:line) with PAR_FAIL_IF and returns
// a code; the CLI decides what to print (the origin only with PARITY_DEBUG=1)
// and which exit code to use.
#ifndef PAR_STATUS_H
#define PAR_STATUS_H

typedef enum par_status {
    PAR_RUN_STOP = 1,     // not an error: a training hook asked to end the run after
                          // this step (par_run.h); the run stops cleanly
    PAR_OK = 0,
    PAR_ERR_ALLOC = -1,   // out of memory
    PAR_ERR_IO = -2,      // a file could not be opened, read or written
    PAR_ERR_FORMAT = -3,  // a file's content is malformed
    PAR_ERR_CONFIG = -4,  // flags or settings are inconsistent
    PAR_ERR_MPI = -5,     // an MPI call failed
    PAR_ERR_NUMERIC = -6, // NaN/Inf or a failed numerical check
    PAR_ERR_EXTERNAL = -7,   // a trainer parity did not build failed, hung or broke the
                             // step protocol (verify/external)
} par_status;

// Static name of a code, e.g. "format error".
const char *par_status_str(par_status st);

// The message recorded by the most recent failure on this thread ("" if none),
// without its origin: what a user reads.
const char *par_last_error(void);

// Where that message was recorded, "file.c:123" ("" if none): for debugging.
const char *par_last_error_origin(void);

// Records a printf-style message and its origin apart; returns st unchanged.
par_status par_set_error(par_status st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void par_clear_error(void);

#define PAR_FAIL_IF(cond, code, ...)                                        \
    do {                                                                    \
        if (cond) return par_set_error((code), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define PAR_TRY(expr)                     \
    do {                                  \
        par_status par_try_st_ = (expr);  \
        if (par_try_st_ != PAR_OK) return par_try_st_; \
    } while (0)

#endif
