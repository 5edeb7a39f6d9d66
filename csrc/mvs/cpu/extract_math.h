/* Winner-take-all depth of one pixel, shared by the C and CUDA kernels. */
#ifndef AP_EXTRACT_MATH_H
#define AP_EXTRACT_MATH_H

#include <math.h>

#include "../geometry/host_device.h"

/* a + b c rounded after the product and again after the sum, as C
 * without contraction computes it: nvcc would fuse them into one
 * rounding, and the GPU's depth would leave the CPU's by an ulp. */
static inline AP_HD double
ap_extract_mul_add(double a, double b, double c)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, __dmul_rn(b, c));
#else
    return a + b * c;
#endif
}

/* The depth and confidence of a pixel of d planes from what a scan of
 * its costs keeps: the least cost's plane `best` (the first of equals),
 * the costs' sum in plane order, and the costs lo, mid, hi of planes
 * best - 1, best, best + 1 (lo and hi unread at the first and last
 * plane). Split from ap_extract_pixel so that a scan that never holds
 * the pixel's d costs at once (csrc/mvs/cuda/gpu_depth.h) gives the
 * same bits. */
static inline AP_HD void
ap_extract_finish(int best, int d, double sum, double lo, double mid,
                  double hi, const double *depths, float *depth,
                  float *confidence)
{
    /* finite floats cannot add up past a double's range (2^31 of
     * FLT_MAX is 7e47): the sum is finite just when every cost is */
    if (!isfinite(sum) || best == 0 || best == d - 1) {
        *depth = NAN;
        *confidence = 0.0f;
        return;
    }
    double curve = lo - 2 * mid + hi;
    double offset = curve > 0 ? 0.5 * (lo - hi) / curve : 0.0;
    offset = offset > 0.5 ? 0.5 : (offset < -0.5 ? -0.5 : offset);
    double step = offset >= 0 ? depths[best + 1] - depths[best]
                              : depths[best] - depths[best - 1];
    *depth = (float)ap_extract_mul_add(depths[best], offset, step);
    double mean = sum / d;
    double a = 1.0 - (mid < 0 ? 0 : (mid > 1 ? 1 : mid));
    double b = mean > 0 ? 1.0 - mid / mean : 0.0;
    b = b < 0 ? 0 : (b > 1 ? 1 : b);
    *confidence = (float)sqrt(a * b);
}

/* c: the pixel's d costs. Parabola refinement clamped to half a step;
 * NaN depth and confidence 0 at the first and last hypothesis, and where
 * a cost is NaN or infinite: a NaN never compares less, so it would hide
 * the best cost behind it, and an infinite one would make the parabola's
 * offset NaN while the confidence stayed above 0. */
static inline AP_HD void
ap_extract_pixel(const float *c, int d, const double *depths, float *depth,
                 float *confidence)
{
    int best = 0;
    double sum = 0.0;
    for (int k = 0; k < d; k++) {
        sum += c[k];
        if (c[k] < c[best]) {
            best = k;
        }
    }
    int edge = best == 0 || best == d - 1;
    ap_extract_finish(best, d, sum, edge ? 0.0 : c[best - 1], c[best],
                      edge ? 0.0 : c[best + 1], depths, depth, confidence);
}

#endif
