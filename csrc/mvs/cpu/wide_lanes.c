#include "wide_lanes.h"

#include <string.h>

#include "vectorize.h"

static int allowed = 1;

void
ap_wide_lanes_allow(int allow)
{
    allowed = allow;
}

#if AP_CLONES

int
ap_wide_lanes(void)
{
    return allowed && __builtin_cpu_supports("x86-64-v4");
}

/* AVX-512 for these alone; -std=c11 keeps contraction off, so no FMA */
#define AP_LANES_FN __attribute__((target("arch=x86-64-v4")))
typedef double v8d __attribute__((vector_size(8 * sizeof(double))));
typedef long long v8l __attribute__((vector_size(8 * sizeof(long long))));

/* eight floats widened to doubles: built element by element, one
 * conversion */
static inline AP_LANES_FN void
widen(const float *p, v8d *d)
{
    v8d eight = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]};
    *d = eight;
}

#define AP_LANES 8
#define AP_LANES_VEC v8d
#define AP_LANES_MASK v8l
#define AP_LANES_WIDEN widen
#define AP_LANES_NAME(x) ap_wide_##x
#include "window_lanes.h"

#else

/* No clones here, so no AVX-512 build: never called, yet defined, at
 * four lanes */
int
ap_wide_lanes(void)
{
    (void)allowed;
    return 0;
}

#include "four_lanes.h"

#define AP_LANES 4
#define AP_LANES_VEC v4d
#define AP_LANES_MASK v4l
#define AP_LANES_WIDEN widen_four
#define AP_LANES_NAME(x) ap_wide_##x
#define AP_LANES_FN
#include "window_lanes.h"

#endif
