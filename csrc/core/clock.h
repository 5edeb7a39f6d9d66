/* Raw integer clocks; conversion to seconds happens only in reports. */
#ifndef AP_CLOCK_H
#define AP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t
ap_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* vDSO on Linux: about 25 ns, no system call. */
static inline int64_t
ap_now_ns(void)
{
    return ap_clock_ns(CLOCK_MONOTONIC);
}

/* A real system call on Linux (0.1-0.6 us): callers rate-limit it. */
static inline int64_t
ap_thread_cpu_ns(void)
{
    return ap_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

#endif
