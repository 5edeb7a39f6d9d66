/* Window costs of a warped row against the reference, from column sums:
 * per pixel, sums over the window of the count of seen pixels and of r,
 * s, r^2, s^2, r s (reference and warped values), then NCC, SSIM or SAD. */
#ifndef AP_WINDOW_COSTS_H
#define AP_WINDOW_COSTS_H

#include "sweep.h"

enum { AP_Q_COUNT, AP_Q_R, AP_Q_S, AP_Q_RR, AP_Q_SS, AP_Q_RS, AP_NQ };

/* Adds weight times the quantities of one warped row (NaN: not seen) to
 * column sums cols (AP_NQ rows of w). SAD keeps the count and the
 * absolute difference (in the AP_Q_R row) only. */
void ap_add_row(double *cols, int w, ap_cost cost, const float *ref,
                const float *warped, double weight);

/* ap_add_row with weight 1 after the quantities of a row leaving the
 * window (ref_out, out) are taken out: column sums slid down one row. */
void ap_slide_row(double *cols, int w, ap_cost cost, const float *ref_out,
                  const float *out, const float *ref, const float *warped,
                  double weight);

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

/* out (w) = Gaussian weights gauss (2 r + 1) along a row of column sums
 * col; outside the image weighs nothing. */
void ap_gauss_sums(const double *col, int w, int r, const double *gauss,
                   double *out);

/* ap_gauss_sums' outputs [x0, x1) alone, the same bits: it reads col
 * [x0 - r, x1 + r) only. */
void ap_gauss_sums_range(const double *col, int w, int r,
                         const double *gauss, int x0, int x1, double *out);

/* How many samples of a warped row are not seen (NaN). */
int ap_count_unseen(const float *row, int w);

/* Adds to acc (w) 1 - SSIM of each pixel from its window sums. */
void ap_ssim_costs(int w, const double *n, const double *sr,
                   const double *ss, const double *srr, const double *sss,
                   const double *srs, double *acc);

/* Box sums (2 r + 1 wide, clamped at the row's ends) of nq rows of w
 * column sums into nq rows of w + 1 (out), through their prefix sums
 * (prefix: nq rows of w + 1). */
void ap_box_sums(const double *cols, int nq, int w, int r, double *prefix,
                 double *out);

/* Adds to acc (w) 1 - NCC of each pixel from its window sums. */
void ap_ncc_costs(int w, double full, const double *n, const double *sr,
                  const double *ss, const double *srr, const double *sss,
                  const double *srs, double *acc);

/* ap_box_sums and then ap_ncc_costs of AP_NQ rows of column sums, the
 * same bits, storing no window sum where the window needs no clamp
 * (prefix and sums: AP_NQ rows of w + 1). */
void ap_box_ncc_costs(const double *cols, int w, int r, double full,
                      double *prefix, double *sums, double *acc);

/* Adds to acc (w) the window cost of each pixel of a row whose column
 * sums are cols: box windows of 2 radius + 1, or for SSIM the Gaussian
 * weights gauss (2 radius + 1, summing to 1). scratch: 2 AP_NQ (w + 1)
 * doubles. */
void ap_add_row_costs(const double *cols, int w, int radius, ap_cost cost,
                      const double *gauss, double *scratch, double *acc);

#endif
