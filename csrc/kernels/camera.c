#include "camera.h"
#include "snell.h"

#include <math.h>
#include <string.h>

static double
dot3(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

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
            double d = dot3(&cam->R[3 * i], &cam->R[3 * j]) - (i == j);
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
    double len = sqrt(dot3(p + 23, p + 23));
    if (!(len > 0) || !(p[26] > 0) || !(p[27] > 0)) {
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        cam->normal[i] = p[23 + i] / len;
    }
    double on_plane[3] = {0.0, 0.0, p[22]};
    cam->plane_d = dot3(cam->normal, on_plane);
    cam->n_air = p[26];
    cam->n_water = p[27];
    cam->height = dot3(cam->normal, cam->center) - cam->plane_d;
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
    double pix[3] = {u, v, 1.0}, in_cam[3], d[3];
    for (int i = 0; i < 3; i++) {
        in_cam[i] = dot3(&cam->Kinv[3 * i], pix);
    }
    for (int i = 0; i < 3; i++) {  /* R^T in_cam */
        d[i] = cam->R[i] * in_cam[0] + cam->R[3 + i] * in_cam[1] +
               cam->R[6 + i] * in_cam[2];
    }
    double len = sqrt(dot3(d, d));
    for (int i = 0; i < 3; i++) {
        d[i] /= len;
    }
    if (!cam->refractive) {
        memcpy(origin, cam->center, sizeof(cam->center));
        memcpy(direction, d, 3 * sizeof(double));
        return 1;
    }
    double cos_in = -dot3(cam->normal, d);  /* > 0 when going down */
    if (!(cos_in > 0)) {
        return 0;
    }
    double s = cam->height / cos_in;
    for (int i = 0; i < 3; i++) {
        origin[i] = cam->center[i] + s * d[i];
    }
    /* Snell in vector form: t = eta d + (eta cos_i - cos_t) n */
    double eta = cam->n_air / cam->n_water;
    double k = 1.0 - eta * eta * (1.0 - cos_in * cos_in);
    double c = eta * cos_in - sqrt(k);
    for (int i = 0; i < 3; i++) {
        direction[i] = eta * d[i] + c * cam->normal[i];
    }
    return 1;
}

static int
pinhole(const ap_camera *cam, const double *x, double *u, double *v)
{
    double xc[3];
    for (int i = 0; i < 3; i++) {
        xc[i] = dot3(&cam->R[3 * i], x) + cam->t[i];
    }
    if (!(xc[2] > 0)) {
        return 0;
    }
    double p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = dot3(&cam->K[3 * i], xc);
    }
    *u = p[0] / p[2];
    *v = p[1] / p[2];
    return 1;
}

int
ap_camera_project(const ap_camera *cam, const double *x, double *u,
                  double *v, double *guess)
{
    if (!cam->refractive) {
        return pinhole(cam, x, u, v);
    }
    double depth = cam->plane_d - dot3(cam->normal, x);  /* below surface */
    if (!(depth > 0)) {
        return 0;
    }
    /* horizontal offset of x from the camera's foot, in the interface */
    double h[3];
    for (int i = 0; i < 3; i++) {
        h[i] = x[i] + depth * cam->normal[i] - cam->foot[i];
    }
    double dist = sqrt(dot3(h, h));
    double hc = cam->height, na = cam->n_air, nw = cam->n_water;
    int warm = guess && *guess >= 0;
    double r = warm ? *guess : dist * hc / (hc + depth);
    int steps = warm ? AP_NEWTON_WARM : AP_NEWTON_COLD;
    for (int k = 0; k < steps; k++) {
        r = ap_snell_step(r, dist, depth, hc, na, nw);
    }
    if (guess) {
        *guess = r;
    }
    double p[3];
    double scale = dist > 0 ? r / dist : 0.0;
    for (int i = 0; i < 3; i++) {
        p[i] = cam->foot[i] + scale * h[i];
    }
    return pinhole(cam, p, u, v);
}
