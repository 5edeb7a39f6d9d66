/* Host memory: a sampler thread reads the process RSS every interval and
 * keeps, for any past sample, the highest RSS seen since then, so a stage
 * exit learns its peak without a system call. */
#ifndef AP_RSS_H
#define AP_RSS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "status.h"

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
    _Atomic int64_t current;   /* bytes, last sample */
    _Atomic uint64_t seq;      /* samples taken so far */
    int64_t interval_ns;
    int fd;
    int running;
    atomic_int stop;
    pthread_t thread;
    /* A stack of samples with strictly decreasing RSS from bottom to top:
     * the first mark after sequence s holds the peak since s. Protected by
     * lock; only spans that saw a new sample read it. */
    pthread_mutex_t lock;
    ap_rss_mark *marks;
    uint64_t bottom, top; /* ever-growing; index marks modulo cap */
    uint32_t cap;
    int64_t evicted_peak;      /* highest RSS among marks evicted for room */
    /* written by the sampler thread only, read once it is joined */
    ap_rss_sample *log;
    uint32_t log_len, log_stride;
    uint64_t log_seen;
} ap_rss;

/* Reads RSS once now, in bytes; -1 if /proc/self/statm is unreadable. */
int64_t ap_rss_read_now(void);

/* Starts the sampler thread. AP_ERR_SYSTEM when RSS cannot be read or the
 * thread cannot start (nothing is left allocated then). */
ap_status ap_rss_start(ap_rss *r, int64_t interval_ns);

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

#endif
