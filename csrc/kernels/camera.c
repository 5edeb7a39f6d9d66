#include "camera.h"
#include "camera_math.h"

#include <math.h>
#include <string.h>

static int
invert3(const double *m, double *out)
{
    double c00 = m[4] * m[8] - m[5] * m[7];
    double c01 = m[5] * m[6] - m[3] * m[8];
    double c02 = m[3] * m[7] - m[4] * m[6];
    double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
    if (!isfinite(det) || fabs(det) < 1e-12) {
        return -1;
    }
    double s = 1.0 / det;
    out[0] = c00 * s;
    out[1] = (m[2] * m[7] - m[1] * m[8]) * s;
    out[2] = (m[1] * m[5] - m[2] * m[4]) * s;
    out[3] = c01 * s;
    out[4] = (m[0] * m[8] - m[2] * m[6]) * s;
    out[5] = (m[2] * m[3] - m[0] * m[5]) * s;
    out[6] = c02 * s;
    out[7] = (m[1] * m[6] - m[0] * m[7]) * s;
    out[8] = (m[0] * m[4] - m[1] * m[3]) * s;
    return 0;
}

int
ap_camera_init(ap_camera *cam, const double *p)
{
    memset(cam, 0, sizeof(*cam));
    memcpy(cam->K, p, 9 * sizeof(double));
    memcpy(cam->R, p + 9, 9 * sizeof(double));
    memcpy(cam->t, p + 18, 3 * sizeof(double));
    if (invert3(cam->K, cam->Kinv) < 0) {
        return -1;
    }
    /* R R^T = I and det R = 1 */
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            double d = ap_dot3(&cam->R[3 * i], &cam->R[3 * j]) - (i == j);
            if (fabs(d) > 1e-6) {
                return -1;
            }
        }
    }
    const double *R = cam->R;   /* orthonormal; det +1, not a mirror */
    if (R[0] * (R[4] * R[8] - R[5] * R[7]) - R[1] * (R[3] * R[8] - R[5] * R[6])
        + R[2] * (R[3] * R[7] - R[4] * R[6]) < 0) {
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        /* centre = -R^T t */
        cam->center[i] = -(cam->R[i] * cam->t[0] + cam->R[3 + i] * cam->t[1]
                           + cam->R[6 + i] * cam->t[2]);
    }
    cam->refractive = p[21] != 0.0;
    if (!cam->refractive) {
        return 0;
    }
    double len = sqrt(ap_dot3(p + 23, p + 23));
    if (!(len > 0) || !(p[26] > 0) || !(p[27] > 0)) {
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        cam->normal[i] = p[23 + i] / len;
    }
    double on_plane[3] = {0.0, 0.0, p[22]};
    cam->plane_d = ap_dot3(cam->normal, on_plane);
    cam->n_air = p[26];
    cam->n_water = p[27];
    cam->height = ap_dot3(cam->normal, cam->center) - cam->plane_d;
    if (!(cam->height > 0)) {
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        cam->foot[i] = cam->center[i] - cam->height * cam->normal[i];
    }
    return 0;
}

int
ap_camera_cast(const ap_camera *cam, double u, double v, double *origin,
               double *direction)
{
    return ap_cast(cam, u, v, origin, direction);
}

int
ap_camera_project(const ap_camera *cam, const double *x, double *u,
                  double *v)
{
    return ap_project(cam, x, u, v);
}
