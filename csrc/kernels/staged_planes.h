/* Costs staged plane by plane for a band of rows, then written into the
 * (h, w, d) volume a pixel at a time: each pixel's planes are one stretch
 * of memory, where written a plane at a time every line of the volume
 * would be fetched once a plane. */
#ifndef AP_STAGED_PLANES_H
#define AP_STAGED_PLANES_H

#include <stddef.h>

/* The most planes a work item stages: a pixel's 16 costs are one cache
 * line of the volume. */
#define AP_STAGED_PLANES 16

/* Planes [plane0, plane0 + count) of rows [y0, y1) of the volume (h, w,
 * d) from staged: plane k's row y at staged + k * plane_size +
 * (y - y0) * w. */
void ap_write_staged(float *volume, int w, int d, int plane0,
                     const float *staged, size_t plane_size, int count,
                     int y0, int y1);

#endif
