#include "window_costs.h"

#include <math.h>
#include <string.h>

#include "cost_math.h"
#include "four_lanes.h"
#include "vectorize.h"
#include "wide_lanes.h"

/* weight times a sample's quantities: count, r, s, r^2, s^2, r s (all 0
 * where the warped sample is NaN: not seen; the reference is finite) */
typedef struct {
    double n, r, s, rr, ss, rs;
} quantities;

static inline quantities
sample_quantities(float ref, float warped, double weight)
{
    int seen = warped == warped;
    double r = seen ? weight * ref : 0.0;
    double s = seen ? (double)warped : 0.0;
    double ws = weight * s;
    quantities q = {seen ? weight : 0.0, r, ws, r * ref, ws * s, ws * ref};
    return q;
}

/* Column sums at x, four lanes: (c + *leaving) + entering, or without
 * leaving where NULL. */
static inline void
add_four(double *restrict c, int x, const v4d *leaving, const v4d *entering)
{
    v4d sum;
    memcpy(&sum, c + x, sizeof(sum));
    if (leaving != NULL) {
        sum += *leaving;
    }
    sum += *entering;
    memcpy(c + x, &sum, sizeof(sum));
}

static inline void
four_warped(const float *ref, const float *warped, double weight, v4d q[3])
{
    four_samples f;
    four_load(ref, warped, weight, &f);
    four_warped_of(&f, weight, q);
}

/* Adds weight times the warped quantities of a row to their column sums;
 * with a row `out` leaving as well (out != NULL), its quantities are
 * taken out first, so that a window slid one row sums to the same bits
 * as one row taken out and another put in. Four columns at a time, each
 * column sum loaded and stored once. Inlined into its clones, which a
 * call would leave for the default one's code. */
static inline __attribute__((always_inline)) void
slide_warped(int w, const float *restrict ref_out, const float *restrict out,
             const float *restrict ref, const float *restrict warped,
             double weight, double *restrict ss, double *restrict sss,
             double *restrict srs)
{
    int x = 0;
    for (; x + 4 <= w; x += 4) {
        v4d qo[3], qi[3];
        four_warped(ref + x, warped + x, weight, qi);
        if (out != NULL) {
            four_warped(ref_out + x, out + x, -1.0, qo);
        }
        add_four(ss, x, out != NULL ? &qo[0] : NULL, &qi[0]);
        add_four(sss, x, out != NULL ? &qo[1] : NULL, &qi[1]);
        add_four(srs, x, out != NULL ? &qo[2] : NULL, &qi[2]);
    }
    for (; x < w; x++) {
        double s = ss[x], s2 = sss[x], rs = srs[x];
        if (out != NULL) {
            quantities q = sample_quantities(ref_out[x], out[x], -1.0);
            s += q.s;
            s2 += q.ss;
            rs += q.rs;
        }
        quantities q = sample_quantities(ref[x], warped[x], weight);
        ss[x] = s + q.s;
        sss[x] = s2 + q.ss;
        srs[x] = rs + q.rs;
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
ap_slide_warped(double *cols, int w, const float *ref_out, const float *out,
                const float *ref, const float *warped, double weight)
{
    slide_warped(w, ref_out, out, ref, warped, weight, Q(cols, w, 0),
                 Q(cols, w, 1), Q(cols, w, 2));
}

AP_VECTOR_CLONES void
ap_slide_differences(double *cols, int w, const float *ref_out,
                     const float *out, const float *ref, const float *warped,
                     double weight)
{
    slide_differences(w, ref_out, out, ref, warped, weight, Q(cols, w, 0),
                      Q(cols, w, 1));
}

AP_VECTOR_CLONES void
ap_weighted_columns(double *restrict cols, int w, int x0, int x1,
                    const float *const *refs, const float *const *rows,
                    const double *weights, int count)
{
    double *out[AP_NQ];
    for (int k = 0; k < AP_NQ; k++) {
        out[k] = cols + (size_t)k * w;
    }
    int x = x0;
    if (ap_wide_lanes()) {
        x = ap_wide_all_columns(out, x, x1, refs, rows, weights, count);
    }
    x = four_all_columns(out, x, x1, refs, rows, weights, count);
    for (; x < x1; x++) {
        double sum[AP_NQ] = {0.0};
        for (int j = 0; j < count; j++) {
            quantities q = sample_quantities(refs[j][x], rows[j][x],
                                             weights[j]);
            sum[0] += q.n;
            sum[1] += q.r;
            sum[2] += q.s;
            sum[3] += q.rr;
            sum[4] += q.ss;
            sum[5] += q.rs;
        }
        for (int k = 0; k < AP_NQ; k++) {
            cols[(size_t)k * w + x] = sum[k];
        }
    }
}

AP_VECTOR_CLONES void
ap_weighted_seen_columns(double *restrict cols, int w, int x0, int x1,
                         const float *const *refs, const float *const *rows,
                         const double *weights, int count)
{
    double *out[3] = {cols + (size_t)AP_Q_S * w, cols + (size_t)AP_Q_SS * w,
                      cols + (size_t)AP_Q_RS * w};
    int x = x0;
    if (ap_wide_lanes()) {
        x = ap_wide_seen_columns(out, x, x1, refs, rows, weights, count);
    }
    x = four_seen_columns(out, x, x1, refs, rows, weights, count);
    for (; x < x1; x++) {
        double sum[3] = {0.0};
        for (int j = 0; j < count; j++) {
            quantities q = sample_quantities(refs[j][x], rows[j][x],
                                             weights[j]);
            sum[0] += q.s;
            sum[1] += q.ss;
            sum[2] += q.rs;
        }
        for (int k = 0; k < 3; k++) {
            out[k][x] = sum[k];
        }
    }
}

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

/* The box sum at column x of a window clamped to the row, from the
 * row's prefix sums p: at the borders. */
static inline double
box_at(const double *p, int w, int r, int x)
{
    int lo = x - r < 0 ? 0 : x - r, hi = x + r + 1 > w ? w : x + r + 1;
    return p[hi] - p[lo];
}

/* [*lo, *hi): the columns of [x0, x1) whose box window (2 r + 1 of a
 * row of w) needs no clamp; the rest, before and after, do. */
static inline void
unclamped(int x0, int x1, int w, int r, int *lo, int *hi)
{
    int l = x0 > r ? x0 : r, h = x1 < w - r ? x1 : w - r;
    *lo = l < x1 ? l : x1;
    *hi = h > *lo ? h : *lo;
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
    int left, right;
    unclamped(0, w, w, r, &left, &right);
    for (int k = 0; k < nq; k++) {
        const double *p = prefix + k * stride;
        double *o = out + k * stride;
        for (int x = 0; x < left; x++) {
            o[x] = box_at(p, w, r, x);
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
            o[x] = box_at(p, w, r, x);
        }
    }
}

/* Outputs a pass of gauss_clamped, which sets the size of its copy of
 * the columns on the stack */
#define CLAMPED_BLOCK 16

/* The sums at columns [x0, x1) of windows clamped to the row (at its
 * borders), four at a time: each lane takes its taps left to right from
 * 0.0, over a copy of the columns they read with zeros off the row (and
 * past x1 + r, which ap_gauss_sums_range promises not to read). A tap on
 * a zero adds +0.0, which leaves a sum as it was, so each output has the
 * bits of the same sum over the row's taps alone. r at most
 * (AP_MAX_WINDOW - 1) / 2. Always inlined: GCC vectorises only the
 * default clone of a static function (vectorize.h). */
static inline __attribute__((always_inline)) void
gauss_clamped(const double *col, int w, int r, const double *gauss, int x0,
              int x1, double *out)
{
    double pad[CLAMPED_BLOCK + AP_MAX_WINDOW - 1];
    for (int x = x0; x < x1; x += CLAMPED_BLOCK) {
        int n = x1 - x < CLAMPED_BLOCK ? x1 - x : CLAMPED_BLOCK;
        int lanes = (n + 3) & ~3;
        /* pad[k] holds column x - r + k: the columns [x - r, x + n + r)
         * that the n outputs read, zeros after them to fill the lanes */
        int from = x - r, end = x + n + r;
        int lo = from < 0 ? 0 : from, hi = end < w ? end : w;
        memset(pad, 0, sizeof(double) * (size_t)(lanes + 2 * r));
        memcpy(pad + (lo - from), col + lo, sizeof(double) * (size_t)(hi - lo));
        double sums[CLAMPED_BLOCK];
        for (int i = 0; i < lanes; i += 4) {
            v4d s = {0.0, 0.0, 0.0, 0.0};
            for (int k = 0; k <= 2 * r; k++) {
                v4d c;
                memcpy(&c, pad + i + k, sizeof(c));
                s += gauss[k] * c;
            }
            memcpy(sums + i, &s, sizeof(s));
        }
        memcpy(out + x, sums, sizeof(double) * (size_t)n);
    }
}

/* The first column whose window needs no clamp (w where none). */
static int
first_unclamped(int w, int r)
{
    return w > 2 * r ? r : w;
}

/* Gaussian-weighted sums along a row; outside the image weighs nothing.
 * The inside, where no tap needs clamping, 32 (AVX-512) or 16 outputs at
 * a time, then a vector at a time. */
AP_VECTOR_CLONES void
ap_gauss_sums(const double *restrict col, int w, int r,
              const double *restrict gauss, double *restrict out)
{
    int x = first_unclamped(w, r);
    gauss_clamped(col, w, r, gauss, 0, x, out);
    if (ap_wide_lanes()) {
        x = ap_wide_taps_along(col, r, gauss + r, x, w - r, out);
    }
    x = four_taps_along(col, r, gauss + r, x, w - r, out);
    gauss_clamped(col, w, r, gauss, x, w, out);
}

/* One output of ap_gauss_sums' inside loops, alone: the same operations
 * in the same order as its vector lane, so the same bits. */
static inline double
gauss_pairs(const double *col, int r, const double *gauss, int x)
{
    double s = col[x] * gauss[r];
    for (int j = 1; j <= r; j++) {
        s += gauss[r + j] * (col[x - j] + col[x + j]);
    }
    return s;
}

AP_VECTOR_CLONES void
ap_gauss_sums_range(const double *restrict col, int w, int r,
                    const double *restrict gauss, int x0, int x1,
                    double *restrict out)
{
    /* where ap_gauss_sums' inside loops begin and end */
    int start = first_unclamped(w, r), end;
    for (end = start; end + 4 + r <= w; end += 4) {
    }
    int lo = x0 > start ? x0 : start, hi = x1 < end ? x1 : end;
    int x = x1 < lo ? x1 : lo;
    gauss_clamped(col, w, r, gauss, x0, x, out);
    /* the inside as ap_gauss_sums', each lane as gauss_pairs */
    if (ap_wide_lanes()) {
        x = ap_wide_taps_along(col, r, gauss + r, x, hi, out);
    }
    x = four_taps_along(col, r, gauss + r, x, hi, out);
    for (; x < hi; x++) {
        out[x] = gauss_pairs(col, r, gauss, x);
    }
    gauss_clamped(col, w, r, gauss, x, x1, out);
}

AP_VECTOR_CLONES void
ap_unseen_span(const float *restrict row, int w, int span[2])
{
    /* min and max reductions, which vectorise where a search would not */
    int first = w, last = -1;
    for (int x = 0; x < w; x++) {
        int unseen = row[x] != row[x];
        int at_first = unseen ? x : w, at_last = unseen ? x : -1;
        first = at_first < first ? at_first : first;
        last = at_last > last ? at_last : last;
    }
    span[0] = first;
    span[1] = last;
}

/* 1 - NCC at column x of a row whose window is clamped at its ends. */
static inline __attribute__((always_inline)) double
ncc_clamped(const double *const p[AP_NW], int w, int r, double full,
            double n, double sr, double srr, int x)
{
    return ap_ncc_cost(full, n, sr, box_at(p[0], w, r, x), srr,
                       box_at(p[1], w, r, x), box_at(p[2], w, r, x));
}

/* 1 - NCC at pixels [x0, x1) of a row, added to acc: the warped sums
 * from their prefix sums p (AP_NW rows of w + 1), the count, r and r^2
 * sums from n, sr and srr (indexed from x0). Inlined into its clones. */
static inline __attribute__((always_inline)) void
ncc_range(const double *const p[AP_NW], int w, int r, double full,
          const double *restrict n, const double *restrict sr,
          const double *restrict srr, int x0, int x1, double *restrict acc)
{
    int lo, hi;
    unclamped(x0, x1, w, r, &lo, &hi);
    for (int x = x0; x < lo; x++) {
        acc[x] += ncc_clamped(p, w, r, full, n[x - x0], sr[x - x0],
                              srr[x - x0], x);
    }
    if (hi > lo) {      /* then lo >= r: offsets from base pointers,
                         * so that the loop reads streams */
        const double *restrict a0 = p[0] + lo + r + 1,
                               *restrict b0 = p[0] + lo - r;
        const double *restrict a1 = p[1] + lo + r + 1,
                               *restrict b1 = p[1] + lo - r;
        const double *restrict a2 = p[2] + lo + r + 1,
                               *restrict b2 = p[2] + lo - r;
        const double *restrict tn = n + (lo - x0),
                               *restrict tr = sr + (lo - x0),
                               *restrict trr = srr + (lo - x0);
        double *restrict out = acc + lo;
        for (int i = 0; i < hi - lo; i++) {
            out[i] += ap_ncc_cost(full, tn[i], tr[i], a0[i] - b0[i], trr[i],
                                  a1[i] - b1[i], a2[i] - b2[i]);
        }
    }
    for (int x = hi; x < x1; x++) {
        acc[x] += ncc_clamped(p, w, r, full, n[x - x0], sr[x - x0],
                              srr[x - x0], x);
    }
}

AP_VECTOR_CLONES void
ap_ncc_table_costs(const double *restrict cols, int w, int r, double full,
                   const double *const seen[AP_NW], int p0, int p1,
                   const double *const fixed[AP_NW], double *restrict prefix,
                   double *restrict acc)
{
    size_t stride = (size_t)w + 1;
    prefix_sums(cols, AP_NW, w, prefix);
    const double *p[AP_NW] = {prefix, prefix + stride, prefix + 2 * stride};
    ncc_range(p, w, r, full, seen[0], seen[1], seen[2], 0, p0, acc);
    if (p1 > p0) {
        ncc_range(p, w, r, full, fixed[0], fixed[1], fixed[2], p0, p1, acc);
    }
    ncc_range(p, w, r, full, seen[0] + p1, seen[1] + p1, seen[2] + p1, p1,
              w, acc);
}

void
ap_slide_unseen(double *cols, int w, int x0, int x1, const float *ref,
                const float *warped, double weight)
{
    double *n = Q(cols, w, 0), *sr = Q(cols, w, 1), *srr = Q(cols, w, 2);
    for (int x = x0; x < x1; x++) {
        if (warped[x] != warped[x]) {
            double r = weight * ref[x];
            n[x] += weight;
            sr[x] += r;
            srr[x] += r * ref[x];
            if (n[x] == 0.0) {  /* the count is exact; the others would
                                 * keep what rounding left */
                sr[x] = 0.0;
                srr[x] = 0.0;
            }
        }
    }
}

AP_VECTOR_CLONES void
ap_unseen_fix(const double *restrict cols, int w, int r, int p0, int p1,
              const double *const seen[AP_NW], double *restrict prefix,
              double *const fixed[AP_NW])
{
    int c0 = p0 - r > 0 ? p0 - r : 0, c1 = p1 + r < w ? p1 + r : w;
    size_t stride = (size_t)w + 1;
    double carry[AP_NW] = {0.0, 0.0, 0.0};
    for (int k = 0; k < AP_NW; k++) {
        prefix[k * stride + c0] = 0.0;
    }
    /* the three running sums side by side, so that their chains of adds
     * overlap; box_at then reads them in [c0, c1] for x in [p0, p1) */
    for (int x = c0; x < c1; x++) {
        for (int k = 0; k < AP_NW; k++) {
            carry[k] += cols[(size_t)k * w + x];
            prefix[k * stride + x + 1] = carry[k];
        }
    }
    /* [lo, hi): no window clamped, a loop that vectorises */
    int lo, hi;
    unclamped(p0, p1, w, r, &lo, &hi);
    for (int k = 0; k < AP_NW; k++) {
        const double *pk = prefix + k * stride, *sk = seen[k];
        double *fk = fixed[k] - p0;     /* indexed by column */
        for (int x = p0; x < lo; x++) {
            fk[x] = sk[x] - box_at(pk, w, r, x);
        }
        for (int x = lo; x < hi; x++) {
            fk[x] = sk[x] - (pk[x + r + 1] - pk[x - r]);
        }
        for (int x = hi; x < p1; x++) {
            fk[x] = sk[x] - box_at(pk, w, r, x);
        }
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
    size_t stride = (size_t)w + 1;
    double *sums = scratch + AP_NQ * stride;
    double full = (double)(2 * radius + 1) * (2 * radius + 1);
    if (cost == AP_COST_SAD) {
        ap_box_sums(cols, 2, w, radius, scratch, sums);
        ap_sad_costs(w, full, sums, sums + stride, acc);
    } else {
        double *q[AP_NQ];
        for (int k = 0; k < AP_NQ; k++) {
            q[k] = sums + k * stride;
            ap_gauss_sums(cols + (size_t)k * w, w, radius, gauss, q[k]);
        }
        ap_ssim_costs(w, q[0], q[1], q[2], q[3], q[4], q[5], acc);
    }
}
