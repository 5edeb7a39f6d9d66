/* Streaming aggregates of one stage path: exact whatever the span cap. */
#ifndef AP_STATS_H
#define AP_STATS_H

#include <stdint.h>
#include "hist.h"

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
    int64_t items;
    int64_t mem_peak;    /* highest RSS seen while open, bytes */
    int64_t mem_delta;   /* sum of RSS(exit) - RSS(enter), bytes */
    uint64_t hist[AP_HIST_BUCKETS];
} ap_stats;

void ap_stats_init(ap_stats *s);

void ap_stats_add(ap_stats *s, int64_t wall_ns, int64_t self_ns,
                  int64_t cpu_ns, int64_t items);

/* Folds src into dst as if dst had seen src's samples too. */
void ap_stats_merge(ap_stats *dst, const ap_stats *src);

#endif
