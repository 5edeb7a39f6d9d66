/* The kernel tests' cases: xorshift64*, so that every run draws the same
 * ones; and random rigs of cameras drawn from them. */
#ifndef AP_TEST_RANDOM_CASES_H
#define AP_TEST_RANDOM_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../../csrc/mvs/geometry/camera.h"
#include "../../../csrc/mvs/geometry/camera_math.h"
#include "../../../csrc/mvs/cuda/gpu_sample.h"

/* A double in [lo, hi), advancing the state *s. */
static inline double
uniform(uint64_t *s, double lo, double hi)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    double unit = (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-53;
    return lo + (hi - lo) * unit;
}

/* A rotation by angles about x, y and z (radians). */
static inline void
rotation(double ax, double ay, double az, double *R)
{
    double cx = cos(ax), sx = sin(ax), cy = cos(ay), sy = sin(ay);
    double cz = cos(az), sz = sin(az);
    double m[9] = {cy * cz, sx * sy * cz - cx * sz, cx * sy * cz + sx * sz,
                   cy * sz, sx * sy * sz + cx * cz, cx * sy * sz - sx * cz,
                   -sy, sx * cy, cx * cy};
    memcpy(R, m, sizeof(m));
}

/* What a test's rigs draw from: focal lengths in [0.8, focal_max) image
 * widths, tilts about x and y in [-tilt, tilt), turns about z (the
 * optical axis) in [-yaw, yaw) radians. */
typedef struct {
    double focal_max, tilt, yaw;
} rig_ranges;

/* Packed parameters (camera.h) of a random camera centred at c looking
 * down (+z), over water at water_z where refractive (n_water in
 * [1.33, 1.34)). */
static inline void
random_camera(uint64_t *seed, const rig_ranges *range, int w, int h,
              const double *c, int refractive, double water_z, double *p)
{
    double f = uniform(seed, 0.8, range->focal_max) * w;
    double K[9] = {f, 0, (w - 1) / 2.0, 0, f, (h - 1) / 2.0, 0, 0, 1};
    double R[9];
    rotation(uniform(seed, -range->tilt, range->tilt),
             uniform(seed, -range->tilt, range->tilt),
             uniform(seed, -range->yaw, range->yaw), R);
    memcpy(p, K, sizeof(K));
    memcpy(p + 9, R, sizeof(R));
    for (int i = 0; i < 3; i++) {    /* t = -R c */
        p[18 + i] = -ap_dot3(R + 3 * i, c);
    }
    p[21] = refractive;
    p[22] = water_z;
    p[23] = 0.0;
    p[24] = 0.0;
    p[25] = -1.0;
    p[26] = 1.0;
    p[27] = uniform(seed, 1.33, 1.34);
}

/* A texture of blobs a few pixels wide: what the sources see of the
 * plane, band-limited as a camera's image is. */
static inline void
texture(uint64_t *seed, float *img, int h, int w)
{
    double fx[6], fy[6], ph[6];
    for (int k = 0; k < 6; k++) {
        fx[k] = uniform(seed, 0.1, 0.9);
        fy[k] = uniform(seed, 0.1, 0.9);
        ph[k] = uniform(seed, 0.0, 6.3);
    }
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double v = 0.0;
            for (int k = 0; k < 6; k++) {
                v += sin(fx[k] * x + fy[k] * y + ph[k]);
            }
            img[(size_t)y * w + x] = (float)(0.5 + v / 12.0);
        }
    }
}

/* The cost kernels' rigs (random_rig): cameras a little tilted and
 * turned, looking down at a textured plane below the water. */
static const rig_ranges COST_RIG = {1.6, 0.1, 0.2};

/* A reference camera over the origin and `views` source cameras near it
 * (w x h images), refractive or pinhole, over water at *water_z (drawn
 * here). 0, or 1 saying which camera was refused. */
static inline int
random_rig(uint64_t *seed, int refractive, int w, int h, int views,
           double *water_z, ap_camera *ref_cam, ap_camera *cams)
{
    double params[28], centre[3] = {0.0, 0.0, 0.0};
    *water_z = uniform(seed, 0.05, 0.5);
    random_camera(seed, &COST_RIG, w, h, centre, refractive, *water_z,
                  params);
    if (ap_camera_init(ref_cam, params)) {
        puts("FAIL: a reference camera was refused");
        return 1;
    }
    for (int v = 0; v < views; v++) {
        double c[3] = {uniform(seed, -0.15, 0.15),
                       uniform(seed, -0.15, 0.15),
                       uniform(seed, -0.03, 0.03)};
        random_camera(seed, &COST_RIG, w, h, c, refractive, *water_z,
                      params);
        if (ap_camera_init(&cams[v], params)) {
            puts("FAIL: a source camera was refused");
            return 1;
        }
    }
    return 0;
}

/* A rig's scene (w x h): each reference pixel's ray as ap_rays_kernel
 * makes them (gpu_sample.h), textures of the reference and of `views`
 * sources, and d depths of the plane below the water. */
static inline void
rig_scene(uint64_t *seed, const ap_camera *ref_cam, int w, int h, int views,
          double water_z, int d, double *rays, float *ref, float *srcs,
          double *depths)
{
    for (int i = 0; i < w * h; i++) {
        double o[3], dir[3];
        if (!ap_cast(ref_cam, i % w, i / w, o, dir)) {
            o[0] = o[1] = o[2] = dir[0] = dir[1] = dir[2] = NAN;
        }
        ap_ray_write(rays, i, o, dir);
    }
    texture(seed, ref, h, w);
    for (int v = 0; v < views; v++) {
        texture(seed, srcs + (size_t)v * w * h, h, w);
    }
    for (int j = 0; j < d; j++) {
        depths[j] = water_z + 0.3 + 0.15 * j + uniform(seed, 0.0, 0.1);
    }
}

#endif
