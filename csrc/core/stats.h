/* Streaming aggregates of one stage path: exact whatever the span cap.
 *
 * The duration histogram holds only the run of buckets its calls fell in,
 * grown in blocks of AP_HIST_BLOCK buckets as calls land outside it: a
 * path called once costs one block (64 bytes), not the 11 KiB of all
 * AP_HIST_BUCKETS, and a call inside the run costs a compare more than a
 * flat array. */
#ifndef AP_STATS_H
#define AP_STATS_H

#include <stdint.h>
#include "hist.h"
#include "status.h"

#define AP_HIST_BLOCK 8

typedef struct {
    int64_t count;
    int64_t raised;      /* spans closed by an exception */
    int64_t unclosed;    /* spans not closed by their own exit */
    int64_t suspended;   /* spans whose context was left while open: their
                          * CPU time includes other contexts' */
    int64_t total_ns;
    int64_t self_ns;
    int64_t min_ns;
    int64_t max_ns;
    double mean_ns;      /* Welford */
    double m2;
    int64_t cpu_ns;
    int64_t proc_cpu_ns; /* the process's CPU time (every thread's) while
                          * open, from the memory sampler: 0 without it */
    int64_t items;
    int64_t mem_peak;    /* highest RSS seen while open, bytes */
    int64_t mem_delta;   /* sum of RSS(exit) - RSS(enter), bytes */
    int64_t mem_rise;    /* the most the process's RSS rose above its
                          * value at entry within one call, bytes: what
                          * the call took at once (with its sub-stages and
                          * other threads meanwhile), which mem_peak, over
                          * all calls, cannot tell from what other code
                          * kept between them */
    uint64_t *hist;      /* counts of buckets hist_lo .. hist_lo + hist_n
                          * - 1, owned; NULL (hist_n 0) before any call */
    uint16_t hist_lo, hist_n;
} ap_stats;

/* An empty s, owning nothing. */
void ap_stats_init(ap_stats *s);

/* Frees s's histogram and leaves s empty. */
void ap_stats_free(ap_stats *s);

/* Counts a call of bucket i outside the run held: grows the run, or when
 * it cannot, counts the call in the nearest bucket held. AP_OK or
 * AP_ERR_NOMEM. */
ap_status ap_stats_hist_miss(ap_stats *s, uint32_t i);

/* a + b, held at the int64 bounds instead of wrapping: items= sums of a
 * long run must never turn negative (a report's reader refuses those). */
static inline int64_t
ap_add_saturated(int64_t a, int64_t b)
{
    int64_t sum;
    if (__builtin_add_overflow(a, b, &sum)) {
        return b > 0 ? INT64_MAX : INT64_MIN;
    }
    return sum;
}

/* Adds one call. AP_OK, or AP_ERR_NOMEM when the histogram could not grow
 * to the call's bucket: the call then counts in the nearest bucket held
 * (in none when none is held yet); every other aggregate stays exact.
 * Inline: every stage exit calls it. */
static inline ap_status
ap_stats_add(ap_stats *s, int64_t wall_ns, int64_t self_ns, int64_t cpu_ns,
             int64_t items)
{
    s->count++;
    s->total_ns += wall_ns;
    s->self_ns += self_ns;
    s->cpu_ns += cpu_ns;
    s->items = ap_add_saturated(s->items, items);
    if (wall_ns < s->min_ns) {
        s->min_ns = wall_ns;
    }
    if (wall_ns > s->max_ns) {
        s->max_ns = wall_ns;
    }
    double delta = (double)wall_ns - s->mean_ns;
    s->mean_ns += delta / (double)s->count;
    s->m2 += delta * ((double)wall_ns - s->mean_ns);
    uint32_t i = ap_hist_index(wall_ns);
    uint32_t at = i - s->hist_lo;       /* wraps when i < hist_lo */
    if (__builtin_expect(at < s->hist_n, 1)) {
        s->hist[at]++;
        return AP_OK;
    }
    return ap_stats_hist_miss(s, i);
}

/* Folds src into dst as if dst had seen src's calls too. AP_OK, or
 * AP_ERR_NOMEM when dst's histogram could not grow to src's buckets:
 * those counts then go to dst's nearest bucket (nowhere when it holds
 * none); every other aggregate stays exact. */
ap_status ap_stats_merge(ap_stats *dst, const ap_stats *src);

/* ap_stats_merge, then src is freed. A dst without a histogram takes
 * src's without allocating, so that merging into an empty dst (one
 * thread's path into the report) cannot fail. */
ap_status ap_stats_absorb(ap_stats *dst, ap_stats *src);

/* dst becomes a copy of src (dst's old content is not freed). AP_OK, or
 * AP_ERR_NOMEM with dst empty. */
ap_status ap_stats_copy(ap_stats *dst, const ap_stats *src);

/* The count of bucket i: 0 outside the run held. */
static inline uint64_t
ap_stats_hist_at(const ap_stats *s, uint32_t i)
{
    uint32_t at = i - s->hist_lo;
    return at < s->hist_n ? s->hist[at] : 0;
}

/* Adds count calls to bucket i (< AP_HIST_BUCKETS), growing the run held.
 * AP_OK, or AP_ERR_NOMEM with s unchanged. */
ap_status ap_stats_hist_add(ap_stats *s, uint32_t i, uint64_t count);

#endif
