#include "window_costs.h"

#include <math.h>

#include "cost_math.h"
#include "vectorize.h"

AP_VECTOR_CLONES void
ap_add_quantities(int w, const float *restrict ref,
                  const float *restrict warped, double weight,
                  double *restrict count, double *restrict sr,
                  double *restrict ss, double *restrict srr,
                  double *restrict sss, double *restrict srs)
{
    for (int x = 0; x < w; x++) {
        int seen = warped[x] == warped[x];
        double r = seen ? weight * ref[x] : 0.0;
        double s = seen ? (double)warped[x] : 0.0;
        count[x] += seen ? weight : 0.0;
        sr[x] += r;
        ss[x] += weight * s;
        srr[x] += r * ref[x];
        sss[x] += weight * s * s;
        srs[x] += r * s;
    }
}

AP_VECTOR_CLONES void
ap_add_differences(int w, const float *restrict ref,
                   const float *restrict warped, double weight,
                   double *restrict count, double *restrict sad)
{
    for (int x = 0; x < w; x++) {
        int seen = warped[x] == warped[x];
        double d = seen ? fabs((double)ref[x] - warped[x]) : 0.0;
        count[x] += seen ? weight : 0.0;
        sad[x] += weight * d;
    }
}

void
ap_add_row(double *cols, int w, ap_cost cost, const float *ref,
           const float *warped, double weight)
{
    double *q[AP_NQ];
    for (int k = 0; k < AP_NQ; k++) {
        q[k] = cols + (size_t)k * w;
    }
    if (cost == AP_COST_SAD) {
        ap_add_differences(w, ref, warped, weight, q[AP_Q_COUNT],
                           q[AP_Q_R]);
    } else {
        ap_add_quantities(w, ref, warped, weight, q[0], q[1], q[2], q[3],
                          q[4], q[5]);
    }
}

/* Prefix sums of nq rows of w, side by side into nq rows of w + 1: each
 * is a chain of dependent adds, and one at a time they would wait on the
 * adder's latency. The running sums stay in registers once nq is a
 * constant (the callers below pass one). */
static inline void
prefix_sums(const double *restrict cols, int nq, int w,
            double *restrict prefix)
{
    size_t stride = (size_t)w + 1;
    double run[AP_NQ] = {0.0};
    for (int k = 0; k < nq; k++) {
        prefix[k * stride] = 0.0;
    }
    for (int x = 0; x < w; x++) {
        for (int k = 0; k < nq; k++) {
            run[k] += cols[(size_t)k * w + x];
            prefix[k * stride + x + 1] = run[k];
        }
    }
}

/* Box sums of nq rows of column sums, from their prefix sums. */
AP_VECTOR_CLONES void
ap_box_sums(const double *restrict cols, int nq, int w, int r,
            double *restrict prefix, double *restrict out)
{
    size_t stride = (size_t)w + 1;
    if (nq == AP_NQ) {
        prefix_sums(cols, AP_NQ, w, prefix);
    } else {
        prefix_sums(cols, 2, w, prefix);
    }
    /* the borders clamp the window, the inside needs no clamp */
    int left = r < w ? r : w, right = w - r > left ? w - r : left;
    for (int k = 0; k < nq; k++) {
        const double *p = prefix + k * stride;
        double *o = out + k * stride;
        for (int x = 0; x < left; x++) {
            o[x] = p[x + r + 1 > w ? w : x + r + 1] - p[0];
        }
        /* offsets from base pointers, so that the loop reads two
         * streams instead of gathering through int indices */
        if (right > left) {     /* then left == r */
            const double *ahead = p + 2 * r + 1;
            double *inside = o + r;
            for (int i = 0; i < right - left; i++) {
                inside[i] = ahead[i] - p[i];
            }
        }
        for (int x = right; x < w; x++) {
            o[x] = p[w] - p[x - r < 0 ? 0 : x - r];
        }
    }
}

/* Gaussian-weighted sums; outside the image weighs nothing. */
static void
gauss_sums(const double *restrict col, int w, int r,
           const double *restrict gauss, double *restrict out)
{
    for (int x = 0; x < w; x++) {
        int lo = x - r < 0 ? 0 : x - r, hi = x + r + 1 > w ? w : x + r + 1;
        double s = 0.0;
        for (int j = lo; j < hi; j++) {
            s += gauss[j - x + r] * col[j];
        }
        out[x] = s;
    }
}

AP_VECTOR_CLONES void
ap_ncc_costs(int w, double full, const double *restrict n,
             const double *restrict sr, const double *restrict ss,
             const double *restrict srr, const double *restrict sss,
             const double *restrict srs, double *restrict acc)
{
    for (int x = 0; x < w; x++) {
        acc[x] += ap_ncc_cost(full, n[x], sr[x], ss[x], srr[x], sss[x],
                              srs[x]);
    }
}

AP_VECTOR_CLONES void
ap_ssim_costs(int w, const double *restrict n, const double *restrict sr,
              const double *restrict ss, const double *restrict srr,
              const double *restrict sss, const double *restrict srs,
              double *restrict acc)
{
    for (int x = 0; x < w; x++) {
        acc[x] += ap_ssim_cost(1.0, n[x], sr[x], ss[x], srr[x], sss[x],
                               srs[x]);
    }
}

AP_VECTOR_CLONES void
ap_sad_costs(int w, double full, const double *restrict n,
             const double *restrict sad, double *restrict acc)
{
    for (int x = 0; x < w; x++) {
        acc[x] += ap_sad_cost(full, n[x], sad[x]);
    }
}

void
ap_add_row_costs(const double *cols, int w, int radius, ap_cost cost,
                 const double *gauss, double *scratch, double *acc)
{
    int nq = cost == AP_COST_SAD ? 2 : AP_NQ;
    size_t stride = (size_t)w + 1;
    double *sums = scratch + AP_NQ * stride, *q[AP_NQ];
    for (int k = 0; k < nq; k++) {
        q[k] = sums + k * stride;
        if (cost == AP_COST_SSIM) {
            gauss_sums(cols + (size_t)k * w, w, radius, gauss, q[k]);
        }
    }
    if (cost != AP_COST_SSIM) {
        ap_box_sums(cols, nq, w, radius, scratch, sums);
    }
    double full = (double)(2 * radius + 1) * (2 * radius + 1);
    if (cost == AP_COST_NCC) {
        ap_ncc_costs(w, full, q[0], q[1], q[2], q[3], q[4], q[5], acc);
    } else if (cost == AP_COST_SSIM) {
        ap_ssim_costs(w, q[0], q[1], q[2], q[3], q[4], q[5], acc);
    } else {
        ap_sad_costs(w, full, q[0], q[1], acc);
    }
}
