/* Casting and projecting through an ap_camera, shared by the C kernels
 * and the CUDA kernels so that both compute the same maths. */
#ifndef AP_CAMERA_MATH_H
#define AP_CAMERA_MATH_H

#include <math.h>

#include "camera.h"
#include "host_device.h"
#include "snell.h"

static inline AP_HD double
ap_dot3(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* row . [x; w] for a row of a 3x4 matrix */
static inline AP_HD double
ap_row_apply(const double *row, const double *x, double w)
{
    return ap_dot3(row, x) + w * row[3];
}

/* A camera's pinhole folded: the homogeneous pixel P [x; 1], P = K [R | t],
 * and the camera depth depth . [x; 1]. The CPU's projector and the GPU's
 * frames both make them here, so that both project alike. */
static inline AP_HD void
ap_camera_fold(const ap_camera *cam, double *P, double *depth)
{
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            P[4 * i + j] = cam->K[3 * i] * cam->R[j] +
                           cam->K[3 * i + 1] * cam->R[3 + j] +
                           cam->K[3 * i + 2] * cam->R[6 + j];
        }
        P[4 * i + 3] = ap_dot3(cam->K + 3 * i, cam->t);
        depth[i] = cam->R[6 + i];
    }
    depth[3] = cam->t[2];
}

/* A refractive camera's interface frame, from its folded P and depth:
 * the depth below the surface below[3] - below . x; e1, e2 spanning the
 * surface, the horizontal offset from the foot (e1, e2) . x + (e1[3],
 * e2[3]); the homogeneous pixel A[:, 0] + qx A[:, 1] + qy A[:, 2] and the
 * camera depth Z . (1, qx, qy) of the interface point foot + qx e1 +
 * qy e2. */
static inline AP_HD void
ap_interface_frame(const ap_camera *cam, const double *P,
                   const double *depth, double *below, double *e1,
                   double *e2, double *A, double *Z)
{
    const double *n = cam->normal;
    /* e1: the world axis least aligned with n, made orthogonal to it */
    int k = fabs(n[0]) <= fabs(n[1]) ? (fabs(n[0]) <= fabs(n[2]) ? 0 : 2)
                                     : (fabs(n[1]) <= fabs(n[2]) ? 1 : 2);
    double u[3] = {-n[k] * n[0], -n[k] * n[1], -n[k] * n[2]};
    u[k] += 1.0;
    double len = sqrt(ap_dot3(u, u));
    for (int i = 0; i < 3; i++) {
        u[i] /= len;
    }
    double v[3] = {n[1] * u[2] - n[2] * u[1], n[2] * u[0] - n[0] * u[2],
                   n[0] * u[1] - n[1] * u[0]};
    for (int i = 0; i < 3; i++) {
        below[i] = n[i];
        e1[i] = u[i];
        e2[i] = v[i];
        A[3 * i] = ap_row_apply(P + 4 * i, cam->foot, 1.0);
        A[3 * i + 1] = ap_row_apply(P + 4 * i, u, 0.0);
        A[3 * i + 2] = ap_row_apply(P + 4 * i, v, 0.0);
    }
    below[3] = cam->plane_d;
    e1[3] = -ap_dot3(u, cam->foot);
    e2[3] = -ap_dot3(v, cam->foot);
    Z[0] = ap_row_apply(depth, cam->foot, 1.0);
    Z[1] = ap_row_apply(depth, u, 0.0);
    Z[2] = ap_row_apply(depth, v, 0.0);
}

/* AquaMVS's cast_ray from the unit direction d in air, cos_in its
 * cosine with the level surface's normal: the crossing of the plane
 * whichever way d points, Snell's law in vector form about the normal as
 * given (bend), its cosine's square root clamped at 0, the result made
 * unit. */
static inline AP_HD int
ap_cast_aquamvs(const ap_camera *cam, const double *d, double cos_in,
                double *origin, double *direction)
{
    double s = cam->height / cos_in;
    double eta = cam->n_air / cam->n_water;
    double cos_bend = -ap_dot3(cam->bend, d);
    double k = 1.0 - eta * eta * (1.0 - cos_bend * cos_bend);
    double c = eta * cos_bend - sqrt(k > 0 ? k : 0.0);
    double t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = eta * d[i] + c * cam->bend[i];
    }
    double len = sqrt(ap_dot3(t, t));
    if (!isfinite(s) || !(len > 0) || !isfinite(len)) {
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        origin[i] = cam->center[i] + s * d[i];
        direction[i] = t[i] / len;
    }
    return 1;
}

/* See ap_camera_cast. */
static inline AP_HD int
ap_cast(const ap_camera *cam, double u, double v, double *origin,
        double *direction)
{
    double pix[3] = {u, v, 1.0}, in_cam[3], d[3];
    for (int i = 0; i < 3; i++) {
        in_cam[i] = ap_dot3(&cam->Kinv[3 * i], pix);
    }
    for (int i = 0; i < 3; i++) {  /* R^T in_cam */
        d[i] = cam->R[i] * in_cam[0] + cam->R[3 + i] * in_cam[1] +
               cam->R[6 + i] * in_cam[2];
    }
    double len = sqrt(ap_dot3(d, d));
    if (!(len > 0) || !isfinite(len)) {
        return 0;   /* u or v not finite */
    }
    for (int i = 0; i < 3; i++) {
        d[i] /= len;
    }
    if (!cam->refractive) {
        for (int i = 0; i < 3; i++) {
            origin[i] = cam->center[i];
            direction[i] = d[i];
        }
        return 1;
    }
    double cos_in = -ap_dot3(cam->normal, d);  /* > 0 when going down */
    if (cam->aquamvs_cast) {
        return ap_cast_aquamvs(cam, d, cos_in, origin, direction);
    }
    if (!(cos_in > 0)) {
        return 0;
    }
    double s = cam->height / cos_in;
    /* Snell in vector form: t = eta d + (eta cos_i - cos_t) n */
    double eta = cam->n_air / cam->n_water;
    double k = 1.0 - eta * eta * (1.0 - cos_in * cos_in);
    if (!(k > 0)) {
        /* past the critical angle (n_water < n_air): the surface
         * reflects the ray whole, none of it enters the water */
        return 0;
    }
    double c = eta * cos_in - sqrt(k);
    for (int i = 0; i < 3; i++) {
        origin[i] = cam->center[i] + s * d[i];
        direction[i] = eta * d[i] + c * cam->normal[i];
    }
    return 1;
}

static inline AP_HD int
ap_pinhole(const ap_camera *cam, const double *x, double *u, double *v)
{
    double xc[3];
    for (int i = 0; i < 3; i++) {
        xc[i] = ap_dot3(&cam->R[3 * i], x) + cam->t[i];
    }
    if (!(xc[2] > 0)) {
        return 0;
    }
    double p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = ap_dot3(&cam->K[3 * i], xc);
    }
    *u = p[0] / p[2];
    *v = p[1] / p[2];
    return isfinite(*u) && isfinite(*v);
}

/* The crossing's horizontal distance from the camera's foot, for a
 * point dist away at depth below the surface: AP_NEWTON_COLD steps from
 * the straight line (see ap_camera_project). */
static inline AP_HD double
ap_crossing_cold(double dist, double depth, double hc, double na,
                 double nw)
{
    double r = dist * hc / (hc + depth);
    for (int k = 0; k < AP_NEWTON_COLD; k++) {
        r = ap_snell_step(r, dist, depth, hc, na, nw);
    }
    return r;
}

/* The same crossing for a GPU thread, which has no table of guesses:
 * from the paraxial one, AP_NEWTON_FLOAT float steps then two double
 * steps of the share form, which takes no square root: a fifth of the
 * cold steps' double work. The float steps take lengths over the
 * largest of the three, since their products grow as a length to the
 * sixth and would leave float's range for lengths in microns or
 * kilometres. 1 with *r where the last step settled, 0 where it did not
 * (grazing rays, where Newton starts far off). */
static inline AP_HD int
ap_crossing_float_first(double dist, double depth, double hc, double na,
                        double nw, double *r)
{
    if (dist == 0) {
        *r = 0.0;       /* straight below the camera */
        return 1;
    }
    if (!(dist > 0)) {
        return 0;
    }
    double unit = dist > depth ? dist : depth;
    double inv = 1.0 / (unit > hc ? unit : hc);    /* one double division */
    float fd = (float)(dist * inv), fdepth = (float)(depth * inv);
    float fhc = (float)(hc * inv), fna = (float)na, fnw = (float)nw;
    float guess = fd * (fnw * fhc / (fnw * fhc + fna * fdepth));
    for (int k = 0; k < AP_NEWTON_FLOAT; k++) {
        guess = ap_snell_step_float(guess, fd, fdepth, fhc, fna, fnw);
    }
    double t = guess / fd, before = t;
    for (int k = 0; k < 2; k++) {
        before = t;
        t = ap_snell_step_share(t, dist * dist, depth, hc, na, nw);
    }
    *r = t * dist;
    return fabs(t - before) <= AP_SHARE_SETTLED;   /* 0 for NaN */
}

/* The GPU's crossing: float first, the cold steps where that did not
 * settle, so that every crossing is the converged one. */
static inline AP_HD double
ap_crossing_fast(double dist, double depth, double hc, double na,
                 double nw)
{
    double r;
    return ap_crossing_float_first(dist, depth, hc, na, nw, &r)
        ? r : ap_crossing_cold(dist, depth, hc, na, nw);
}

/* The crossing from a guess of its share t of the way (the crossing of
 * the plane before, for a GPU thread that walks one ray through the
 * planes): share steps in double until one moves less than
 * AP_SHARE_SETTLED, at most AP_SHARE_WALK of them. 1 with *t where they
 * settled, 0 where they did not (a far guess, a grazing ray). */
static inline AP_HD int
ap_crossing_from(double guess, double dist, double depth, double hc,
                 double na, double nw, double *t)
{
    double d2 = dist * dist, s = guess;
    for (int k = 0; k < AP_SHARE_WALK; k++) {
        double next = ap_snell_step_share(s, d2, depth, hc, na, nw);
        double moved = fabs(next - s);
        s = next;
        if (moved <= AP_SHARE_SETTLED) {
            *t = s;
            return 1;
        }
    }
    return 0;       /* NaN too */
}

/* A GPU thread's walk along one ray through the planes, for one source
 * camera: the shares of the crossings of the two planes before
 * (negative: none). */
typedef struct {
    double last, before;
} ap_walk;

/* A walk with no crossing behind it yet. */
static inline AP_HD ap_walk
ap_walk_none(void)
{
    ap_walk walk = {-1.0, -1.0};
    return walk;
}

/* The walking thread's crossing: from the line through the two planes
 * before's shares (or the one before's), else ap_crossing_fast; the walk
 * moves on a plane. Consecutive planes' crossings lie close, so the walk
 * takes two or three double steps where ap_crossing_fast takes
 * AP_NEWTON_FLOAT float steps and two double ones, with the same
 * settling test. */
static inline AP_HD double
ap_crossing_walk(double dist, double depth, double hc, double na,
                 double nw, ap_walk *walk)
{
    double t = walk->last, r;
    if (walk->before >= 0) {
        t += t - walk->before;
        t = t < 0 ? 0 : (t > 1 ? 1 : t);
    }
    if (dist > 0 && walk->last >= 0 &&
        ap_crossing_from(t, dist, depth, hc, na, nw, &t)) {
        r = t * dist;
    } else {
        r = ap_crossing_fast(dist, depth, hc, na, nw);
        t = dist > 0 ? r / dist : -1.0;
    }
    walk->before = t >= 0 ? walk->last : -1.0;
    walk->last = t;
    return r;
}

/* x through the camera, a refractive one's crossing found by the walk
 * (not NULL), the fast or the cold steps. */
static inline AP_HD int
ap_project_with(const ap_camera *cam, const double *x, double *u,
                double *v, int fast, ap_walk *walk)
{
    if (!cam->refractive) {
        return ap_pinhole(cam, x, u, v);
    }
    double depth = cam->plane_d - ap_dot3(cam->normal, x);  /* below */
    if (!(depth > 0)) {
        return 0;
    }
    /* horizontal offset of x from the camera's foot, in the interface */
    double h[3];
    for (int i = 0; i < 3; i++) {
        h[i] = x[i] + depth * cam->normal[i] - cam->foot[i];
    }
    double dist = sqrt(ap_dot3(h, h));
    double r = walk
        ? ap_crossing_walk(dist, depth, cam->height, cam->n_air,
                           cam->n_water, walk)
        : fast
        ? ap_crossing_fast(dist, depth, cam->height, cam->n_air, cam->n_water)
        : ap_crossing_cold(dist, depth, cam->height, cam->n_air,
                           cam->n_water);
    double p[3];
    double scale = dist > 0 ? r / dist : 0.0;
    for (int i = 0; i < 3; i++) {
        p[i] = cam->foot[i] + scale * h[i];
    }
    return ap_pinhole(cam, p, u, v);
}

/* See ap_camera_project: the cold steps. */
static inline AP_HD int
ap_project(const ap_camera *cam, const double *x, double *u, double *v)
{
    return ap_project_with(cam, x, u, v, 0, NULL);
}

/* The same projection through ap_crossing_fast: the GPU kernels'. */
static inline AP_HD int
ap_project_fast(const ap_camera *cam, const double *x, double *u,
                double *v)
{
    return ap_project_with(cam, x, u, v, 1, NULL);
}

#endif
