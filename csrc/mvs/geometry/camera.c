#include "camera.h"
#include "camera_math.h"

#include <math.h>
#include <stdio.h>
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

static void
camera_centre(const double *p, double *center)
{
    const double *R = p + 9, *t = p + 18;   /* -R^T t */
    for (int i = 0; i < 3; i++) {
        center[i] = -(R[i] * t[0] + R[3 + i] * t[1] + R[6 + i] * t[2]);
    }
}

/* Camera centre, unit normal and the interface's plane_d of packed
 * params (normal non-zero); returns the centre's height above the
 * interface. */
static double
height_above_water(const double *p, double *center, double *normal,
                   double *plane_d)
{
    camera_centre(p, center);
    /* scaled to its largest entry first: its square cannot overflow */
    double top = fmax(fabs(p[23]), fmax(fabs(p[24]), fabs(p[25])));
    for (int i = 0; i < 3; i++) {
        normal[i] = p[23 + i] / top;
    }
    double len = sqrt(ap_dot3(normal, normal));
    for (int i = 0; i < 3; i++) {
        normal[i] /= len;
    }
    double on_plane[3] = {0.0, 0.0, p[22]};
    *plane_d = ap_dot3(normal, on_plane);
    return ap_dot3(normal, center) - *plane_d;
}

/* The parameters whose normal is the water surface's: p, or for
 * AP_CAST_AQUAMVS (whose normal only bends cast rays) a copy in level
 * with a level one. */
static const double *
surface_params(const double *p, double *level)
{
    if (p[21] != AP_CAST_AQUAMVS) {
        return p;
    }
    memcpy(level, p, AP_CAMERA_PARAMS * sizeof(double));
    level[23] = 0.0;
    level[24] = 0.0;
    level[25] = -1.0;
    return level;
}

/* The largest entry of |R R^T - I|. */
static double
rotation_error(const double *R)
{
    double worst = 0.0;
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            worst = fmax(worst, fabs(ap_dot3(R + 3 * i, R + 3 * j) -
                                     (i == j)));
        }
    }
    return worst;
}

static double
det3(const double *m)
{
    return m[0] * (m[4] * m[8] - m[5] * m[7]) -
           m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

int
ap_camera_init(ap_camera *cam, const double *p)
{
    memset(cam, 0, sizeof(*cam));
    for (int i = 0; i < AP_CAMERA_PARAMS; i++) {
        if (!isfinite(p[i])) {
            return AP_CAMERA_NOT_FINITE;
        }
    }
    if (p[21] != 0.0 && p[21] != 1.0 && p[21] != AP_CAST_AQUAMVS) {
        return AP_CAMERA_NOT_A_FLAG;
    }
    /* a pixel's ray is K^-1 (u, v, 1): with any other last row it could
     * point behind the camera that projects the same point in front */
    if (p[6] != 0.0 || p[7] != 0.0 || p[8] != 1.0) {
        return AP_CAMERA_K_LAST_ROW;
    }
    memcpy(cam->K, p, 9 * sizeof(double));
    memcpy(cam->R, p + 9, 9 * sizeof(double));
    memcpy(cam->t, p + 18, 3 * sizeof(double));
    if (invert3(cam->K, cam->Kinv) < 0) {
        return AP_CAMERA_K_SINGULAR;
    }
    if (!(rotation_error(cam->R) <= 1e-6)) {
        return AP_CAMERA_R_NOT_ORTHONORMAL;
    }
    if (det3(cam->R) < 0) {     /* orthonormal, so det is +1 or -1 */
        return AP_CAMERA_R_REFLECTION;
    }
    cam->refractive = p[21] != 0.0;
    if (!cam->refractive) {
        camera_centre(p, cam->center);
        return AP_CAMERA_OK;
    }
    if (p[23] == 0.0 && p[24] == 0.0 && p[25] == 0.0) {
        return AP_CAMERA_NORMAL_ZERO;
    }
    if (!(p[26] > 0)) {
        return AP_CAMERA_N_AIR;
    }
    if (!(p[27] > 0)) {
        return AP_CAMERA_N_WATER;
    }
    if (p[21] == AP_CAST_AQUAMVS) {
        cam->aquamvs_cast = 1;
        memcpy(cam->bend, p + 23, 3 * sizeof(double));
    }
    double level[AP_CAMERA_PARAMS];
    p = surface_params(p, level);
    cam->height = height_above_water(p, cam->center, cam->normal,
                                     &cam->plane_d);
    if (!(cam->height > 0) || !isfinite(cam->height)) {
        return AP_CAMERA_NOT_ABOVE_WATER;
    }
    cam->n_air = p[26];
    cam->n_water = p[27];
    for (int i = 0; i < 3; i++) {
        cam->foot[i] = cam->center[i] - cam->height * cam->normal[i];
    }
    return AP_CAMERA_OK;
}

/* The name of packed parameter i, as Camera's arguments call it. */
static void
param_name(int i, char *buf, size_t size)
{
    if (i < 9) {
        snprintf(buf, size, "K[%d][%d]", i / 3, i % 3);
    } else if (i < 18) {
        snprintf(buf, size, "R[%d][%d]", (i - 9) / 3, (i - 9) % 3);
    } else if (i < 21) {
        snprintf(buf, size, "t[%d]", i - 18);
    } else if (i == 21) {
        snprintf(buf, size, "%s", "refractive");
    } else if (i == 22) {
        snprintf(buf, size, "%s", "water_z");
    } else if (i < 26) {
        snprintf(buf, size, "normal[%d]", i - 23);
    } else {
        snprintf(buf, size, "%s", i == 26 ? "n_air" : "n_water");
    }
}

void
ap_camera_explain(const double *p, int status, char *buf, size_t size)
{
    char name[16], where[40];
    double center[3], normal[3], plane_d, height, level[AP_CAMERA_PARAMS];
    switch (status) {
    case AP_CAMERA_OK:
        snprintf(buf, size, "a valid camera");
        return;
    case AP_CAMERA_NOT_FINITE:
        for (int i = 0; i < AP_CAMERA_PARAMS; i++) {
            if (!isfinite(p[i])) {
                param_name(i, name, sizeof(name));
                snprintf(buf, size, "%s is %g: every parameter must be "
                         "finite", name, p[i]);
                return;
            }
        }
        break;
    case AP_CAMERA_NOT_A_FLAG:
        snprintf(buf, size, "refractive is %g: it must be 0 (pinhole), "
                 "1 (refractive) or %d (refractive, casting as AquaMVS "
                 "does)", p[21], AP_CAST_AQUAMVS);
        return;
    case AP_CAMERA_K_LAST_ROW:
        snprintf(buf, size, "K's last row is [%g, %g, %g]: it must be "
                 "[0, 0, 1]", p[6], p[7], p[8]);
        return;
    case AP_CAMERA_K_SINGULAR:
        snprintf(buf, size, isfinite(det3(p))
                 ? "K is singular (determinant %g): its focal lengths "
                   "must be non-zero"
                 : "K's determinant overflows (%g): its entries are too "
                   "large", det3(p));
        return;
    case AP_CAMERA_R_NOT_ORTHONORMAL:
        snprintf(buf, size, "R is not a rotation: R R^T differs from the "
                 "identity by up to %g (more than 1e-6); its rows must be "
                 "orthonormal", rotation_error(p + 9));
        return;
    case AP_CAMERA_R_REFLECTION:
        snprintf(buf, size, "R is a reflection (determinant %g), not a "
                 "rotation (determinant +1)", det3(p + 9));
        return;
    case AP_CAMERA_NORMAL_ZERO:
        snprintf(buf, size, "normal is the zero vector: it must point "
                 "from the water into the air, with any non-zero length");
        return;
    case AP_CAMERA_N_AIR:
    case AP_CAMERA_N_WATER:
        snprintf(buf, size, "%s is %g: a refractive index must be > 0",
                 status == AP_CAMERA_N_AIR ? "n_air" : "n_water",
                 status == AP_CAMERA_N_AIR ? p[26] : p[27]);
        return;
    case AP_CAMERA_NOT_ABOVE_WATER:
        height = height_above_water(surface_params(p, level), center, normal,
                                    &plane_d);
        snprintf(where, sizeof(where), height < 0 ? "%g below" : "%g from",
                 fabs(height));
        snprintf(buf, size, "the camera centre (%g, %g, %g) is %s its "
                 "water surface (water_z %g, normal (%g, %g, %g) towards "
                 "the air): a refractive camera must be above it, on the "
                 "side the normal points to", center[0] + 0.0,
                 center[1] + 0.0, center[2] + 0.0,
                 height == 0 ? "on" : where, p[22], normal[0] + 0.0,
                 normal[1] + 0.0, normal[2] + 0.0);
        return;
    default:
        break;
    }
    snprintf(buf, size, "not a camera (status %d)", status);
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
