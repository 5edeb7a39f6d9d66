/* Window costs of a warped row against the reference, from column sums:
 * per pixel, sums over the window of the count of seen pixels and of r,
 * s, r^2, s^2, r s (reference and warped values), then NCC, SSIM or SAD. */
#ifndef AP_WINDOW_COSTS_H
#define AP_WINDOW_COSTS_H

#include "sweep.h"

enum { AP_Q_COUNT, AP_Q_R, AP_Q_S, AP_Q_RR, AP_Q_SS, AP_Q_RS, AP_NQ };

/* NCC keeps three column sums a view, of the quantities that hold the
 * warped values (s, s^2, r s); the count, r and r^2 sums of a window
 * are the reference's (made once a call) less those of its samples not
 * seen, whose column sums are kept apart, where rows have any. */
#define AP_NW 3

/* SAD's column sums (2 rows of w: the count of seen samples and the
 * absolute differences): adds weight times those of one warped row (NaN:
 * not seen), after those of a row leaving the window (ref_out, out; both
 * NULL: none) are taken out. */
void ap_slide_differences(double *cols, int w, const float *ref_out,
                          const float *out, const float *ref,
                          const float *warped, double weight);

/* Column sums of count rows (refs, rows: reference and warped), the
 * quantities of row j weighted by weights[j]: SSIM's Gaussian window
 * down the columns, summed in one pass, for columns [x0, x1) of AP_NQ
 * rows of w. */
void ap_weighted_columns(double *cols, int w, int x0, int x1,
                         const float *const *refs, const float *const *rows,
                         const double *weights, int count);

/* ap_weighted_columns' three sums that hold the warped values (the
 * AP_Q_S, AP_Q_SS and AP_Q_RS rows), for columns whose samples are all
 * seen: the same products, so the same bits; the other three depend on
 * the reference alone there. */
void ap_weighted_seen_columns(double *cols, int w, int x0, int x1,
                              const float *const *refs,
                              const float *const *rows,
                              const double *weights, int count);

/* out (w) = Gaussian weights gauss (2 r + 1, r at most
 * (AP_MAX_WINDOW - 1) / 2) along a row of column sums col; outside the
 * image weighs nothing. */
void ap_gauss_sums(const double *col, int w, int r, const double *gauss,
                   double *out);

/* ap_gauss_sums' outputs [x0, x1) alone, the same bits: it reads col
 * [x0 - r, x1 + r) only. */
void ap_gauss_sums_range(const double *col, int w, int r,
                         const double *gauss, int x0, int x1, double *out);

/* The first and last column of a warped row where a sample is not seen
 * (NaN); first > last where every one is. */
void ap_unseen_span(const float *row, int w, int span[2]);

/* Adds to acc (w) 1 - SSIM of each pixel from its window sums. */
void ap_ssim_costs(int w, const double *n, const double *sr,
                   const double *ss, const double *srr, const double *sss,
                   const double *srs, double *acc);

/* Box sums (2 r + 1 wide, clamped at the row's ends) of nq rows of w
 * column sums into nq rows of w + 1 (out), through their prefix sums
 * (prefix: nq rows of w + 1). */
void ap_box_sums(const double *cols, int nq, int w, int r, double *prefix,
                 double *out);

/* Adds weight times s, s^2 and r s of a warped row to AP_NW rows of w
 * column sums, after those of a row leaving the window (ref_out, out;
 * both NULL: none) are taken out; a window slid one row sums to the
 * same bits as one row taken out and another put in. */
void ap_slide_warped(double *cols, int w, const float *ref_out,
                     const float *out, const float *ref, const float *warped,
                     double weight);

/* The pixels [p0, p1) of a row whose windows, 2 r + 1 columns wide,
 * hold a sample not seen, where the window's rows have them in columns
 * [first, last]; p0 == p1 == 0 where first > last (none). */
static inline void
ap_unseen_pixels(int first, int last, int r, int w, int *p0, int *p1)
{
    *p0 = 0;
    *p1 = 0;
    if (first <= last) {
        *p0 = first - r > 0 ? first - r : 0;
        *p1 = last + r + 1 < w ? last + r + 1 : w;
    }
}

/* Adds weight times the count, r and r^2 of a row's samples not seen, in
 * columns [x0, x1), to AP_NW rows of w column sums. */
void ap_slide_unseen(double *cols, int w, int x0, int x1, const float *ref,
                     const float *warped, double weight);

/* The count, r and r^2 window sums of pixels [p0, p1) of a row (into
 * fixed, indexed from p0): the reference's (seen, the whole row) less
 * the box sums of the unseen samples' column sums cols (ap_slide_unseen),
 * which it reads in columns [p0 - r, p1 + r). prefix: AP_NW rows of
 * w + 1. */
void ap_unseen_fix(const double *cols, int w, int r, int p0, int p1,
                   const double *const seen[AP_NW], double *prefix,
                   double *const fixed[AP_NW]);

/* Adds to acc (w) 1 - NCC of each pixel of a row, from the warped column
 * sums cols (AP_NW rows of w, box windows of 2 r + 1 clamped at the
 * row's ends) and the count, r and r^2 window sums: seen (whole rows)
 * outside [p0, p1), fixed (indexed from p0) inside. prefix: AP_NW rows
 * of w + 1. */
void ap_ncc_table_costs(const double *cols, int w, int r, double full,
                        const double *const seen[AP_NW], int p0, int p1,
                        const double *const fixed[AP_NW], double *prefix,
                        double *acc);

/* Adds to acc (w) the SAD or SSIM cost of each pixel of a row whose
 * column sums are cols: box windows of 2 radius + 1, or the Gaussian
 * weights gauss (2 radius + 1, summing to 1). scratch: 2 AP_NQ (w + 1)
 * doubles. */
void ap_add_row_costs(const double *cols, int w, int radius, ap_cost cost,
                      const double *gauss, double *scratch, double *acc);

#endif
