#include "stats.h"

#include <string.h>

#include "alloc.h"

void
ap_stats_init(ap_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->min_ns = INT64_MAX;
}

void
ap_stats_free(ap_stats *s)
{
    free(s->hist);
    ap_stats_init(s);
}

/* Makes the run held cover buckets lo .. hi, whole blocks. AP_OK, or
 * AP_ERR_NOMEM with s unchanged. */
static ap_status
hist_cover(ap_stats *s, uint32_t lo, uint32_t hi)
{
    uint32_t old_lo = s->hist_lo, old_end = s->hist_lo + s->hist_n;
    if (s->hist_n && lo >= old_lo && hi < old_end) {
        return AP_OK;
    }
    if (s->hist_n) {
        lo = lo < old_lo ? lo : old_lo;
        hi = hi >= old_end ? hi : old_end - 1;
    }
    lo -= lo % AP_HIST_BLOCK;
    uint32_t end = hi + AP_HIST_BLOCK - hi % AP_HIST_BLOCK;
    end = end < AP_HIST_BUCKETS ? end : AP_HIST_BUCKETS;
    uint64_t *fresh = ap_calloc(end - lo, sizeof(*fresh));
    if (!fresh) {
        return AP_ERR_NOMEM;
    }
    if (s->hist_n) {
        memcpy(fresh + (old_lo - lo), s->hist, s->hist_n * sizeof(*fresh));
    }
    free(s->hist);
    s->hist = fresh;
    s->hist_lo = (uint16_t)lo;
    s->hist_n = (uint16_t)(end - lo);
    return AP_OK;
}

/* Adds count to bucket i, or when the run cannot grow to it, to the
 * nearest bucket held. */
static ap_status
hist_add_or_fold(ap_stats *s, uint32_t i, uint64_t count)
{
    if (hist_cover(s, i, i) == AP_OK) {
        s->hist[i - s->hist_lo] += count;
        return AP_OK;
    }
    if (s->hist_n) {
        s->hist[i < s->hist_lo ? 0 : s->hist_n - 1] += count;
    }
    return AP_ERR_NOMEM;
}

ap_status
ap_stats_hist_add(ap_stats *s, uint32_t i, uint64_t count)
{
    if (hist_cover(s, i, i) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    s->hist[i - s->hist_lo] += count;
    return AP_OK;
}

ap_status
ap_stats_hist_miss(ap_stats *s, uint32_t i)
{
    return hist_add_or_fold(s, i, 1);
}

static void
merge_scalars(ap_stats *dst, const ap_stats *src)
{
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
    dst->proc_cpu_ns = ap_add_saturated(dst->proc_cpu_ns, src->proc_cpu_ns);
    dst->items = ap_add_saturated(dst->items, src->items);
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
    if (src->mem_rise > dst->mem_rise) {
        dst->mem_rise = src->mem_rise;
    }
}

ap_status
ap_stats_merge(ap_stats *dst, const ap_stats *src)
{
    if (src->count == 0) {
        return AP_OK;
    }
    merge_scalars(dst, src);
    if (src->hist_n == 0) {
        return AP_OK;
    }
    if (hist_cover(dst, src->hist_lo, src->hist_lo + src->hist_n - 1u) ==
        AP_OK) {
        uint64_t *to = dst->hist + (src->hist_lo - dst->hist_lo);
        for (uint32_t k = 0; k < src->hist_n; k++) {
            to[k] += src->hist[k];
        }
        return AP_OK;
    }
    for (uint32_t k = 0; k < src->hist_n; k++) {
        if (src->hist[k]) {
            hist_add_or_fold(dst, src->hist_lo + k, src->hist[k]);
        }
    }
    return AP_ERR_NOMEM;
}

ap_status
ap_stats_absorb(ap_stats *dst, ap_stats *src)
{
    ap_status st = AP_OK;
    if (dst->hist_n == 0 && src->count != 0) {
        merge_scalars(dst, src);
        dst->hist = src->hist;
        dst->hist_lo = src->hist_lo;
        dst->hist_n = src->hist_n;
        src->hist = NULL;
        src->hist_n = 0;
    } else {
        st = ap_stats_merge(dst, src);
    }
    ap_stats_free(src);
    return st;
}

ap_status
ap_stats_copy(ap_stats *dst, const ap_stats *src)
{
    *dst = *src;
    if (src->hist_n == 0) {
        dst->hist = NULL;
        return AP_OK;
    }
    dst->hist = ap_malloc(src->hist_n * sizeof(*dst->hist));
    if (!dst->hist) {
        ap_stats_init(dst);
        return AP_ERR_NOMEM;
    }
    memcpy(dst->hist, src->hist, src->hist_n * sizeof(*dst->hist));
    return AP_OK;
}
