/* The filters of AquaMVS's costs (parity_costs.c): symmetric taps along
 * a zero-padded row, weighted or plain sums down rows. Each window's
 * terms are summed afresh, in the same order wherever it lies, so that
 * every output has the same bits. */
#ifndef AP_PARITY_FILTERS_H
#define AP_PARITY_FILTERS_H

/* out = the symmetric filter taps (centre first) along a row held in
 * padded[radius .. radius + w), with radius zeros each side. */
void ap_aquamvs_along(const double *restrict padded, int w, int radius,
                      const double *restrict taps, double *restrict out);

/* out = the sum of rows[k] weighted by weights[k], k < count. */
void ap_aquamvs_down(const double *const *restrict rows,
                     const double *restrict weights, int count, int w,
                     double *restrict out);

/* The sum ap_aquamvs_down makes of a whole window, rows[0 .. 2 radius],
 * its weights the symmetric taps (centre first), though not its bits:
 * rows the same distance from the centre are added before they are
 * weighted, half the products. */
void ap_aquamvs_down_symmetric(const double *const *restrict rows,
                               int radius, const double *restrict taps,
                               int w, double *restrict out);

/* ap_aquamvs_down_symmetric of four consecutive rows' whole windows,
 * rows[0 .. 2 radius + 3], into out + i w (i < 4): the same bits, each
 * row read once for the four where the radius is 5 and the CPU has
 * AVX-512. */
void ap_aquamvs_down_symmetric_four(const double *const *restrict rows,
                                    int radius, const double *restrict taps,
                                    int w, double *restrict out);

/* The box filter's two: ap_aquamvs_along and ap_aquamvs_down with
 * weights 1, spared their multiplications. */
void ap_aquamvs_box_along(const double *restrict padded, int w, int radius,
                          double *restrict out);

void ap_aquamvs_box_down(const double *const *restrict rows, int count, int w,
                         double *restrict out);

/* out[i] = the sum of rows[k], lo[i] <= k <= hi[i], for g windows
 * that all hold rows [first, last] (not none): those are summed once,
 * then each window's own added, so each sum is still of its own rows
 * alone. */
void ap_aquamvs_box_down_group(const double *const *restrict rows, int first,
                               int last, const int *restrict lo,
                               const int *restrict hi, int g, int w,
                               double *restrict out);

#endif
