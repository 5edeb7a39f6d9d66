/* What a sampled thread waited for, read from Linux's /proc
 * (docs/sampling.md, "What a stage waited for"): the time it was runnable
 * but not running (schedstat's run delay: the CPU went to others), and
 * whether it sleeps on a given futex range now (the GIL's, which the
 * sampler finds once). Each thread's files stay open, a pread a round;
 * elsewhere than Linux nothing is known. */
#ifndef AP_THREAD_WAIT_H
#define AP_THREAD_WAIT_H

#include <stdint.h>

/* Threads whose files are kept open at once: a server with thousands of
 * threads must not run out of file descriptors for the profiler's sake.
 * Threads past it are sampled without their waits (counted). */
#define AP_WAIT_FILES_MAX 256
/* Threads given their files in one round, at most. */
#define AP_WAIT_OPENS_PER_ROUND 16

typedef struct {
    int stat_fd;    /* /proc/self/task/TID/schedstat, -1 when not open */
    int call_fd;    /* /proc/self/task/TID/syscall, -1 when not open */
} ap_wait_files;

/* Opens tid's files (either may stay -1: the kernel lacks it). */
void ap_wait_files_open(ap_wait_files *f, int64_t tid);

/* Opens tid's syscall file alone: where it sleeps, not its run delay. */
void ap_wait_call_open(ap_wait_files *f, int64_t tid);

void ap_wait_files_close(ap_wait_files *f);

/* The thread's run delay so far in ns, -1 when unknown. */
int64_t ap_run_delay_ns(const ap_wait_files *f);

/* Where a thread sleeps now (ap_sleeps_on). */
enum {
    AP_SLEEPS_ELSEWHERE = 0,   /* another system call: I/O, sleep, poll */
    AP_SLEEPS_IN_RANGE = 1,    /* a futex in the range asked (the GIL) */
    AP_SLEEPS_ON_FUTEX = 2,    /* another futex: a lock, a condition, a
                                * semaphore, another thread's end */
};

/* Where the thread sleeps now, in a futex in [lo, hi) or elsewhere (the
 * AP_SLEEPS_ values); -1 when it cannot be told (running, no file). */
int ap_sleeps_on(const ap_wait_files *f, uintptr_t lo, uintptr_t hi);

/* The futex address thread tid sleeps on now: 1 and *addr; 0 when not
 * in a futex now; -1 when this system cannot tell. */
int ap_futex_of(int64_t tid, uintptr_t *addr);

#endif
