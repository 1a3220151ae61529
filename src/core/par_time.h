// The monotonic clock for wall-time figures (CLOCK_MONOTONIC): seconds from
// an arbitrary origin, only differences mean anything. Not a timestamp.
#ifndef PAR_TIME_H
#define PAR_TIME_H

// Seconds on the monotonic clock, nanosecond resolution where the system has it.
double par_now(void);

// CPU seconds of the calling thread (CLOCK_THREAD_CPUTIME_ID): with par_now,
// how much of a stretch of wall time the thread ran rather than waited.
double par_thread_cpu(void);

#endif
