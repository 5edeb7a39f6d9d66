/* Per-pixel maths of AquaMVS's costs (parity_costs.h), shared by the C
 * and CUDA kernels: its zero-padded sample and the window costs from the
 * filtered sums. Branch-free, so that the C loops around them
 * vectorise. */
#ifndef AP_PARITY_MATH_H
#define AP_PARITY_MATH_H

#include <math.h>

#include "../cpu/cost_math.h"
#include "../cpu/sweep.h"
#include "../geometry/host_device.h"

/* The division guard of AquaMVS's NCC. */
#define AP_AQUAMVS_NCC_EPS 1e-8
/* The least count a window's weight is clamped to before dividing:
 * NCC's (a pixel) and SSIM's. */
#define AP_AQUAMVS_NCC_LEAST 1.0
#define AP_AQUAMVS_SSIM_LEAST 1e-8

/* grid_sample(bilinear, padding_mode="zeros", align_corners=True) of img
 * (h, w) at pixel (u, v), pixel centres at integers: texels outside the
 * image count as 0. Coordinates are clamped first to two pixels beyond
 * the border, where every texel of the cell is outside already, so that
 * the cell's index is an int. u, v finite or clamped: never NaN here. */
static inline AP_HD double
ap_bilinear_zeros(const float *img, int h, int w, double u, double v)
{
    double x = u < -2.0 ? -2.0 : (u > w + 1.0 ? w + 1.0 : u);
    double y = v < -2.0 ? -2.0 : (v > h + 1.0 ? h + 1.0 : v);
    double left = floor(x), top = floor(y);
    int x0 = (int)left, y0 = (int)top, x1 = x0 + 1, y1 = y0 + 1;
    double in_x0 = (x0 >= 0) & (x0 < w), in_x1 = (x1 >= 0) & (x1 < w);
    double in_y0 = (y0 >= 0) & (y0 < h), in_y1 = (y1 >= 0) & (y1 < h);
    x0 = x0 < 0 ? 0 : (x0 > w - 1 ? w - 1 : x0);
    x1 = x1 < 0 ? 0 : (x1 > w - 1 ? w - 1 : x1);
    y0 = y0 < 0 ? 0 : (y0 > h - 1 ? h - 1 : y0);
    y1 = y1 < 0 ? 0 : (y1 > h - 1 ? h - 1 : y1);
    double q00 = img[y0 * w + x0] * (in_x0 * in_y0);
    double q01 = img[y0 * w + x1] * (in_x1 * in_y0);
    double q10 = img[y1 * w + x0] * (in_x0 * in_y1);
    double q11 = img[y1 * w + x1] * (in_x1 * in_y1);
    return ap_bilinear_mix(q00, q01, q10, q11, x - left, y - top);
}

/* 1 - NCC from a box window's seen count n and sums of the centred
 * products; 1 where fewer than `fewest` ((s s) / 2) pixels are seen;
 * clamped to [0, 2]. */
static inline AP_HD double
ap_aquamvs_ncc(double n, double srr, double sss, double srs, double fewest)
{
    double c = n < AP_AQUAMVS_NCC_LEAST ? AP_AQUAMVS_NCC_LEAST : n;
    double vr = srr / c, vs = sss / c, cov = srs / c;
    double cost = 1.0 - cov / (sqrt(vr * vs) + AP_AQUAMVS_NCC_EPS);
    cost = n < fewest ? 1.0 : cost;
    return cost < 0.0 ? 0.0 : (cost > 2.0 ? 2.0 : cost);
}

/* 1 - SSIM from a Gaussian window's seen weight n, the pixel's means
 * and the sums of the centred products; 1 where the weight is under
 * half; clamped to [0, 1]. */
static inline AP_HD double
ap_aquamvs_ssim(double n, double mr, double ms, double srr, double sss,
                double srs)
{
    double c = n < AP_AQUAMVS_SSIM_LEAST ? AP_AQUAMVS_SSIM_LEAST : n;
    double vr = srr / c, vs = sss / c, cov = srs / c;
    double ssim = ((2 * mr * ms + AP_SSIM_C1) * (2 * cov + AP_SSIM_C2)) /
                  ((mr * mr + ms * ms + AP_SSIM_C1) *
                   (vr + vs + AP_SSIM_C2));
    double cost = c < 0.5 ? 1.0 : 1.0 - ssim;
    return cost < 0.0 ? 0.0 : (cost > 1.0 ? 1.0 : cost);
}

#endif
