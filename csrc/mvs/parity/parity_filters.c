#include "parity_filters.h"

#include <string.h>

#include "../cpu/four_lanes.h"
#include "../cpu/vectorize.h"
#include "../cpu/wide_lanes.h"

/* Filters sum every window's terms afresh, never a running sum less
 * what leaves it: near the image's borders zero padding leaves windows of
 * values 1e-6 of their neighbours', whose variance a running sum's
 * rounding would swamp. Each pass keeps its outputs in vectors (sixteen
 * along a row and down a whole window, 32 where the CPU has AVX-512,
 * eight down a clamped one; along a row of window 11, one vector, each
 * column's loaded once, ../cpu/window_lanes.h's along_5) while it adds a
 * window's taps or rows, and stores them once; the tails add in the same
 * order, so every output has the same bits wherever it lies. */

/* Four doubles at a double's alignment, for loads and stores anywhere in
 * a row of doubles. */
typedef double v4d_at __attribute__((vector_size(4 * sizeof(double)),
                                     aligned(sizeof(double)), may_alias));

static inline const v4d_at *
at4(const double *p)
{
    return (const v4d_at *)p;
}

/* out = the symmetric filter taps (centre first) along a row held in
 * padded[radius .. radius + w), with radius zeros each side. */
AP_VECTOR_CLONES void
ap_aquamvs_along(const double *restrict padded, int w, int radius,
                 const double *restrict taps, double *restrict out)
{
    const double *in = padded + radius;
    int x = 0;
    if (ap_wide_lanes()) {
        x = ap_wide_taps_along(in, radius, taps, x, w, out);
    }
    x = four_taps_along(in, radius, taps, x, w, out);
    for (; x < w; x++) {    /* the same order as a vector's lane */
        const double *p = in + x;
        double sum = taps[0] * p[0];
        for (int j = 1; j <= radius; j++) {
            sum += taps[j] * (p[-j] + p[j]);
        }
        out[x] = sum;
    }
}

/* out = the sum of rows[k] weighted by weights[k], k < count. */
AP_VECTOR_CLONES void
ap_aquamvs_down(const double *const *restrict rows,
                const double *restrict weights, int count, int w,
                double *restrict out)
{
    int x = 0;
    for (; x + 8 <= w; x += 8) {
        v4d lo = {0.0, 0.0, 0.0, 0.0}, hi = lo;
        int k = 0;
        for (; k + 4 <= count; k += 4) {
            const double *a = rows[k] + x, *b = rows[k + 1] + x;
            const double *c = rows[k + 2] + x, *d = rows[k + 3] + x;
            double ga = weights[k], gb = weights[k + 1],
                   gc = weights[k + 2], gd = weights[k + 3];
            lo += (ga * *at4(a) + gb * *at4(b)) +
                  (gc * *at4(c) + gd * *at4(d));
            hi += (ga * *at4(a + 4) + gb * *at4(b + 4)) +
                  (gc * *at4(c + 4) + gd * *at4(d + 4));
        }
        for (; k < count; k++) {
            lo += weights[k] * *at4(rows[k] + x);
            hi += weights[k] * *at4(rows[k] + x + 4);
        }
        *(v4d_at *)(out + x) = lo;
        *(v4d_at *)(out + x + 4) = hi;
    }
    for (; x < w; x++) {
        double sum = 0.0;
        int k = 0;
        for (; k + 4 <= count; k += 4) {
            sum += (weights[k] * rows[k][x] +
                    weights[k + 1] * rows[k + 1][x]) +
                   (weights[k + 2] * rows[k + 2][x] +
                    weights[k + 3] * rows[k + 3][x]);
        }
        for (; k < count; k++) {
            sum += weights[k] * rows[k][x];
        }
        out[x] = sum;
    }
}

/* ap_aquamvs_down_symmetric from column x on */
static inline __attribute__((always_inline)) void
down_symmetric_from(const double *const *restrict rows, int radius,
                    const double *restrict taps, int x, int w,
                    double *restrict out)
{
    const double *mid = rows[radius];
    if (ap_wide_lanes()) {
        x = ap_wide_taps_down(rows, radius, taps, x, w, out);
    }
    x = four_taps_down(rows, radius, taps, x, w, out);
    for (; x < w; x++) {    /* the same order as a vector's lane */
        double sum = taps[0] * mid[x];
        for (int j = 1; j <= radius; j++) {
            sum += taps[j] * (rows[radius - j][x] + rows[radius + j][x]);
        }
        out[x] = sum;
    }
}

AP_VECTOR_CLONES void
ap_aquamvs_down_symmetric(const double *const *restrict rows, int radius,
                          const double *restrict taps, int w,
                          double *restrict out)
{
    down_symmetric_from(rows, radius, taps, 0, w, out);
}

AP_VECTOR_CLONES void
ap_aquamvs_down_symmetric_four(const double *const *restrict rows,
                               int radius, const double *restrict taps,
                               int w, double *restrict out)
{
    int x = 0;
    /* eight lanes only: at four, the AVX2 clone's sixteen registers
     * cannot hold the fourteen rows, and it spills */
    if (radius == 5 && ap_wide_lanes()) {
        x = ap_wide_down_four_5(rows, taps, x, w, (size_t)w, out);
    }
    for (int i = 0; x < w && i < 4; i++) {
        down_symmetric_from(rows + i, radius, taps, x, w,
                            out + (size_t)i * w);
    }
}

/* The box filter's two: ap_aquamvs_along and ap_aquamvs_down with
 * weights 1, spared their multiplications. */
AP_VECTOR_CLONES void
ap_aquamvs_box_along(const double *restrict padded, int w, int radius,
                     double *restrict out)
{
    const double *in = padded + radius;
    int x = 0;
    if (radius == 5) {      /* four lanes: eight took x1.015 */
        x = four_along_5(in, NULL, x, w, out, 1);
    }
    /* as ap_aquamvs_along: sixteen outputs a pass, taps by pointer */
    for (; x + 16 <= w; x += 16) {
        const double *p = in + x, *left = p, *right = p;
        v4d s[4];
        for (int k = 0; k < 4; k++) {
            s[k] = *at4(p + 4 * k);
        }
        for (int j = 0; j < radius; j++) {
            left--;
            right++;
            for (int k = 0; k < 4; k++) {
                s[k] += *at4(left + 4 * k) + *at4(right + 4 * k);
            }
        }
        for (int k = 0; k < 4; k++) {
            *(v4d_at *)(out + x + 4 * k) = s[k];
        }
    }
    for (; x + 4 <= w; x += 4) {
        const double *p = in + x;
        v4d s = *at4(p);
        for (int j = 1; j <= radius; j++) {
            s += *at4(p - j) + *at4(p + j);
        }
        *(v4d_at *)(out + x) = s;
    }
    for (; x < w; x++) {    /* the same order as a vector's lane */
        const double *p = in + x;
        double sum = p[0];
        for (int j = 1; j <= radius; j++) {
            sum += p[-j] + p[j];
        }
        out[x] = sum;
    }
}

AP_VECTOR_CLONES void
ap_aquamvs_box_down(const double *const *restrict rows, int count, int w,
                    double *restrict out)
{
    int x = 0;
    for (; x + 8 <= w; x += 8) {
        v4d lo = {0.0, 0.0, 0.0, 0.0}, hi = lo;
        int k = 0;
        for (; k + 4 <= count; k += 4) {
            const double *a = rows[k] + x, *b = rows[k + 1] + x;
            const double *c = rows[k + 2] + x, *d = rows[k + 3] + x;
            lo += (*at4(a) + *at4(b)) + (*at4(c) + *at4(d));
            hi += (*at4(a + 4) + *at4(b + 4)) +
                  (*at4(c + 4) + *at4(d + 4));
        }
        for (; k < count; k++) {
            lo += *at4(rows[k] + x);
            hi += *at4(rows[k] + x + 4);
        }
        *(v4d_at *)(out + x) = lo;
        *(v4d_at *)(out + x + 4) = hi;
    }
    for (; x < w; x++) {
        double sum = 0.0;
        int k = 0;
        for (; k + 4 <= count; k += 4) {
            sum += (rows[k][x] + rows[k + 1][x]) +
                   (rows[k + 2][x] + rows[k + 3][x]);
        }
        for (; k < count; k++) {
            sum += rows[k][x];
        }
        out[x] = sum;
    }
}

/* out[i] = the sum of rows[k], lo[i] <= k <= hi[i], for g windows
 * that all hold rows [first, last] (not none): those are summed once,
 * then each window's own added, so each sum is still of its own rows
 * alone. */
AP_VECTOR_CLONES void
ap_aquamvs_box_down_group(const double *const *restrict rows, int first,
                          int last, const int *restrict lo,
                          const int *restrict hi, int g, int w,
                          double *restrict out)
{
    int x = 0;
    for (; x + 8 <= w; x += 8) {
        v4d lo4 = {0.0, 0.0, 0.0, 0.0}, hi4 = lo4;
        int k = first;
        for (; k + 3 <= last; k += 4) {
            const double *a = rows[k] + x, *b = rows[k + 1] + x;
            const double *c = rows[k + 2] + x, *d = rows[k + 3] + x;
            lo4 += (*at4(a) + *at4(b)) + (*at4(c) + *at4(d));
            hi4 += (*at4(a + 4) + *at4(b + 4)) +
                   (*at4(c + 4) + *at4(d + 4));
        }
        for (; k <= last; k++) {
            lo4 += *at4(rows[k] + x);
            hi4 += *at4(rows[k] + x + 4);
        }
        for (int i = 0; i < g; i++) {
            v4d l = lo4, h = hi4;
            for (int j = lo[i]; j < first; j++) {
                l += *at4(rows[j] + x);
                h += *at4(rows[j] + x + 4);
            }
            for (int j = last + 1; j <= hi[i]; j++) {
                l += *at4(rows[j] + x);
                h += *at4(rows[j] + x + 4);
            }
            *(v4d_at *)(out + (size_t)i * w + x) = l;
            *(v4d_at *)(out + (size_t)i * w + x + 4) = h;
        }
    }
    for (; x < w; x++) {
        double core = 0.0;
        int k = first;
        for (; k + 3 <= last; k += 4) {
            core += (rows[k][x] + rows[k + 1][x]) +
                    (rows[k + 2][x] + rows[k + 3][x]);
        }
        for (; k <= last; k++) {
            core += rows[k][x];
        }
        for (int i = 0; i < g; i++) {
            double sum = core;
            for (int j = lo[i]; j < first; j++) {
                sum += rows[j][x];
            }
            for (int j = last + 1; j <= hi[i]; j++) {
                sum += rows[j][x];
            }
            out[(size_t)i * w + x] = sum;
        }
    }
}
