/* Four doubles a vector, and window_lanes.h's loops at that width
 * (four_*), inlined into the includer's clones. GCC lowers the vectors to
 * whatever registers the clone being compiled has. */
#ifndef AP_FOUR_LANES_H
#define AP_FOUR_LANES_H

#include <string.h>

typedef double v4d __attribute__((vector_size(4 * sizeof(double))));
typedef long long v4l __attribute__((vector_size(4 * sizeof(long long))));

/* Four floats widened to doubles. Built element by element: GCC 12
 * lowers __builtin_convertvector from four floats to four doubles as two
 * halves joined, four instructions where this takes one. */
static inline void
widen_four(const float *p, v4d *d)
{
    v4d four = {p[0], p[1], p[2], p[3]};
    *d = four;
}

#define AP_LANES 4
#define AP_LANES_VEC v4d
#define AP_LANES_MASK v4l
#define AP_LANES_WIDEN widen_four
#define AP_LANES_NAME(x) four_##x
#define AP_LANES_FN static inline __attribute__((always_inline))
#include "window_lanes.h"

#endif
