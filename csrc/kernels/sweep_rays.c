#include "sweep_rays.h"

#include <math.h>
#include <stdlib.h>

int
ap_ray_table_make(ap_ray_table *t, const ap_camera *cam, int h, int w)
{
    size_t n = (size_t)h * w;
    t->h = h;
    t->w = w;
    t->planes = malloc(6 * n * sizeof(double));
    if (t->planes == NULL) {
        return -1;
    }
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            double o[3], d[3];
            int ok = ap_camera_cast(cam, x, y, o, d);
            for (int k = 0; k < 3; k++) {
                t->planes[k * n + i] = ok ? o[k] : NAN;
                t->planes[(3 + k) * n + i] = ok ? d[k] : NAN;
            }
        }
    }
    return 0;
}

void
ap_ray_row(const ap_ray_table *t, int y, const double *row[6])
{
    size_t n = (size_t)t->h * t->w;
    for (int k = 0; k < 6; k++) {
        row[k] = t->planes + k * n + (size_t)y * t->w;
    }
}

void
ap_projectors_free(ap_projector *proj, int n)
{
    for (int v = 0; v < n; v++) {
        ap_projector_free(&proj[v]);
    }
}

/* The depth below the surface is linear along a ray and the horizontal
 * distance convex, so the two end depths bound the tables' box. */
int
ap_projectors_make(ap_projector *proj, const ap_camera *cams, int n,
                   const ap_ray_table *rays, double first, double last)
{
    for (int v = 0; v < n; v++) {
        ap_projector_init(&proj[v], &cams[v]);
    }
    for (int v = 0; v < n; v++) {
        double box[3] = {0.0, INFINITY, 0.0};
        for (int y = 0; cams[v].refractive && y < rays->h; y++) {
            const double *row[6];
            ap_ray_row(rays, y, row);
            ap_projector_extent(&proj[v], row, rays->w, first, box);
            ap_projector_extent(&proj[v], row, rays->w, last, box);
        }
        if (cams[v].refractive &&
            ap_projector_tabulate(&proj[v], box[0], box[1], box[2]) < 0) {
            ap_projectors_free(proj, n);
            return -1;
        }
    }
    return 0;
}
