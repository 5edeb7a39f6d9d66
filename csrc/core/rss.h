/* Host memory: a sampler thread reads the process RSS every interval and
 * keeps, for any past sample, the highest RSS seen since then, so a stage
 * exit learns its peak without a system call. It reads the process's CPU
 * time with it, so that a stage learns what all the process's threads
 * computed while it was open (native pools that are never sampled) for
 * three loads an edge (ap_rss_process_cpu).
 *
 * The sampler polls at its interval while the program is active: when
 * its busy() callback (stages being entered) has said no, and RSS has
 * moved less than AP_RSS_MOVED a sample, for AP_RSS_QUIET_NS, it goes
 * idle and reads RSS every AP_RSS_IDLE_NS, so that a profiler left on
 * costs next to nothing between stages or inside one held open quietly. The first stage entered after that wakes it and
 * takes a fresh sample itself (ap_rss_wake_if_idle), so that its entry
 * reading is as recent as ever. */
#ifndef AP_RSS_H
#define AP_RSS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "status.h"

#define AP_RSS_QUIET_NS 100000000   /* 100 ms without activity */
#define AP_RSS_MOVED (64 << 10)     /* bytes of RSS a sample: activity */
#define AP_RSS_IDLE_NS 250000000    /* then a sample every 250 ms */

typedef struct {
    uint64_t seq;
    int64_t rss;
} ap_rss_mark;

/* The RSS over time, for traces: at most AP_RSS_LOG_MAX samples; when
 * full, every other one goes and the log keeps one sample in twice as
 * many from then on, so a run of any length is covered evenly. */
#define AP_RSS_LOG_MAX 4096

typedef struct {
    int64_t t_ns;       /* CLOCK_MONOTONIC */
    int64_t rss;        /* bytes */
} ap_rss_sample;

typedef struct {
    /* read at every stage edge: one cache line, written once a sample */
    _Atomic int64_t current;   /* bytes, last sample */
    _Atomic uint64_t seq;      /* samples taken so far */
    _Atomic int64_t cpu;       /* the process's CPU time, ns, last sample */
    _Atomic int64_t cpu_at;    /* ap_ticks() when it was read */
    _Atomic double cpu_rate;   /* its CPU ns a tick since the one before */
    atomic_int idle;           /* the sampler is in its slow pace */
    int64_t interval_ns;
    int64_t interval_ticks;    /* the same in ap_ticks() */
    int fd;
    int running;
    int (*busy)(void *);       /* nonzero while stages are open */
    void *busy_arg;
    pthread_t thread;
    /* The sampler waits on wake: for its next sample, for stop, or when
     * idle for a stage to begin. */
    pthread_mutex_t wait_lock;
    pthread_cond_t wake;
    int stopping;              /* wait_lock */
    /* A stack of samples with strictly decreasing RSS from bottom to top:
     * the first mark after sequence s holds the peak since s. Protected by
     * lock, as are seq's increments and the log; only spans that saw a
     * new sample read the marks. */
    pthread_mutex_t lock;
    ap_rss_mark *marks;
    uint64_t bottom, top; /* ever-growing; index marks modulo cap */
    uint32_t cap;
    int64_t evicted_peak;      /* highest RSS among marks evicted for room */
    /* read once the sampler is joined */
    ap_rss_sample *log;
    uint32_t log_len, log_stride;
    uint64_t log_seen;
} ap_rss;

/* Reads RSS once now, in bytes; -1 if /proc/self/statm is unreadable. */
int64_t ap_rss_read_now(void);

/* Starts the sampler thread; busy (NULL: always busy) tells it whether
 * stages are open, called from the sampler thread with no lock of r's
 * held. AP_ERR_SYSTEM when RSS cannot be read or the thread cannot start,
 * AP_ERR_NOMEM (nothing is left allocated then). */
ap_status ap_rss_start(ap_rss *r, int64_t interval_ns, int (*busy)(void *),
                       void *busy_arg);

/* Stops and joins the sampler, frees its memory but the log. Safe if
 * never started. */
void ap_rss_stop(ap_rss *r);

/* Frees the log, after ap_rss_stop. */
void ap_rss_free_log(ap_rss *r);

/* In a forked child the sampler thread does not exist: frees memory, the
 * log too, without joining. */
void ap_rss_forget(ap_rss *r);

/* Offers one sample to the log (the sampler's own call; exposed for the
 * tests of the decimation). */
void ap_rss_log(ap_rss *r, int64_t t_ns, int64_t rss);

/* Highest RSS sampled after sequence number since_seq. */
int64_t ap_rss_peak_since(ap_rss *r, uint64_t since_seq);

/* RSS read now, for a stage closing after a call at least one interval
 * long: the last sample may predate what the call freed as it returned
 * (a temporary dropped with its function's locals), which would be
 * charged to this call and taken back from the next stage entered. Made
 * the current reading, so that entry sees it too; no lock, no sample
 * counted (the sampler's next store may put back a reading at most an
 * interval older). -1 if RSS is unreadable. Only while the sampler runs,
 * as ap_rss_peak_since. */
int64_t ap_rss_refresh(ap_rss *r);

/* Takes a sample now and puts an idle sampler back to its interval. */
void ap_rss_wake(ap_rss *r);

/* The sampler's last reading of the process's CPU time: what it was at
 * tick `at`, and how fast it grew over the interval before. */
typedef struct {
    int64_t cpu;
    int64_t at;
    double rate;    /* CPU ns a tick */
} ap_cpu_mark;

static inline ap_cpu_mark
ap_rss_cpu_mark(ap_rss *r)
{
    return (ap_cpu_mark){
        atomic_load_explicit(&r->cpu, memory_order_relaxed),
        atomic_load_explicit(&r->cpu_at, memory_order_relaxed),
        atomic_load_explicit(&r->cpu_rate, memory_order_relaxed)};
}

/* The process's CPU time now, ns: the out-of-line system call of the
 * rare path below. */
int64_t ap_rss_process_cpu_now(void);

/* The process's CPU time while a call was open from tick t0 to now, ns,
 * its entry's mark m0: the readings at each end carried to the edge at
 * the rate of the interval before them. A call shorter than an interval
 * gets that rate times its length. That holds where the sampler runs
 * mostly between calls (starved of a CPU while they compute, woken as
 * they sleep), which a difference of readings alone would not: it would
 * give such calls nothing. Both ends are the sampler's: the clock read
 * by another thread lags a running thread's time since the scheduler
 * last counted it (up to a tick), the same at both ends. Where the
 * sampler idled through a quiet call at least an interval long, the exit
 * reads the clock itself. A mark's three values may be read across the
 * sampler's next store (a window of nanoseconds an interval): the error
 * of one interval at the busy CPUs' rate, rarely. */
static inline int64_t
ap_rss_process_cpu(ap_rss *r, const ap_cpu_mark *m0, int64_t t0, int64_t now)
{
    double before = (double)m0->cpu + m0->rate * (double)(t0 - m0->at);
    ap_cpu_mark m1 = ap_rss_cpu_mark(r);
    double after = (double)m1.cpu + m1.rate * (double)(now - m1.at);
    if (__builtin_expect(now - m1.at > 2 * r->interval_ticks, 0) &&
        now - t0 >= r->interval_ticks) {
        after = (double)ap_rss_process_cpu_now();
    }
    return after > before ? (int64_t)(after - before) : 0;
}

/* At a stage's entry, before its RSS is read: one load when the sampler
 * is polling. */
static inline void
ap_rss_wake_if_idle(ap_rss *r)
{
    if (atomic_load_explicit(&r->idle, memory_order_relaxed)) {
        ap_rss_wake(r);
    }
}

#endif
