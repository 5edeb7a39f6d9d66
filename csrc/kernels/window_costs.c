#include "window_costs.h"

#include <math.h>
#include <string.h>

#include "cost_math.h"
#include "vectorize.h"

/* weight times a sample's quantities: count, r, s, r^2, s^2, r s (all 0
 * where the warped sample is NaN: not seen) */
typedef struct {
    double n, r, s, rr, ss, rs;
} quantities;

static inline quantities
sample_quantities(float ref, float warped, double weight)
{
    int seen = warped == warped;
    double r = seen ? weight * ref : 0.0;
    double s = seen ? (double)warped : 0.0;
    quantities q = {seen ? weight : 0.0, r, weight * s, r * ref,
                    weight * s * s, r * s};
    return q;
}

/* Adds weight times the quantities of a row to the column sums; with a
 * row `out` leaving as well (out != NULL), its quantities are taken out
 * first, so that a window slid one row sums to the same bits as one row
 * taken out and another put in. */
static inline void
slide_quantities(int w, const float *restrict ref_out,
                 const float *restrict out, const float *restrict ref,
                 const float *restrict warped, double weight,
                 double *restrict count, double *restrict sr,
                 double *restrict ss, double *restrict srr,
                 double *restrict sss, double *restrict srs)
{
    for (int x = 0; x < w; x++) {
        quantities c = {count[x], sr[x], ss[x], srr[x], sss[x], srs[x]};
        if (out != NULL) {
            quantities q = sample_quantities(ref_out[x], out[x], -1.0);
            c.n += q.n;
            c.r += q.r;
            c.s += q.s;
            c.rr += q.rr;
            c.ss += q.ss;
            c.rs += q.rs;
        }
        quantities q = sample_quantities(ref[x], warped[x], weight);
        count[x] = c.n + q.n;
        sr[x] = c.r + q.r;
        ss[x] = c.s + q.s;
        srr[x] = c.rr + q.rr;
        sss[x] = c.ss + q.ss;
        srs[x] = c.rs + q.rs;
    }
}

/* SAD's two quantities, the count and the absolute difference. */
static inline double
sample_difference(float ref, float warped)
{
    return warped == warped ? fabs((double)ref - warped) : 0.0;
}

static inline void
slide_differences(int w, const float *restrict ref_out,
                  const float *restrict out, const float *restrict ref,
                  const float *restrict warped, double weight,
                  double *restrict count, double *restrict sad)
{
    for (int x = 0; x < w; x++) {
        double n = count[x], d = sad[x];
        if (out != NULL) {
            n += out[x] == out[x] ? -1.0 : 0.0;
            d += -1.0 * sample_difference(ref_out[x], out[x]);
        }
        count[x] = n + (warped[x] == warped[x] ? weight : 0.0);
        sad[x] = d + weight * sample_difference(ref[x], warped[x]);
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

/* Four doubles: GCC and Clang lower them to whatever vectors the clone
 * being compiled has. */
typedef double v4d __attribute__((vector_size(4 * sizeof(double))));

/* Prefix sums of nq rows of w, side by side into nq rows of w + 1. A
 * running sum is a chain of dependent adds, so four elements are scanned
 * at a time in a vector (two shifted adds, then the carry from the ones
 * before), and the nq rows advance together, their carries in registers
 * once nq is a constant (the callers below pass one). */
static inline void
prefix_sums(const double *restrict cols, int nq, int w,
            double *restrict prefix)
{
    size_t stride = (size_t)w + 1;
    v4d carry[AP_NQ] = {{0.0}};
    for (int k = 0; k < nq; k++) {
        prefix[k * stride] = 0.0;
    }
    int x = 0;
    for (; x + 4 <= w; x += 4) {
        for (int k = 0; k < nq; k++) {
            v4d v;
            memcpy(&v, cols + (size_t)k * w + x, sizeof(v));
            v += (v4d){0.0, v[0], v[1], v[2]};
            v += (v4d){0.0, 0.0, v[0], v[1]};
            v += carry[k];
            carry[k] = (v4d){v[3], v[3], v[3], v[3]};
            memcpy(prefix + k * stride + x + 1, &v, sizeof(v));
        }
    }
    for (; x < w; x++) {
        for (int k = 0; k < nq; k++) {
            carry[k][0] += cols[(size_t)k * w + x];
            prefix[k * stride + x + 1] = carry[k][0];
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
