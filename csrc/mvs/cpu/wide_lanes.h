/* Window loops at eight lanes (window_lanes.h) for CPUs with AVX-512,
 * where the clones' four-lane vectors leave half of each register idle:
 * the same bits as the four-lane loops, in fewer instructions. */
#ifndef AP_WIDE_LANES_H
#define AP_WIDE_LANES_H

#include <stddef.h>

/* Whether the eight-lane loops run here: the CPU has AVX-512 (x86-64-v4,
 * as the clones pick) and they are allowed. */
int ap_wide_lanes(void);

/* Allows them (the default) or not: the tests compare both widths. */
void ap_wide_lanes_allow(int allow);

/* window_lanes.h's loops; call them only where ap_wide_lanes() says. */
int ap_wide_all_columns(double *const out[6], int x, int x1,
                        const float *const *refs, const float *const *rows,
                        const double *weights, int count);
int ap_wide_seen_columns(double *const out[3], int x, int x1,
                         const float *const *refs, const float *const *rows,
                         const double *weights, int count);
int ap_wide_taps_along(const double *col, int r, const double *taps,
                       int x, int end, double *out);
int ap_wide_down_four_5(const double *const *rows, const double *taps,
                        int x, int end, size_t w, double *out);
int ap_wide_taps_down(const double *const *rows, int r,
                      const double *taps, int x, int end, double *out);

#endif
