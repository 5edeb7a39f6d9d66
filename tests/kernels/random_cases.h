/* The kernel tests' cases: xorshift64*, so that every run draws the same
 * ones. */
#ifndef AP_TEST_RANDOM_CASES_H
#define AP_TEST_RANDOM_CASES_H

#include <stdint.h>

/* A double in [lo, hi), advancing the state *s. */
static inline double
uniform(uint64_t *s, double lo, double hi)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    double unit = (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-53;
    return lo + (hi - lo) * unit;
}

#endif
