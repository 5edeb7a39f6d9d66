/* A source camera's projection as the GPU cost kernel computes it, in
 * float64 and without a square root or an IEEE division on its path: the
 * pinhole folded into one 3x4 matrix and the interface frame, as the
 * CPU's projector prepares them (../geometry/projector.c), Snell's law
 * in its share form (ap_snell_step_share's g, which needs the squared
 * horizontal distance alone), and one reciprocal for u and v. Shared with
 * the host so that tests/mvs/kernels/test_gpu_sample.c holds it against
 * the CPU path where there is no GPU. */
#ifndef AP_GPU_SAMPLE_H
#define AP_GPU_SAMPLE_H

#include <math.h>
#include <stddef.h>

#include "../geometry/camera.h"
#include "../geometry/camera_math.h"
#include "../geometry/host_device.h"

/* Share steps from the paraxial guess: six settle every ray under 60
 * degrees from the vertical in air (n_air 1 to 1.1, n_water 1.2 to 1.6,
 * points 1e-3 to 100 camera heights deep), in microns, metres or
 * kilometres alike, where five leave 24 in a million unsettled
 * (tests/mvs/kernels/test_gpu_sample.c); the last must move the share by at
 * most AP_SHARE_SETTLED, else the crossing is found as ap_crossing_fast
 * finds it. A fixed count, so that a warp's threads step together. */
#define AP_GPU_SHARE_STEPS 6
/* Share steps of a walk down a column from the line through the two
 * rows above's shares: two settle every crossing of rigs at full size
 * (tests/mvs/kernels/test_gpu_sample.c), where from the row above's alone
 * one in seven takes a third. */
#define AP_GPU_WALK_STEPS 2
/* The walk's settling test, AP_SHARE_SETTLED's rounded down to a power
 * of two: a constant the GPU's compare takes as it is, where 1e-9 takes
 * two instructions to make. */
#define AP_GPU_WALK_SETTLED 0x1p-30

/* The GPU's ray table (ap_rays_kernel): each reference pixel's ray as
 * six doubles side by side, origin then unit direction (NaN origin
 * where the pixel has no ray), which a thread reads in three 16-byte
 * loads. */
#define AP_RAY_DOUBLES 6

static inline AP_HD void
ap_ray_write(double *rays, size_t i, const double *o, const double *d)
{
    for (int k = 0; k < 3; k++) {
        rays[AP_RAY_DOUBLES * i + k] = o[k];
        rays[AP_RAY_DOUBLES * i + 3 + k] = d[k];
    }
}

static inline AP_HD void
ap_ray_read(const double *rays, size_t i, double *o, double *d)
{
#ifdef __CUDA_ARCH__
    const double2 *at = (const double2 *)(rays + AP_RAY_DOUBLES * i);
    double2 a = at[0], b = at[1], c = at[2];
    o[0] = a.x;
    o[1] = a.y;
    o[2] = b.x;
    d[0] = b.y;
    d[1] = c.x;
    d[2] = c.y;
#else
    for (int k = 0; k < 3; k++) {
        o[k] = rays[AP_RAY_DOUBLES * i + k];
        d[k] = rays[AP_RAY_DOUBLES * i + 3 + k];
    }
#endif
}

/* The point of pixel i's ray at depth along it (NaN where none). */
static inline AP_HD void
ap_ray_point(const double *rays, size_t i, double depth, double *x)
{
    double o[3], d[3];
    ap_ray_read(rays, i, o, d);
    for (int k = 0; k < 3; k++) {
        x[k] = o[k] + depth * d[k];
    }
}

/* A camera prepared for projecting, as ap_projector holds it: a pinhole's
 * homogeneous pixel P [x; 1] and camera depth depth . [x; 1]; a
 * refractive camera's depth below the surface below[3] - below . x, its
 * horizontal offset (e1, e2) . x + (e1[3], e2[3]) from the foot, and the
 * homogeneous pixel A[:, 0] + qx A[:, 1] + qy A[:, 2] and camera depth
 * Z . (1, qx, qy) of the interface point foot + qx e1 + qy e2; and Snell's
 * law squared's constants: k2 = na^2 - nw^2, a2 = na^2, b = (nw hc)^2. */
typedef struct {
    int refractive;
    double P[12], depth[4];
    double below[4], e1[4], e2[4], A[9], Z[3];
    double hc, na, nw, k2, a2, b;
} ap_gpu_frame;

/* cam's frame, made as the CPU's projector makes it (once a block: its
 * cost is not the sample's) */
static inline AP_HD void
ap_gpu_frame_init(ap_gpu_frame *f, const ap_camera *cam)
{
    ap_camera_fold(cam, f->P, f->depth);
    f->refractive = cam->refractive;
    if (!cam->refractive) {
        return;
    }
    ap_interface_frame(cam, f->P, f->depth, f->below, f->e1, f->e2, f->A,
                       f->Z);
    f->hc = cam->height;
    f->na = cam->n_air;
    f->nw = cam->n_water;
    f->k2 = cam->n_air * cam->n_air - cam->n_water * cam->n_water;
    f->a2 = cam->n_air * cam->n_air;
    f->b = cam->n_water * cam->n_water * cam->height * cam->height;
}

/* 1 / x within about 2^-20: the GPU's float64 reciprocal estimate (one
 * MUFU on the upper word, the lower word zero), which takes no trip
 * through float and so no float range. The host's stands in for it with
 * an error of 2^-18, larger than the device's, so that the tests see the
 * worse seed. */
static inline AP_HD double
ap_gpu_rcp_seed(double x)
{
#ifdef __CUDA_ARCH__
    double y;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(x));
    return y;
#else
    return (1.0 / x) * (1.0 + 0x1p-18);
#endif
}

/* 1 / x within about 2^-40: the seed refined by one Newton step (two
 * fused multiply-adds) */
static inline AP_HD double
ap_gpu_rcp(double x)
{
    double y = ap_gpu_rcp_seed(x);
    return fma(y, fma(-x, y, 1.0), y);
}

/* One Newton step on Snell's law squared (ap_snell_step_share), with
 * k = (na^2 - nw^2) d2, a = na^2 z^2, b = (nw hc)^2, dividing by the
 * seed's reciprocal, which slows no step: the error after one is the
 * square of the one before plus the seed's error (2^-20) of it. g has
 * one root in [0, 1], strictly inside (g(0) = -b < 0 < a = g(1)). */
static inline AP_HD double
ap_gpu_share_newton(double k, double a, double b, double share)
{
    double s = 1.0 - share;
    double g = share * share * (k * s * s + a) - b * s * s;
    double dg = 2.0 * (k * share * s * (s - share) + a * share + b * s);
    return share - g * ap_gpu_rcp_seed(dg);
}

/* The step kept in [0, 1]: at 0 and at 1 the step moves inside, so a
 * step that does not move has found the root. */
static inline AP_HD double
ap_gpu_share_step(double k, double a, double b, double share)
{
    share = ap_gpu_share_newton(k, a, b, share);
    return share < 0 ? 0 : (share > 1 ? 1 : share);
}

/* The share t of the way from the foot to a point at squared horizontal
 * distance d2 and depth z below the surface where its ray crosses the
 * interface: AP_GPU_SHARE_STEPS share steps from the paraxial guess. 1
 * where the last step moved t by at most AP_SHARE_SETTLED (0 for NaN). */
static inline AP_HD int
ap_gpu_share(const ap_gpu_frame *f, double d2, double z, double *t)
{
    double k = f->k2 * d2, a = f->a2 * z * z, b = f->b;
    double nh = f->nw * f->hc;
    double share = nh * ap_gpu_rcp(nh + f->na * z), before = share;
    for (int i = 0; i < AP_GPU_SHARE_STEPS; i++) {
        before = share;
        share = ap_gpu_share_step(k, a, b, share);
    }
    *t = share;
    return fabs(share - before) <= AP_SHARE_SETTLED;
}

/* The crossing where the share steps did not settle (grazing rays):
 * ap_crossing_fast's, as a share. Out of line, off the warp's path. */
static inline AP_HD double
ap_gpu_share_slow(const ap_gpu_frame *f, double d2, double z)
{
    double dist = sqrt(d2);
    return dist > 0 ? ap_crossing_fast(dist, z, f->hc, f->na, f->nw) / dist
                    : 0.0;
}

/* The share with no guess: the share steps, else the slow crossing. */
static inline AP_HD double
ap_gpu_share_cold(const ap_gpu_frame *f, double d2, double z)
{
    double t;
    return ap_gpu_share(f, d2, z, &t) ? t : ap_gpu_share_slow(f, d2, z);
}

/* The same share for a thread that walks down a column of the
 * reference, from the line through the two rows above's (walk):
 * crossings a pixel apart lie so close that AP_GPU_WALK_STEPS share
 * steps settle (tests/mvs/kernels/test_gpu_sample.c). The steps are not kept
 * in [0, 1]: a share that settles inside it is g's one root there, and
 * one that does not (a far guess, or none: a walk starts at -1, from
 * where no step settles inside) takes the cold steps. 1 with *t where
 * the last step moved t by at most AP_GPU_WALK_SETTLED and t is in
 * (0, 1), else 0. */
static inline AP_HD int
ap_gpu_share_walk(const ap_gpu_frame *f, double d2, double z,
                  const ap_walk *walk, double *t)
{
    double k = f->k2 * d2, a = f->a2 * z * z, b = f->b;
    double share = fma(2.0, walk->last, -walk->before), before = share;
    for (int i = 0; i < AP_GPU_WALK_STEPS; i++) {
        before = share;
        share = ap_gpu_share_newton(k, a, b, share);
    }
    *t = share;
    return (fabs(share - before) <= AP_GPU_WALK_SETTLED) & (share > 0) &
           (share < 1);
}

/* A walk's next row: the line through this row's crossing t and the
 * one above's, or after the first (a walk starts {-1, -1}: no guess), t
 * itself. */
static inline AP_HD void
ap_gpu_walk_on(ap_walk *walk, double t)
{
    walk->before = walk->last >= 0 ? walk->last : t;
    walk->last = t;
}

/* A pinhole camera's homogeneous pixel (hu, hv, hw) and camera depth zc
 * of world point x. */
static inline AP_HD void
ap_gpu_pinhole(const ap_gpu_frame *f, const double *x, double *hu,
               double *hv, double *hw, double *zc)
{
    *hu = ap_row_apply(f->P, x, 1.0);
    *hv = ap_row_apply(f->P + 4, x, 1.0);
    *hw = ap_row_apply(f->P + 8, x, 1.0);
    *zc = ap_row_apply(f->depth, x, 1.0);
}

/* The pixel (u, v) of homogeneous pixel (hu, hv, hw): one reciprocal. */
static inline AP_HD void
ap_gpu_pixel(double hu, double hv, double hw, double *u, double *v)
{
    double inv = ap_gpu_rcp(hw);
    *u = hu * inv;
    *v = hv * inv;
}

/* A refractive camera's crossing of the ray to world point x: the
 * point's depth z below the surface (seen where z > 0), its horizontal
 * offset (hx, hy) from the foot and its square d2, and once found the
 * share t of the way from the foot to it where the ray crosses,
 * `settled` where a walk's steps found it (ap_gpu_share_walk). */
typedef struct {
    double z, hx, hy, d2, t;
    int seen, settled;
} ap_gpu_crossing;

static inline AP_HD ap_gpu_crossing
ap_gpu_cross_at(const ap_gpu_frame *f, const double *x)
{
    ap_gpu_crossing c;
    c.z = f->below[3] - ap_dot3(f->below, x);
    c.hx = ap_row_apply(f->e1, x, 1.0);
    c.hy = ap_row_apply(f->e2, x, 1.0);
    c.d2 = c.hx * c.hx + c.hy * c.hy;
    c.seen = c.z > 0;
    c.t = 0.0;
    c.settled = 0;
    return c;
}

/* The crossing from the walk down a column: computed whether the point
 * is seen or not, without a branch, so that the crossings of a thread's
 * sources, which depend on nothing of each other's, are issued side by
 * side (gpu_strip.h, AP_STRIP_SOURCES). */
static inline AP_HD ap_gpu_crossing
ap_gpu_cross_walk(const ap_gpu_frame *f, const double *x,
                  const ap_walk *walk)
{
    ap_gpu_crossing c = ap_gpu_cross_at(f, x);
    c.settled = ap_gpu_share_walk(f, c.d2, c.z, walk, &c.t);
    return c;
}

/* A seen crossing's share where the walk's steps did not settle: a
 * column's first sample of a strip, and its second, guessed from the
 * first alone, for a warp of which some lane does not settle; rarely a
 * later one. */
static inline AP_HD void
ap_gpu_cross_settle(const ap_gpu_frame *f, ap_gpu_crossing *c)
{
    if (c->seen & !c->settled) {
#ifdef AP_GPU_COUNT_COLD
        extern long ap_gpu_colds;   /* the host's tests: how many */
        ap_gpu_colds++;
#endif
        /* count: share=2 / (AP_STRIP_ROWS + 2 * radius) */
        c->t = ap_gpu_share_cold(f, c->d2, c->z);
    }
}

/* The homogeneous pixel (hu, hv, hw) and camera depth zc of a
 * crossing's interface point, once its share is found. */
static inline AP_HD void
ap_gpu_cross_point(const ap_gpu_frame *f, const ap_gpu_crossing *c,
                   double *hu, double *hv, double *hw, double *zc)
{
    double qx = c->t * c->hx, qy = c->t * c->hy;
    *hu = f->A[0] + qx * f->A[1] + qy * f->A[2];
    *hv = f->A[3] + qx * f->A[4] + qy * f->A[5];
    *hw = f->A[6] + qx * f->A[7] + qy * f->A[8];
    *zc = f->Z[0] + qx * f->Z[1] + qy * f->Z[2];
}

/* The pixel (u, v) of world point x in the camera of f; 0 where x is not
 * seen (behind a pinhole, above a refractive camera's water, or behind
 * it), as the CPU's projector decides. A refractive camera's crossing
 * from the walk down a column where walk is not NULL (which moves on to
 * this row), else from the paraxial guess. */
static inline AP_HD int
ap_gpu_uv_with(const ap_gpu_frame *f, const double *x, double *u,
               double *v, ap_walk *walk)
{
    double hu, hv, hw, zc;
    if (!f->refractive) {
        ap_gpu_pinhole(f, x, &hu, &hv, &hw, &zc);
    } else {
        ap_gpu_crossing c = ap_gpu_cross_at(f, x);
        if (!c.seen) {
            return 0;
        }
        if (walk != NULL) {
            /* ap_gpu_cross_walk's steps, after the test: one thread's
             * point not seen costs no more */
            c.settled = ap_gpu_share_walk(f, c.d2, c.z, walk, &c.t);
            ap_gpu_cross_settle(f, &c);
            ap_gpu_walk_on(walk, c.t);
        } else {
            c.t = ap_gpu_share_cold(f, c.d2, c.z);
        }
        ap_gpu_cross_point(f, &c, &hu, &hv, &hw, &zc);
    }
    ap_gpu_pixel(hu, hv, hw, u, v);
    return zc > 0;
}

static inline AP_HD int
ap_gpu_uv(const ap_gpu_frame *f, const double *x, double *u, double *v)
{
    return ap_gpu_uv_with(f, x, u, v, NULL);
}

#endif
