#include "rss.h"
#include "quiet_thread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"

#define AP_RSS_MARKS 16384

static int64_t
read_statm(int fd)
{
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    char *p = buf;
    strtoll(p, &p, 10);                 /* total program size */
    long long resident = strtoll(p, &p, 10);
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

int64_t
ap_rss_read_now(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    int64_t rss = read_statm(fd);
    close(fd);
    return rss;
}

static void
push_mark_unlocked(ap_rss *r, uint64_t seq, int64_t rss)
{
    while (r->top > r->bottom && r->marks[(r->top - 1) % r->cap].rss <= rss) {
        r->top--;
    }
    if (r->top - r->bottom == r->cap) {
        /* RSS fell for cap samples in a row: forget the oldest, keeping its
         * value so no older query under-reports. */
        int64_t old = r->marks[r->bottom % r->cap].rss;
        if (old > r->evicted_peak) {
            r->evicted_peak = old;
        }
        r->bottom++;
    }
    r->marks[r->top % r->cap] = (ap_rss_mark){seq, rss};
    r->top++;
}

static int64_t
monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void
ap_rss_log(ap_rss *r, int64_t t_ns, int64_t rss)
{
    if (r->log == NULL || r->log_seen++ % r->log_stride != 0) {
        return;
    }
    if (r->log_len == AP_RSS_LOG_MAX) {
        for (uint32_t i = 0; i < AP_RSS_LOG_MAX / 2; i++) {
            r->log[i] = r->log[2 * i];
        }
        r->log_len = AP_RSS_LOG_MAX / 2;
        r->log_stride *= 2;
        if ((r->log_seen - 1) % r->log_stride != 0) {
            return;     /* off the coarser grid */
        }
    }
    r->log[r->log_len++] = (ap_rss_sample){t_ns, rss};
}

/* The sampler's, and a waking stage's: both may sample at once. */
static void
sample(ap_rss *r)
{
    int64_t rss = read_statm(r->fd);
    if (rss < 0) {
        return;
    }
    pthread_mutex_lock(&r->lock);
    /* under the lock: a stage waking the sampler samples too, and the
     * later store must hold the later reading */
    int64_t cpu = ap_process_cpu_ns(), at = ap_ticks();
    ap_rss_log(r, monotonic_ns(), rss);   /* stamped in order */
    uint64_t seq = atomic_load_explicit(&r->seq, memory_order_relaxed) + 1;
    push_mark_unlocked(r, seq, rss);
    atomic_store_explicit(&r->current, rss, memory_order_relaxed);
    int64_t cpu0 = atomic_load_explicit(&r->cpu, memory_order_relaxed);
    int64_t at0 = atomic_load_explicit(&r->cpu_at, memory_order_relaxed);
    if (at > at0 && cpu >= cpu0) {
        atomic_store_explicit(&r->cpu_rate,
                              (double)(cpu - cpu0) / (double)(at - at0),
                              memory_order_relaxed);
        atomic_store_explicit(&r->cpu, cpu, memory_order_relaxed);
        atomic_store_explicit(&r->cpu_at, at, memory_order_relaxed);
    }
    atomic_store_explicit(&r->seq, seq, memory_order_release);
    pthread_mutex_unlock(&r->lock);
}

static struct timespec
deadline_after(int64_t ns)
{
    int64_t t = monotonic_ns() + ns;
    return (struct timespec){(time_t)(t / 1000000000),
                             (long)(t % 1000000000)};
}

/* Waits out one pause, under wait_lock: until the deadline, stop, or
 * (when idle) a stage's wake. */
static void
pause_locked(ap_rss *r, int idle)
{
    int64_t ns = r->interval_ns;
    if (idle && ns < AP_RSS_IDLE_NS) {
        ns = AP_RSS_IDLE_NS;
    }
    struct timespec until = deadline_after(ns);
    while (!r->stopping && !(idle && !atomic_load(&r->idle))) {
        if (pthread_cond_timedwait(&r->wake, &r->wait_lock, &until) ==
            ETIMEDOUT) {
            break;
        }
    }
}

static void *
sampler_main(void *arg)
{
    ap_rss *r = arg;
    int64_t quiet_ns = 0;
    pthread_mutex_lock(&r->wait_lock);
    for (;;) {
        pause_locked(r, atomic_load(&r->idle));
        if (r->stopping) {
            break;
        }
        pthread_mutex_unlock(&r->wait_lock);
        int64_t was = atomic_load_explicit(&r->current, memory_order_relaxed);
        sample(r);
        int64_t moved = atomic_load_explicit(&r->current,
                                             memory_order_relaxed) - was;
        /* the process allocating or freeing is activity too: a stage that
         * allocates for long with no stage entered inside keeps its pace */
        if (moved >= AP_RSS_MOVED || moved <= -AP_RSS_MOVED ||
            !r->busy || r->busy(r->busy_arg)) {
            quiet_ns = 0;
            if (atomic_load_explicit(&r->idle, memory_order_relaxed)) {
                atomic_store(&r->idle, 0);
            }
        } else if (!atomic_load(&r->idle) &&
                   (quiet_ns += r->interval_ns) >= AP_RSS_QUIET_NS) {
            atomic_store(&r->idle, 1);
        }
        pthread_mutex_lock(&r->wait_lock);
    }
    pthread_mutex_unlock(&r->wait_lock);
    return NULL;
}

int64_t
ap_rss_refresh(ap_rss *r)
{
    int64_t rss = read_statm(r->fd);
    if (rss >= 0) {
        atomic_store_explicit(&r->current, rss, memory_order_relaxed);
    }
    return rss;
}

int64_t
ap_rss_process_cpu_now(void)
{
    return ap_process_cpu_ns();
}

void
ap_rss_wake(ap_rss *r)
{
    int expected = 1;
    if (!atomic_compare_exchange_strong(&r->idle, &expected, 0)) {
        return;     /* another stage woke it */
    }
    sample(r);
    pthread_mutex_lock(&r->wait_lock);
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->wait_lock);
}

/* The sampler's wait: a condition on the monotonic clock, so that
 * setting the wall clock moves no deadline. 0 or -1 (nothing left). */
static int
init_wait(ap_rss *r)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) {
        return -1;
    }
    int ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&r->wake, &attr) == 0;
    pthread_condattr_destroy(&attr);
    if (!ok) {
        return -1;
    }
    if (pthread_mutex_init(&r->wait_lock, NULL) != 0) {
        pthread_cond_destroy(&r->wake);
        return -1;
    }
    return 0;
}

ap_status
ap_rss_start(ap_rss *r, int64_t interval_ns, int (*busy)(void *),
             void *busy_arg)
{
    memset(r, 0, sizeof(*r));
    r->interval_ns = interval_ns;
    r->interval_ticks = ap_clock_tsc
        ? (int64_t)((double)interval_ns / ap_clock_ns_per_tick)
        : interval_ns;
    r->busy = busy;
    r->busy_arg = busy_arg;
    r->cap = AP_RSS_MARKS;
    r->fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        return AP_ERR_SYSTEM;
    }
    ap_status st = AP_ERR_SYSTEM;
    int64_t rss = read_statm(r->fd);
    if (rss < 0) {
        goto error;
    }
    r->marks = ap_malloc(r->cap * sizeof(*r->marks));
    r->log = ap_malloc(AP_RSS_LOG_MAX * sizeof(*r->log));
    if (!r->marks || !r->log) {
        st = AP_ERR_NOMEM;
        goto error;
    }
    r->log_stride = 1;
    ap_rss_log(r, monotonic_ns(), rss);
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        goto error;
    }
    if (init_wait(r) != 0) {
        pthread_mutex_destroy(&r->lock);
        goto error;
    }
    atomic_store(&r->current, rss);
    atomic_store(&r->cpu, ap_process_cpu_ns());
    atomic_store(&r->cpu_at, ap_ticks());
    atomic_store(&r->cpu_rate, 0.0);
    push_mark_unlocked(r, 0, rss);
    if (ap_quiet_thread(&r->thread, sampler_main, r) != 0) {
        pthread_mutex_destroy(&r->lock);
        pthread_mutex_destroy(&r->wait_lock);
        pthread_cond_destroy(&r->wake);
        goto error;
    }
    r->running = 1;
    return AP_OK;
error:
    free(r->marks);
    free(r->log);
    close(r->fd);
    memset(r, 0, sizeof(*r));
    return st;
}

/* Frees all but the log, which outlives the sampler for the report. In a
 * forked child the locks and the condition are left as they are: the
 * sampler may have held or waited on them at the fork, and destroying a
 * condition with a waiter that no longer exists blocks for ever. */
static void
release(ap_rss *r, int joined)
{
    if (joined) {
        pthread_mutex_destroy(&r->lock);
        pthread_mutex_destroy(&r->wait_lock);
        pthread_cond_destroy(&r->wake);
    }
    free(r->marks);
    close(r->fd);
    r->marks = NULL;
    r->fd = -1;
    r->running = 0;
}

void
ap_rss_free_log(ap_rss *r)
{
    free(r->log);
    r->log = NULL;
    r->log_len = 0;
}

void
ap_rss_stop(ap_rss *r)
{
    if (!r->running) {
        return;
    }
    pthread_mutex_lock(&r->wait_lock);
    r->stopping = 1;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->wait_lock);
    pthread_join(r->thread, NULL);
    release(r, 1);
}

void
ap_rss_forget(ap_rss *r)
{
    if (r->running) {
        release(r, 0);
    }
    ap_rss_free_log(r);
}

int64_t
ap_rss_peak_since(ap_rss *r, uint64_t since_seq)
{
    int64_t peak = -1;
    pthread_mutex_lock(&r->lock);
    uint64_t lo = r->bottom, hi = r->top;
    if (lo < hi && r->marks[lo % r->cap].seq <= since_seq) {
        /* binary search for the first mark after since_seq */
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (r->marks[mid % r->cap].seq <= since_seq) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if (hi < r->top) {
            peak = r->marks[hi % r->cap].rss;
        }
    } else if (lo < hi) {
        peak = r->evicted_peak > r->marks[lo % r->cap].rss
                   ? r->evicted_peak
                   : r->marks[lo % r->cap].rss;
    }
    pthread_mutex_unlock(&r->lock);
    return peak;
}
