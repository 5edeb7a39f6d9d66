#include "stats.h"

#include <string.h>

void
ap_stats_init(ap_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->min_ns = INT64_MAX;
}

void
ap_stats_add(ap_stats *s, int64_t wall_ns, int64_t self_ns, int64_t cpu_ns,
             int64_t items)
{
    s->count++;
    s->total_ns += wall_ns;
    s->self_ns += self_ns;
    s->cpu_ns += cpu_ns;
    s->items += items;
    if (wall_ns < s->min_ns) {
        s->min_ns = wall_ns;
    }
    if (wall_ns > s->max_ns) {
        s->max_ns = wall_ns;
    }
    double delta = (double)wall_ns - s->mean_ns;
    s->mean_ns += delta / (double)s->count;
    s->m2 += delta * ((double)wall_ns - s->mean_ns);
    s->hist[ap_hist_index(wall_ns)]++;
}

void
ap_stats_merge(ap_stats *dst, const ap_stats *src)
{
    if (src->count == 0) {
        return;
    }
    int64_t n = dst->count + src->count;
    double delta = src->mean_ns - dst->mean_ns;
    dst->mean_ns += delta * (double)src->count / (double)n;
    dst->m2 += src->m2 + delta * delta * (double)dst->count *
               (double)src->count / (double)n;
    dst->count = n;
    dst->raised += src->raised;
    dst->unclosed += src->unclosed;
    dst->suspended += src->suspended;
    dst->total_ns += src->total_ns;
    dst->self_ns += src->self_ns;
    dst->cpu_ns += src->cpu_ns;
    dst->items += src->items;
    dst->mem_delta += src->mem_delta;
    if (src->min_ns < dst->min_ns) {
        dst->min_ns = src->min_ns;
    }
    if (src->max_ns > dst->max_ns) {
        dst->max_ns = src->max_ns;
    }
    if (src->mem_peak > dst->mem_peak) {
        dst->mem_peak = src->mem_peak;
    }
    for (uint32_t i = 0; i < AP_HIST_BUCKETS; i++) {
        dst->hist[i] += src->hist[i];
    }
}
