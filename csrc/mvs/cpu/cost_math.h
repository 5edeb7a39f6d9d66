/* Per-pixel maths shared by the C and CUDA kernels: the bilinear sample
 * and the window costs from window sums. Branch-free, so that the C loops
 * around them vectorise. */
#ifndef AP_COST_MATH_H
#define AP_COST_MATH_H

#include <math.h>
#include <stddef.h>

#include "sweep.h"
#include "../geometry/host_device.h"

/* A sample this far (pixels) outside the image, or less, is seen, on
 * the border. The CPU and the GPU reach a sample's coordinates by
 * different roundings: the CPU folds K [R | t] into one matrix and
 * starts refraction from a table, the GPU multiplies through K, R and t
 * with fused multiply-adds and starts Newton from the straight line. A
 * sample that exact arithmetic puts on the border (every row of a pair
 * with a horizontal baseline, every column of a vertical one) lands a
 * few ulps inside on one and outside on the other; the two differ by
 * under 1e-6 px, far less than this slack, so both see it. */
#define AP_BORDER_SLACK 1e-3

/* Whether a bilinear sample at (u, v) in an (h, w) image, pixel centres
 * at integers, is seen: 0 where u or v is NaN or (u, v) lies outside the
 * image by more than AP_BORDER_SLACK (a sample within it takes the
 * border's value). */
/* ap_bilinear_inside, and the sample's cell: its top-left texel's index
 * and the fractions across it. The index is an int (images hold fewer
 * than 2^31 pixels). */
static inline AP_HD int
ap_bilinear_inside(int h, int w, double u, double v)
{
    return (u >= -AP_BORDER_SLACK) & (v >= -AP_BORDER_SLACK) &
           (u <= w - 1 + AP_BORDER_SLACK) & (v <= h - 1 + AP_BORDER_SLACK);
}

static inline AP_HD int
ap_bilinear_cell(int h, int w, double u, double v, int *k, double *fx,
                 double *fy)
{
    double right = w - 1, bottom = h - 1;
    int inside = ap_bilinear_inside(h, w, u, v);
    double x = inside ? u : 0.0, y = inside ? v : 0.0;
    x = x < 0 ? 0.0 : (x > right ? right : x);
    y = y < 0 ? 0.0 : (y > bottom ? bottom : y);
    int x0 = (int)x, y0 = (int)y;
    x0 = x0 > w - 2 ? w - 2 : x0;
    y0 = y0 > h - 2 ? h - 2 : y0;
    *fx = x - x0;
    *fy = y - y0;
    *k = y0 * w + x0;
    return inside;
}

/* Bilinear mix of a cell's four values (q01 right of q00, q10 below it)
 * at fractions fx across, fy down. */
static inline AP_HD double
ap_bilinear_mix(double q00, double q01, double q10, double q11, double fx,
                double fy)
{
    double top = q00 + fx * (q01 - q00);
    double bottom = q10 + fx * (q11 - q10);
    return top + fy * (bottom - top);
}

/* Bilinear from img (h, w) at (u, v); NaN outside (ap_bilinear_cell). */
static inline AP_HD float
ap_bilinear(const float *img, int h, int w, double u, double v)
{
    int k;
    double fx, fy;
    int inside = ap_bilinear_cell(h, w, u, v, &k, &fx, &fy);
    float value = (float)ap_bilinear_mix(img[k], img[k + 1], img[k + w],
                                         img[k + w + 1], fx, fy);
    return inside ? value : NAN;
}

/* Window costs from the sums over the window of: n (seen pixels, or their
 * Gaussian weight), r, s, r^2, s^2, r s (reference, warped). A window
 * seeing fewer than half its pixels (full / 2) costs 1, and so does an
 * NCC window without texture. */

/* Means, variances and covariance of a window from its sums. */
typedef struct {
    double mr, ms, vr, vs, cov;
} ap_moments;

static inline AP_HD ap_moments
ap_window_moments(double n, double sr, double ss, double srr, double sss,
                  double srs)
{
    double inv = 1.0 / n;
    ap_moments m;
    m.mr = sr * inv;
    m.ms = ss * inv;
    m.vr = srr * inv - m.mr * m.mr;
    m.vs = sss * inv - m.ms * m.ms;
    m.cov = srs * inv - m.mr * m.ms;
    return m;
}

static inline AP_HD double
ap_ncc_cost(double full, double n, double sr, double ss, double srr,
            double sss, double srs)
{
    /* the moments times n^2, which spares the division by n */
    double vr = n * srr - sr * sr, vs = n * sss - ss * ss;
    double ncc = (n * srs - sr * ss) / sqrt(vr * vs);
    ncc = ncc > 1 ? 1 : (ncc < -1 ? -1 : ncc);
    double least = AP_NCC_MIN_VARIANCE * n * n;
    int flat = (n < full / 2) | (vr < least) | (vs < least);
    return flat ? 1.0 : 1.0 - ncc;
}

/* full: the window's total weight (1 for normalised Gaussian weights) */
static inline AP_HD double
ap_ssim_cost(double full, double n, double sr, double ss, double srr,
             double sss, double srs)
{
    ap_moments m = ap_window_moments(n, sr, ss, srr, sss, srs);
    double mr = m.mr, ms = m.ms, vr = m.vr, vs = m.vs, cov = m.cov;
    double ssim = ((2 * mr * ms + AP_SSIM_C1) * (2 * cov + AP_SSIM_C2)) /
                  ((mr * mr + ms * ms + AP_SSIM_C1) * (vr + vs + AP_SSIM_C2));
    double c = 1.0 - ssim;
    c = c < 0 ? 0 : (c > 1 ? 1 : c);
    return n < full / 2 ? 1.0 : c;
}

static inline AP_HD double
ap_sad_cost(double full, double n, double sad)
{
    double c = sad / n;
    return n < full / 2 ? 1.0 : c;
}

#endif
