/* One reference pixel's ray walked down the depth planes for one source
 * view: the warp of every plane of a batch in one GPU thread, shared with
 * the host so that the tests can run it where there is no GPU. Each
 * refracted crossing starts from the planes before's (ap_crossing_walk). */
#ifndef AP_WARP_WALK_H
#define AP_WARP_WALK_H

#include <math.h>
#include <stddef.h>

#include "camera_math.h"
#include "host_device.h"
#include "../cpu/cost_math.h"

/* The ray (origin o, direction d; NaN origin: none) at depths[0, planes)
 * seen by cam in img (h x w): out[j * stride] is the sample at depths[j],
 * NaN where it is not seen. */
static inline AP_HD void
ap_warp_walk(const double *o, const double *d, const double *depths,
             int planes, const ap_camera *cam, const float *img, int h,
             int w, float *out, size_t stride)
{
    ap_walk walk = ap_walk_none();
    for (int j = 0; j < planes; j++) {
        double x[3], u, v;
        for (int k = 0; k < 3; k++) {
            x[k] = o[k] + depths[j] * d[k];
        }
        int seen = o[0] == o[0] && ap_project_with(cam, x, &u, &v, 1, &walk);
        out[(size_t)j * stride] = seen ? ap_bilinear(img, h, w, u, v) : NAN;
    }
}

#endif
