/* Clocks. The hot path reads ticks: the TSC where it is invariant (a
 * fraction of clock_gettime's cost), else CLOCK_MONOTONIC ns. Seconds
 * appear only in reports. */
#ifndef AP_CLOCK_H
#define AP_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline int64_t
ap_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t
ap_now_ns(void)
{
    return ap_clock_ns(CLOCK_MONOTONIC);
}

/* A real system call on Linux: callers rate-limit it. */
static inline int64_t
ap_thread_cpu_ns(void)
{
    return ap_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* Every thread's CPU time, the exited ones' too. A system call whose cost
 * grows with the process's threads (0.4 us with a few, 2 us with 256):
 * the memory sampler reads it once an interval, stage edges read that. */
static inline int64_t
ap_process_cpu_ns(void)
{
    return ap_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* Set once by ap_clock_init(); read-only afterwards. */
extern int ap_clock_tsc;
extern double ap_clock_ns_per_tick;

static inline int64_t
ap_ticks(void)
{
#if defined(__x86_64__)
    if (ap_clock_tsc) {
        return (int64_t)__rdtsc();
    }
#endif
    return ap_now_ns();
}

static inline int64_t
ap_ticks_to_ns(int64_t ticks)
{
    return ap_clock_tsc ? (int64_t)((double)ticks * ap_clock_ns_per_tick)
                        : ticks;
}

/* Chooses the tick source and calibrates the TSC against CLOCK_MONOTONIC
 * (about 5 ms, once per process). Thread-safe; later calls return at once.
 * AQUAPROF_CLOCK=monotonic in the environment forces clock_gettime. */
void ap_clock_init(void);

/* "tsc" or "monotonic". */
const char *ap_clock_name(void);

/* A (ticks, CLOCK_MONOTONIC ns) pair read as close together as possible:
 * anchors for mapping recorded ticks onto the monotonic clock. */
typedef struct {
    int64_t ticks;
    int64_t ns;
} ap_clock_anchor;

ap_clock_anchor ap_clock_anchor_now(void);

#endif
