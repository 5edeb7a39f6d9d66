/* The window sums' vector loops against their plain forms, to the bit:
 * - the sliding column sums (ap_slide_row, ap_add_row), four columns at
 *   a time, against the same functions one column at a time, which take
 *   the scalar loop;
 * - NCC's costs straight from the prefix sums (ap_box_ncc_costs) against
 *   the box sums stored and then costed (ap_box_sums, ap_ncc_costs);
 * - the Gaussian sums of a range of columns (ap_gauss_sums_range)
 *   against those of the whole row (ap_gauss_sums);
 * for rows of 1 to 41 columns, windows of radius 1 to 7 (wider than some
 * rows), unseen (NaN) samples alone, in runs and everywhere. Exits 1
 * saying what failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random_cases.h"
#include "window_costs.h"

#define MAX_W 41
#define MAX_R 7

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
    double cols[AP_NQ * MAX_W] = {0.0}, one[MAX_W][AP_NQ], flat[AP_NQ * MAX_W];
    memset(one, 0, sizeof(one));
    for (int y = 0; y < rows; y++) {
        for (int x = 0; x < w; x++) {
            ref[y][x] = (float)uniform(s, 0.0, 1.0);
        }
        warped_row(s, warped[y], w, unseen);
    }
    for (int y = 0; y < rows; y++) {
        int leaves = y > 2 * r;
        if (leaves) {
            ap_slide_row(cols, w, AP_COST_NCC, ref[y - 2 * r - 1],
                         warped[y - 2 * r - 1], ref[y], warped[y], 1.0);
        } else {
            ap_add_row(cols, w, AP_COST_NCC, ref[y], warped[y], 1.0);
        }
        for (int x = 0; x < w; x++) {
            if (leaves) {
                ap_slide_row(one[x], 1, AP_COST_NCC, &ref[y - 2 * r - 1][x],
                             &warped[y - 2 * r - 1][x], &ref[y][x],
                             &warped[y][x], 1.0);
            } else {
                ap_add_row(one[x], 1, AP_COST_NCC, &ref[y][x], &warped[y][x],
                           1.0);
            }
            for (int k = 0; k < AP_NQ; k++) {
                flat[k * w + x] = one[x][k];
            }
        }
        same_bits(cols, flat, AP_NQ * w, "sliding column sums", w, r);
    }
    /* the bottom edge: rows taken out, weight -1 */
    for (int y = rows - 2 * r - 1; y < rows; y++) {
        ap_add_row(cols, w, AP_COST_NCC, ref[y], warped[y], -1.0);
        for (int x = 0; x < w; x++) {
            ap_add_row(one[x], 1, AP_COST_NCC, &ref[y][x], &warped[y][x],
                       -1.0);
            for (int k = 0; k < AP_NQ; k++) {
                flat[k * w + x] = one[x][k];
            }
        }
        same_bits(cols, flat, AP_NQ * w, "column sums taken out", w, r);
    }
}

/* Column sums of a window of 2 r + 1 rows, costed both ways. */
static void
check_box_ncc(uint64_t *s, int w, int r, double unseen)
{
    double cols[AP_NQ * MAX_W] = {0.0};
    double prefix[AP_NQ * (MAX_W + 1)], sums[AP_NQ * (MAX_W + 1)];
    double fused[MAX_W] = {0.0}, apart[MAX_W] = {0.0};
    float ref[MAX_W], warped[MAX_W];
    for (int y = 0; y <= 2 * r; y++) {
        for (int x = 0; x < w; x++) {
            ref[x] = (float)uniform(s, 0.0, 1.0);
        }
        warped_row(s, warped, w, unseen);
        ap_add_row(cols, w, AP_COST_NCC, ref, warped, 1.0);
    }
    double full = (double)(2 * r + 1) * (2 * r + 1);
    size_t stride = (size_t)w + 1;
    ap_box_ncc_costs(cols, w, r, full, prefix, sums, fused);
    ap_box_sums(cols, AP_NQ, w, r, prefix, sums);
    ap_ncc_costs(w, full, sums, sums + stride, sums + 2 * stride,
                 sums + 3 * stride, sums + 4 * stride, sums + 5 * stride,
                 apart);
    same_bits(fused, apart, w, "NCC costs from the prefix sums", w, r);
}

static void
check_gauss_range(uint64_t *s, int w, int r)
{
    double gauss[2 * MAX_R + 1], col[MAX_W], whole[MAX_W], part[MAX_W];
    for (int j = -r; j <= r; j++) {     /* any symmetric weights */
        gauss[j + r] = exp(-(double)(j * j) / 4.5);
    }
    for (int x = 0; x < w; x++) {
        col[x] = uniform(s, -1.0, 1.0);
    }
    ap_gauss_sums(col, w, r, gauss, whole);
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
}

int
main(void)
{
    uint64_t seed = 0x853c49e6748fea9bull;
    static const double unseen[4] = {0.0, 0.05, 0.5, 1.0};
    int cases = 0;
    for (int w = 1; w <= MAX_W; w++) {
        for (int r = 1; r <= MAX_R; r++) {
            for (int u = 0; u < 4; u++) {
                check_slide(&seed, w, r, unseen[u]);
                check_box_ncc(&seed, w, r, unseen[u]);
                cases += 2;
            }
            check_gauss_range(&seed, w, r);
            cases++;
        }
    }
    if (failures) {
        printf("FAIL: %d comparisons differ\n", failures);
        return 1;
    }
    printf("window sums: vector loops and plain forms give the same bits in "
           "%d cases\n", cases);
    return 0;
}
