/* Log-bucketed duration histogram: values below 2^AP_HIST_SUB_BITS ns are
 * exact; above, each power of two is split into 2^AP_HIST_SUB_BITS
 * buckets, so a bucket's width is at most 1/32 of its lower bound.
 * aquaprof/report.py mirrors this layout: change both or neither. */
#ifndef AP_HIST_H
#define AP_HIST_H

#include <stdint.h>

#define AP_HIST_SUB_BITS 5
#define AP_HIST_SUB (1 << AP_HIST_SUB_BITS)
#define AP_HIST_MAX_EXP 47 /* 2^48 ns = 78 hours: larger values clamp */
#define AP_HIST_BUCKETS \
    ((AP_HIST_MAX_EXP - AP_HIST_SUB_BITS + 2) * AP_HIST_SUB)

static inline uint32_t
ap_hist_index(int64_t v)
{
    if (v < AP_HIST_SUB) {
        return v < 0 ? 0 : (uint32_t)v;
    }
    int e = 63 - __builtin_clzll((unsigned long long)v);
    if (e > AP_HIST_MAX_EXP) {
        return AP_HIST_BUCKETS - 1;
    }
    uint32_t sub = (uint32_t)(v >> (e - AP_HIST_SUB_BITS)) & (AP_HIST_SUB - 1);
    return (uint32_t)(e - AP_HIST_SUB_BITS + 1) * AP_HIST_SUB + sub;
}

/* Smallest value that falls into bucket i. */
static inline int64_t
ap_hist_lower(uint32_t i)
{
    if (i < AP_HIST_SUB) {
        return i;
    }
    int e = (int)(i / AP_HIST_SUB) + AP_HIST_SUB_BITS - 1;
    int64_t sub = i % AP_HIST_SUB;
    return ((int64_t)AP_HIST_SUB + sub) << (e - AP_HIST_SUB_BITS);
}

#endif
