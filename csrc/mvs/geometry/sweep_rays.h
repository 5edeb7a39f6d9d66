/* What every plane sweep on the CPU prepares once: the reference pixels'
 * rays and the source cameras' projectors, tabulated over the depths
 * swept. */
#ifndef AP_SWEEP_RAYS_H
#define AP_SWEEP_RAYS_H

#include "camera.h"
#include "projector.h"

/* Image rows a thread of a sweep's setup takes at a time. */
#define AP_SETUP_ROWS 8

/* Rays of every reference pixel as six (h, w) planes: origin x, y, z,
 * direction x, y, z; a NaN origin where the pixel has no ray. */
typedef struct {
    double *planes;
    int h, w;
} ap_ray_table;

/* Fills t with cam's rays of an (h, w) image, rows shared by up to
 * `threads` threads. Returns 0, -1 out of memory or -2 when a thread
 * cannot start (nothing to free then); free t->planes after. */
int ap_ray_table_make(ap_ray_table *t, const ap_camera *cam, int h, int w,
                      int threads);

/* Row y's six planes. */
void ap_ray_row(const ap_ray_table *t, int y, const double *row[6]);

/* Projectors for the n source cameras, their tables spanning every
 * point the rays reach between depths first and last, views shared by up
 * to `threads` threads. Returns 0, -1 out of memory or -2 when a
 * thread cannot start (nothing left to free then); ap_projectors_free
 * after. */
int ap_projectors_make(ap_projector *proj, const ap_camera *cams, int n,
                       const ap_ray_table *rays, double first, double last,
                       int threads);
void ap_projectors_free(ap_projector *proj, int n);

#endif
