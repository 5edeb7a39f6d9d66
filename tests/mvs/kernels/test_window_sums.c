/* The window sums against their plain forms:
 * - NCC's sliding column sums of the warped quantities (ap_slide_warped),
 *   four columns at a time, against the same function one column at a
 *   time, which takes the scalar loop: the same bits;
 * - NCC's costs from those sums, the reference's window sums and the
 *   unseen samples' (ap_slide_unseen, ap_unseen_fix, ap_ncc_table_costs)
 *   against the window's six sums made afresh, within 1e-12, after rows
 *   with unseen samples slid through the window and out; and the same
 *   bits whether the pixels fixed for unseen samples are those beside
 *   them or the whole row;
 * - SSIM's weighted column sums of rows all seen
 *   (ap_weighted_seen_columns) against ap_weighted_columns' three sums
 *   that hold the warped values, and ap_weighted_columns' six of rows
 *   with unseen samples against each column's rows summed in order: the
 *   same bits;
 * - the Gaussian sums of a range of columns (ap_gauss_sums_range)
 *   against those of the whole row (ap_gauss_sums), and the whole row's
 *   at columns whose windows reach past its ends against the sum of the
 *   taps on the row, left to right: the same bits;
 * - AquaMVS parity's symmetric filters along a row (ap_aquamvs_along,
 *   ap_aquamvs_box_along) and down a whole window of rows
 *   (ap_aquamvs_down_symmetric), four windows at once
 *   (ap_aquamvs_down_symmetric_four) and down a group of windows
 *   (ap_aquamvs_box_down_group) against their plain forms in the same
 *   order, the same bits at every column (vector lanes and tails alike),
 *   and the last against the weighted sum of rows (ap_aquamvs_down)
 *   within rounding;
 * for rows of 1 to 41 columns, windows of radius 1 to 7 (wider than some
 * rows), unseen (NaN) samples alone, in runs and everywhere, and the
 * Gaussian sums also for rows of up to 100 columns and radii up to 31.
 * All of it twice where the CPU has AVX-512: with the eight-lane loops
 * (wide_lanes.h) and without. Exits 1 saying what failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../csrc/mvs/cpu/cost_math.h"
#include "../../../csrc/mvs/cpu/wide_lanes.h"
#include "../../../csrc/mvs/cpu/window_costs.h"
#include "../../../csrc/mvs/parity/parity_filters.h"
#include "random_cases.h"

#define MAX_W 41
#define MAX_R 7
/* The Gaussian sums also for windows up to the widest the sweep takes,
 * whose borders span more than one pass of the clamped loop */
#define MAX_GAUSS_W 100
#define MAX_GAUSS_R 31

/* A warped row: values in [0, 1), a share of them not seen (NaN) */
static void
warped_row(uint64_t *s, float *row, int w, double unseen)
{
    for (int x = 0; x < w; x++) {
        row[x] = uniform(s, 0.0, 1.0) < unseen ? NAN
                                                : (float)uniform(s, 0.0, 1.0);
    }
}

static int failures;

/* Buffers of exactly n elements on the heap, so that a loop reading or
 * writing past its row is caught under AddressSanitizer (`make asan`) */
static void *
exact(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    return p;
}

static void
same_bits(const double *a, const double *b, int n, const char *what, int w,
          int r)
{
    if (memcmp(a, b, (size_t)n * sizeof(double)) != 0 && failures++ < 5) {
        for (int i = 0; i < n; i++) {
            if (memcmp(&a[i], &b[i], sizeof(double)) != 0) {
                printf("FAIL: %s, w %d, r %d, at %d: %.17g against %.17g\n",
                       what, w, r, i, a[i], b[i]);
                return;
            }
        }
    }
}

/* Slides a window of 2 r + 1 rows down 3 r rows, row by row and column
 * by column, and compares the column sums after every row. */
static void
check_slide(uint64_t *s, int w, int r, double unseen)
{
    int rows = 5 * r + 2;
    float ref[5 * MAX_R + 2][MAX_W], warped[5 * MAX_R + 2][MAX_W];
    double cols[AP_NW * MAX_W] = {0.0}, one[MAX_W][AP_NW], flat[AP_NW * MAX_W];
    memset(one, 0, sizeof(one));
    for (int y = 0; y < rows; y++) {
        for (int x = 0; x < w; x++) {
            ref[y][x] = (float)uniform(s, 0.0, 1.0);
        }
        warped_row(s, warped[y], w, unseen);
    }
    for (int y = 0; y < rows; y++) {
        int leaves = y > 2 * r;
        const float *ref_out = leaves ? ref[y - 2 * r - 1] : NULL;
        const float *out = leaves ? warped[y - 2 * r - 1] : NULL;
        ap_slide_warped(cols, w, ref_out, out, ref[y], warped[y], 1.0);
        for (int x = 0; x < w; x++) {
            ap_slide_warped(one[x], 1, leaves ? ref_out + x : NULL,
                            leaves ? out + x : NULL, &ref[y][x],
                            &warped[y][x], 1.0);
            for (int k = 0; k < AP_NW; k++) {
                flat[k * w + x] = one[x][k];
            }
        }
        same_bits(cols, flat, AP_NW * w, "sliding column sums", w, r);
    }
    /* the bottom edge: rows taken out, weight -1 */
    for (int y = rows - 2 * r - 1; y < rows; y++) {
        ap_slide_warped(cols, w, NULL, NULL, ref[y], warped[y], -1.0);
        for (int x = 0; x < w; x++) {
            ap_slide_warped(one[x], 1, NULL, NULL, &ref[y][x],
                            &warped[y][x], -1.0);
            for (int k = 0; k < AP_NW; k++) {
                flat[k * w + x] = one[x][k];
            }
        }
        same_bits(cols, flat, AP_NW * w, "column sums taken out", w, r);
    }
}

/* NCC's costs of a row whose window is the last 2 r + 1 of `rows` rows,
 * as the sweep makes them: the rows before slid through the window and
 * out (their unseen samples' sums taken out again), the pixels fixed for
 * unseen samples being [p0, p1). */
static void
table_costs(float ref[][MAX_W], float warped[][MAX_W], int rows, int w,
            int r, int p0, int p1, double *acc)
{
    double cols[AP_NW * MAX_W] = {0.0}, unseen[AP_NW * MAX_W] = {0.0};
    double seen[AP_NW][MAX_W] = {{0.0}}, fixed[AP_NW][MAX_W];
    double prefix[AP_NW * (MAX_W + 1)];
    for (int y = 0; y < rows; y++) {
        int out = y - 2 * r - 1;
        ap_slide_warped(cols, w, out >= 0 ? ref[out] : NULL,
                        out >= 0 ? warped[out] : NULL, ref[y], warped[y],
                        1.0);
        if (out >= 0) {
            ap_slide_unseen(unseen, w, 0, w, ref[out], warped[out], -1.0);
        }
        ap_slide_unseen(unseen, w, 0, w, ref[y], warped[y], 1.0);
    }
    for (int y = rows - 2 * r - 1; y < rows; y++) {
        for (int x = 0; x < w; x++) {   /* the reference's window sums */
            for (int j = x - r; j <= x + r; j++) {
                if (j >= 0 && j < w) {
                    seen[0][x] += 1.0;
                    seen[1][x] += ref[y][j];
                    seen[2][x] += (double)ref[y][j] * ref[y][j];
                }
            }
        }
    }
    const double *seen_rows[AP_NW] = {seen[0], seen[1], seen[2]};
    double *fixed_rows[AP_NW] = {fixed[0], fixed[1], fixed[2]};
    if (p1 > p0) {
        ap_unseen_fix(unseen, w, r, p0, p1, seen_rows, prefix, fixed_rows);
    }
    memset(acc, 0, (size_t)w * sizeof(double));
    double full = (double)(2 * r + 1) * (2 * r + 1);
    ap_ncc_table_costs(cols, w, r, full, seen_rows, p0, p1,
                       (const double *const *)fixed_rows, prefix, acc);
}

/* Rows of which the first ones slide out of the window with their
 * unseen samples, the window's own having fewer (or none). */
static void
check_ncc_table(uint64_t *s, int w, int r, double unseen)
{
    enum { ROWS = 5 * MAX_R + 2 };
    float ref[ROWS][MAX_W], warped[ROWS][MAX_W];
    int rows = 5 * r + 2, top = rows - 2 * r - 1, first = w, last = -1;
    for (int y = 0; y < rows; y++) {
        for (int x = 0; x < w; x++) {
            ref[y][x] = (float)uniform(s, 0.0, 1.0);
        }
        warped_row(s, warped[y], w, y < top ? 0.5 : unseen);
        int span[2];
        ap_unseen_span(warped[y], w, span);
        if (y >= top) {
            first = span[0] < first ? span[0] : first;
            last = span[1] > last ? span[1] : last;
        }
        /* the span against a plain search */
        int x = 0;
        while (x < w && warped[y][x] == warped[y][x]) {
            x++;
        }
        int plain_first = x;
        for (x = w - 1; x >= 0 && warped[y][x] == warped[y][x]; x--) {
        }
        if ((span[0] != plain_first || span[1] != x) && failures++ < 5) {
            printf("FAIL: unseen span, w %d: [%d, %d] against [%d, %d]\n",
                   w, span[0], span[1], plain_first, x);
        }
    }
    int p0, p1;
    ap_unseen_pixels(first, last, r, w, &p0, &p1);
    double beside[MAX_W], whole[MAX_W];
    table_costs(ref, warped, rows, w, r, p0, p1, beside);
    table_costs(ref, warped, rows, w, r, 0, w, whole);
    /* the same bits: a window with no unseen sample left is the
     * reference's, whatever rows slid through it */
    same_bits(beside, whole, w, "NCC fixed beside unseen or everywhere", w,
              r);
    double full = (double)(2 * r + 1) * (2 * r + 1);
    for (int x = 0; x < w; x++) {
        double q[AP_NQ] = {0.0};
        for (int y = top; y < rows; y++) {
            for (int j = x - r; j <= x + r; j++) {
                if (j >= 0 && j < w && warped[y][j] == warped[y][j]) {
                    double rv = ref[y][j], sv = warped[y][j];
                    q[AP_Q_COUNT] += 1.0;
                    q[AP_Q_R] += rv;
                    q[AP_Q_S] += sv;
                    q[AP_Q_RR] += rv * rv;
                    q[AP_Q_SS] += sv * sv;
                    q[AP_Q_RS] += rv * sv;
                }
            }
        }
        double expected = ap_ncc_cost(full, q[0], q[1], q[2], q[3], q[4],
                                      q[5]);
        if (!(fabs(beside[x] - expected) <= 1e-12) && failures++ < 5) {
            printf("FAIL: NCC from the reference's sums, w %d, r %d, at %d: "
                   "%.17g against %.17g\n", w, r, x, beside[x], expected);
        }
    }
}

static void
check_gauss_range(uint64_t *s, int w, int r)
{
    double gauss[2 * MAX_GAUSS_R + 1];
    double *col = exact((size_t)w, sizeof(double)),
           *whole = exact((size_t)w, sizeof(double)),
           *part = exact((size_t)w, sizeof(double));
    for (int j = -r; j <= r; j++) {     /* any symmetric weights */
        gauss[j + r] = exp(-(double)(j * j) / 4.5);
    }
    for (int x = 0; x < w; x++) {
        col[x] = uniform(s, -1.0, 1.0);
    }
    ap_gauss_sums(col, w, r, gauss, whole);
    for (int x = 0; x < w; x++) {
        if (x >= r && x + r < w) {
            continue;
        }
        double plain = 0.0;
        for (int j = x - r < 0 ? 0 : x - r; j <= x + r && j < w; j++) {
            plain += gauss[j - x + r] * col[j];
        }
        if (memcmp(&plain, &whole[x], sizeof(plain)) != 0 &&
            failures++ < 5) {
            printf("FAIL: Gaussian sums at the borders, w %d, r %d, at %d: "
                   "%.17g against %.17g\n", w, r, x, whole[x], plain);
        }
    }
    for (int x0 = 0; x0 <= w; x0++) {
        for (int x1 = x0; x1 <= w; x1++) {
            for (int x = 0; x < w; x++) {
                part[x] = whole[x];
            }
            for (int x = x0; x < x1; x++) {
                part[x] = NAN;
            }
            ap_gauss_sums_range(col, w, r, gauss, x0, x1, part);
            same_bits(part, whole, w, "Gaussian sums of a range", w, r);
        }
    }
    free(col);
    free(whole);
    free(part);
}

/* The rows of an SSIM window (up to 2 MAX_R + 1): the reference's, the
 * warped ones (a share of them unseen) and their weights */
typedef struct {
    float *ref[2 * MAX_R + 1], *warped[2 * MAX_R + 1];
    const float *refs[2 * MAX_R + 1], *rows[2 * MAX_R + 1];
    double weights[2 * MAX_R + 1];
    int count;
} window_rows;

static void
window_rows_make(uint64_t *s, window_rows *wr, int w, int count,
                 double unseen)
{
    wr->count = count;
    for (int j = 0; j < count; j++) {
        wr->ref[j] = exact((size_t)w, sizeof(float));
        wr->warped[j] = exact((size_t)w, sizeof(float));
        warped_row(s, wr->ref[j], w, 0.0);
        warped_row(s, wr->warped[j], w, unseen);
        wr->refs[j] = wr->ref[j];
        wr->rows[j] = wr->warped[j];
        wr->weights[j] = uniform(s, 0.01, 0.2);
    }
}

static void
window_rows_free(window_rows *wr)
{
    for (int j = 0; j < wr->count; j++) {
        free(wr->ref[j]);
        free(wr->warped[j]);
    }
}

/* Rows all seen weighted and summed down the columns [x0, x1), for
 * every x0 <= x1 */
static void
check_seen_columns(uint64_t *s, int w, int count)
{
    window_rows wr;
    window_rows_make(s, &wr, w, count, 0.0);
    double *all = exact(AP_NQ * (size_t)w, sizeof(double)),
           *seen = exact(AP_NQ * (size_t)w, sizeof(double));
    for (int x0 = 0; x0 <= w; x0 += 3) {
        for (int x1 = x0; x1 <= w; x1++) {
            ap_weighted_columns(all, w, x0, x1, wr.refs, wr.rows,
                                wr.weights, count);
            ap_weighted_seen_columns(seen, w, x0, x1, wr.refs, wr.rows,
                                     wr.weights, count);
            for (int q = AP_Q_S; q <= AP_Q_RS; q++) {
                if (q != AP_Q_RR) {
                    same_bits(all + (size_t)q * w + x0,
                              seen + (size_t)q * w + x0, x1 - x0,
                              "weighted sums of seen rows", w, count);
                }
            }
        }
    }
    window_rows_free(&wr);
    free(all);
    free(seen);
}

/* The filter's centre tap, then outward: any symmetric weights */
static void
make_taps(int r, double *taps)
{
    for (int j = 0; j <= r; j++) {
        taps[j] = exp(-(double)(j * j) / 4.5);
    }
}

/* SSIM's six weighted column sums (ap_weighted_columns) of rows with
 * unseen samples, against each column's rows summed in order, each
 * quantity made as the sweep makes it: the same bits */
static void
check_all_columns(uint64_t *s, int w, int count, double unseen)
{
    window_rows wr;
    window_rows_make(s, &wr, w, count, unseen);
    double *cols = exact(AP_NQ * (size_t)w, sizeof(double)),
           *plain = exact(AP_NQ * (size_t)w, sizeof(double));
    for (int x = 0; x < w; x++) {
        for (int j = 0; j < count; j++) {
            float v = wr.warped[j][x];
            int seen = v == v;
            double g = wr.weights[j], r0 = wr.ref[j][x];
            double sv = seen ? (double)v : 0.0, gs = g * sv;
            double r = seen ? g * r0 : 0.0;
            double q[AP_NQ] = {seen ? g : 0.0, r, gs, r * r0, gs * sv,
                               gs * r0};
            for (int k = 0; k < AP_NQ; k++) {
                double *p = plain + (size_t)k * w + x;
                *p = j == 0 ? q[k] : *p + q[k];
            }
        }
    }
    ap_weighted_columns(cols, w, 0, w, wr.refs, wr.rows, wr.weights, count);
    same_bits(cols, plain, AP_NQ * w, "weighted sums with unseen samples",
              w, count);
    window_rows_free(&wr);
    free(cols);
    free(plain);
}

/* Box sums down the windows of up to four consecutive output rows
 * (ap_aquamvs_box_down_group), each 2 r + 1 rows clamped to the ring's,
 * against each window's rows summed in the same order: the rows all
 * windows hold, four at a time in pairs, then the window's own. */
static void
check_box_group(uint64_t *s, int w, int r)
{
    enum { RING = 2 * MAX_R + 4 };
    double *rows[RING], *out = exact(4 * (size_t)w, sizeof(double)),
           *plain = exact((size_t)w, sizeof(double));
    const double *ring[RING];
    for (int k = 0; k < RING; k++) {
        rows[k] = exact((size_t)w, sizeof(double));
        for (int x = 0; x < w; x++) {
            rows[k][x] = uniform(s, -1.0, 1.0);
        }
        ring[k] = rows[k];
    }
    /* at most 2 r + 1 windows, so that some rows are in all of them */
    int g = 1 + (int)uniform(s, 0.0, 4.0), lo[4], hi[4];
    g = g < 2 * r + 1 ? g : 2 * r + 1;
    int clip = (int)uniform(s, 0.0, (double)r);     /* rows off the ring */
    for (int i = 0; i < g; i++) {
        lo[i] = i - clip > 0 ? i - clip : 0;
        hi[i] = i + 2 * r - clip;
    }
    int first = lo[g - 1], last = hi[0];
    ap_aquamvs_box_down_group(ring, first, last, lo, hi, g, w, out);
    for (int i = 0; i < g; i++) {
        for (int x = 0; x < w; x++) {
            double core = 0.0;
            int k = first;
            for (; k + 3 <= last; k += 4) {
                core += (rows[k][x] + rows[k + 1][x]) +
                        (rows[k + 2][x] + rows[k + 3][x]);
            }
            for (; k <= last; k++) {
                core += rows[k][x];
            }
            for (int j = lo[i]; j < first; j++) {
                core += rows[j][x];
            }
            for (int j = last + 1; j <= hi[i]; j++) {
                core += rows[j][x];
            }
            plain[x] = core;
        }
        same_bits(out + (size_t)i * w, plain, w,
                  "AquaMVS's box down a group of windows", w, r);
    }
    for (int k = 0; k < RING; k++) {
        free(rows[k]);
    }
    free(out);
    free(plain);
}

/* The symmetric filter down four consecutive rows' windows, in one call,
 * against each row's plain sum, bit for bit. */
static void
check_down_four(uint64_t *s, int w, int r)
{
    double taps[MAX_R + 1];
    double *rows[2 * MAX_R + 4], *out = exact((size_t)4 * w, sizeof(double));
    double *plain = exact((size_t)w, sizeof(double));
    const double *window[2 * MAX_R + 4];
    make_taps(r, taps);
    for (int k = 0; k < 2 * r + 4; k++) {
        rows[k] = exact((size_t)w, sizeof(double));
        for (int x = 0; x < w; x++) {
            rows[k][x] = uniform(s, -1.0, 1.0);
        }
        window[k] = rows[k];
    }
    ap_aquamvs_down_symmetric_four(window, r, taps, w, out);
    for (int i = 0; i < 4; i++) {
        for (int x = 0; x < w; x++) {
            plain[x] = taps[0] * rows[i + r][x];
            for (int j = 1; j <= r; j++) {
                plain[x] += taps[j] * (rows[i + r - j][x] +
                                       rows[i + r + j][x]);
            }
        }
        same_bits(out + (size_t)i * w, plain, w,
                  "AquaMVS's filter down four windows", w, r);
    }
    for (int k = 0; k < 2 * r + 4; k++) {
        free(rows[k]);
    }
    free(out);
    free(plain);
}

static void
check_aquamvs_filters(uint64_t *s, int w, int r)
{
    double taps[MAX_R + 1], weights[2 * MAX_R + 1];
    double *padded = exact((size_t)(w + 2 * r), sizeof(double));
    double *rows[2 * MAX_R + 1], *out = exact((size_t)w, sizeof(double)),
           *plain = exact((size_t)w, sizeof(double)),
           *weighted = exact((size_t)w, sizeof(double));
    const double *window[2 * MAX_R + 1];
    make_taps(r, taps);
    for (int x = 0; x < w; x++) {
        padded[r + x] = uniform(s, -1.0, 1.0);
    }
    ap_aquamvs_along(padded, w, r, taps, out);
    for (int x = 0; x < w; x++) {
        const double *p = padded + r + x;
        plain[x] = taps[0] * p[0];
        for (int j = 1; j <= r; j++) {
            plain[x] += taps[j] * (p[-j] + p[j]);
        }
    }
    same_bits(out, plain, w, "AquaMVS's filter along a row", w, r);
    ap_aquamvs_box_along(padded, w, r, out);
    for (int x = 0; x < w; x++) {
        const double *p = padded + r + x;
        plain[x] = p[0];
        for (int j = 1; j <= r; j++) {
            plain[x] += p[-j] + p[j];
        }
    }
    same_bits(out, plain, w, "AquaMVS's box along a row", w, r);
    for (int k = 0; k <= 2 * r; k++) {
        rows[k] = exact((size_t)w, sizeof(double));
        for (int x = 0; x < w; x++) {
            rows[k][x] = uniform(s, -1.0, 1.0);
        }
        window[k] = rows[k];
        weights[k] = taps[k > r ? k - r : r - k];
    }
    ap_aquamvs_down_symmetric(window, r, taps, w, out);
    ap_aquamvs_down(window, weights, 2 * r + 1, w, weighted);
    for (int x = 0; x < w; x++) {
        plain[x] = taps[0] * rows[r][x];
        for (int j = 1; j <= r; j++) {
            plain[x] += taps[j] * (rows[r - j][x] + rows[r + j][x]);
        }
        if (!(fabs(out[x] - weighted[x]) <= 1e-14) && failures++ < 5) {
            printf("FAIL: AquaMVS's filter down, w %d, r %d, at %d: %.17g "
                   "against the weighted rows' %.17g\n", w, r, x, out[x],
                   weighted[x]);
        }
    }
    same_bits(out, plain, w, "AquaMVS's filter down a window", w, r);
    for (int k = 0; k <= 2 * r; k++) {
        free(rows[k]);
    }
    free(padded);
    free(out);
    free(plain);
    free(weighted);
    check_box_group(s, w, r);
    check_down_four(s, w, r);
}

/* Every check, at the width ap_wide_lanes() says */
static int
check_all(uint64_t *seed)
{
    static const double unseen[4] = {0.0, 0.05, 0.5, 1.0};
    int cases = 0;
    for (int w = 1; w <= MAX_W; w++) {
        for (int r = 1; r <= MAX_R; r++) {
            for (int u = 0; u < 4; u++) {
                check_slide(seed, w, r, unseen[u]);
                check_ncc_table(seed, w, r, unseen[u]);
                cases += 2;
            }
            check_gauss_range(seed, w, r);
            check_aquamvs_filters(seed, w, r);
            cases += 2;
        }
    }
    static const int wide[6] = {8, 10, 14, 17, 24, MAX_GAUSS_R};
    for (int w = 1; w <= MAX_GAUSS_W; w++) {
        for (int k = 0; k < 6; k++) {
            check_gauss_range(seed, w, wide[k]);
            cases++;
        }
        for (int count = 1; count <= 2 * MAX_R + 1; count += 5) {
            check_seen_columns(seed, w, count);
            check_all_columns(seed, w, count, 0.05);
            check_all_columns(seed, w, count, 0.5);
            cases += 3;
        }
    }
    return cases;
}

int
main(void)
{
    uint64_t seed = 0x853c49e6748fea9bull;
    int wide = ap_wide_lanes();
    int cases = check_all(&seed);
    if (wide) {
        ap_wide_lanes_allow(0);
        cases += check_all(&seed);
    }
    if (failures) {
        printf("FAIL: %d comparisons differ\n", failures);
        return 1;
    }
    printf("window sums: vector loops and plain forms agree in %d cases "
           "(%s)\n", cases,
           wide ? "eight lanes and four"
                : "four lanes only: no AVX-512 here, or no clones built");
    return 0;
}
