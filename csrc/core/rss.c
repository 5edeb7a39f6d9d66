#include "rss.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

static void
sample(ap_rss *r)
{
    int64_t rss = read_statm(r->fd);
    if (rss < 0) {
        return;
    }
    ap_rss_log(r, monotonic_ns(), rss);
    pthread_mutex_lock(&r->lock);
    uint64_t seq = atomic_load_explicit(&r->seq, memory_order_relaxed) + 1;
    push_mark_unlocked(r, seq, rss);
    pthread_mutex_unlock(&r->lock);
    atomic_store_explicit(&r->current, rss, memory_order_relaxed);
    atomic_store_explicit(&r->seq, seq, memory_order_release);
}

static void *
sampler_main(void *arg)
{
    ap_rss *r = arg;
    struct timespec pause = {
        (time_t)(r->interval_ns / 1000000000),
        (long)(r->interval_ns % 1000000000),
    };
    while (!atomic_load_explicit(&r->stop, memory_order_acquire)) {
        nanosleep(&pause, NULL);
        sample(r);
    }
    return NULL;
}

ap_status
ap_rss_start(ap_rss *r, int64_t interval_ns)
{
    memset(r, 0, sizeof(*r));
    r->interval_ns = interval_ns;
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
    r->marks = malloc(r->cap * sizeof(*r->marks));
    r->log = malloc(AP_RSS_LOG_MAX * sizeof(*r->log));
    if (!r->marks || !r->log) {
        st = AP_ERR_NOMEM;
        goto error;
    }
    r->log_stride = 1;
    ap_rss_log(r, monotonic_ns(), rss);
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        goto error;
    }
    atomic_store(&r->current, rss);
    push_mark_unlocked(r, 0, rss);
    if (pthread_create(&r->thread, NULL, sampler_main, r) != 0) {
        pthread_mutex_destroy(&r->lock);
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

/* Frees all but the log, which outlives the sampler for the report. */
static void
release(ap_rss *r)
{
    pthread_mutex_destroy(&r->lock);
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
    atomic_store_explicit(&r->stop, 1, memory_order_release);
    pthread_join(r->thread, NULL);
    release(r);
}

void
ap_rss_forget(ap_rss *r)
{
    if (r->running) {
        release(r);
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
