// The monotonic clock for wall-time figures (CLOCK_MONOTONIC): seconds from
// an arbitrary origin, only differences mean anything. Not a timestamp.
#ifndef PAR_TIME_H
#define PAR_TIME_H

// Seconds on the monotonic clock, nanosecond resolution where the system has it.
double par_now(void);

#endif
