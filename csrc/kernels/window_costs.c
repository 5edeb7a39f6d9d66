#include "window_costs.h"

#include <math.h>

#include "cost_math.h"
#include "vectorize.h"

/* Adds weight times the quantities of a row (NaN: not seen) to the
 * column sums; with a row `out` leaving as well (out != NULL), its
 * quantities are taken out first, so that a window slid one row sums to
 * the same bits as one row taken out and another put in. */
static inline void
slide_quantities(int w, const float *restrict ref_out,
                 const float *restrict out, const float *restrict ref,
                 const float *restrict warped, double weight,
                 double *restrict count, double *restrict sr,
                 double *restrict ss, double *restrict srr,
                 double *restrict sss, double *restrict srs)
{
    for (int x = 0; x < w; x++) {
        double n0 = count[x], r0 = sr[x], s0 = ss[x], rr0 = srr[x],
               ss0 = sss[x], rs0 = srs[x];
        if (out != NULL) {
            int seen = out[x] == out[x];
            double r = seen ? -1.0 * ref_out[x] : 0.0;
            double s = seen ? (double)out[x] : 0.0;
            n0 += seen ? -1.0 : 0.0;
            r0 += r;
            s0 += -1.0 * s;
            rr0 += r * ref_out[x];
            ss0 += -1.0 * s * s;
            rs0 += r * s;
        }
        int seen = warped[x] == warped[x];
        double r = seen ? weight * ref[x] : 0.0;
        double s = seen ? (double)warped[x] : 0.0;
        count[x] = n0 + (seen ? weight : 0.0);
        sr[x] = r0 + r;
        ss[x] = s0 + weight * s;
        srr[x] = rr0 + r * ref[x];
        sss[x] = ss0 + weight * s * s;
        srs[x] = rs0 + r * s;
    }
}

/* SAD's two quantities: the count and the absolute difference. */
static inline void
slide_differences(int w, const float *restrict ref_out,
                  const float *restrict out, const float *restrict ref,
                  const float *restrict warped, double weight,
                  double *restrict count, double *restrict sad)
{
    for (int x = 0; x < w; x++) {
        double n0 = count[x], d0 = sad[x];
        if (out != NULL) {
            int seen = out[x] == out[x];
            n0 += seen ? -1.0 : 0.0;
            d0 += -1.0 * (seen ? fabs((double)ref_out[x] - out[x]) : 0.0);
        }
        int seen = warped[x] == warped[x];
        double d = seen ? fabs((double)ref[x] - warped[x]) : 0.0;
        count[x] = n0 + (seen ? weight : 0.0);
        sad[x] = d0 + weight * d;
    }
}

#define Q(cols, w, k) ((cols) + (size_t)(k) * (w))

AP_VECTOR_CLONES void
ap_slide_quantities(double *cols, int w, const float *ref_out,
                    const float *out, const float *ref, const float *warped,
                    double weight)
{
    slide_quantities(w, ref_out, out, ref, warped, weight, Q(cols, w, 0),
                     Q(cols, w, 1), Q(cols, w, 2), Q(cols, w, 3),
                     Q(cols, w, 4), Q(cols, w, 5));
}

AP_VECTOR_CLONES void
ap_slide_differences(double *cols, int w, const float *ref_out,
                     const float *out, const float *ref, const float *warped,
                     double weight)
{
    slide_differences(w, ref_out, out, ref, warped, weight, Q(cols, w, 0),
                      Q(cols, w, 1));
}

void
ap_add_row(double *cols, int w, ap_cost cost, const float *ref,
           const float *warped, double weight)
{
    ap_slide_row(cols, w, cost, NULL, NULL, ref, warped, weight);
}

void
ap_slide_row(double *cols, int w, ap_cost cost, const float *ref_out,
             const float *out, const float *ref, const float *warped,
             double weight)
{
    if (cost == AP_COST_SAD) {
        ap_slide_differences(cols, w, ref_out, out, ref, warped, weight);
    } else {
        ap_slide_quantities(cols, w, ref_out, out, ref, warped, weight);
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
