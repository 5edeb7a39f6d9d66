/* The GPU cost kernel's sample (gpu_sample.h: share steps from the
 * paraxial guess, one refined reciprocal) compiled for the host, against
 * the CPU path: build it with -ffp-contract=fast (and -mfma on x86-64),
 * as nvcc contracts the device code.
 * - the crossing: under 60 degrees from the vertical in air, in microns,
 *   metres or kilometres, the share steps settle (no thread of a warp
 *   takes the slow path) and land within 1e-11 of the distance of
 *   ap_crossing_cold's;
 * - a walk down a column (ap_gpu_share_walk, the strip kernel's): from
 *   the two rows above's crossings, AP_GPU_WALK_STEPS share steps settle
 *   and land within 1e-11 of the distance of the cold crossing; from
 *   guesses near and far, a walk that says it settled has found that
 *   crossing;
 * - the sample: random rigs of refractive and pinhole cameras, every
 *   pixel of the reference at several depths; each source's sample
 *   (ap_gpu_uv, then ap_bilinear) is seen where the CPU's projector
 *   (ap_project_sample) sees it and differs from it by at most 1e-5 on
 *   a texture of white noise in [0, 1], whose samples move by up to one
 *   per pixel: the positions agree within 1e-5 px.
 * Exits 1 saying what failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../../csrc/mvs/cpu/cost_math.h"
#include "../../../csrc/mvs/cuda/gpu_sample.h"
#include "../../../csrc/mvs/geometry/camera_math.h"
#include "../../../csrc/mvs/geometry/projector.h"
#include "random_cases.h"

static int
share_against_cold(void)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
    static const double units[3] = {1.0, 1e-6, 1e6};
    int failures = 0, unsettled = 0;
    double worst = 0.0;
    for (int i = 0; i < 1000000; i++) {
        double unit = units[i % 3];
        ap_gpu_frame f = {0};
        f.hc = unit * uniform(&seed, 0.01, 5.0);
        f.na = uniform(&seed, 1.0, 1.1);
        f.nw = uniform(&seed, 1.2, 1.6);
        f.k2 = f.na * f.na - f.nw * f.nw;
        f.a2 = f.na * f.na;
        f.b = f.nw * f.nw * f.hc * f.hc;
        double z = unit * pow(10.0, uniform(&seed, -3.0, 2.0));
        double air = uniform(&seed, 0.0, 60.0) * M_PI / 180.0;
        double water = asin(f.na * sin(air) / f.nw);
        double dist = i % 1000 == 0 ? 0.0
                                     : f.hc * tan(air) + z * tan(water);
        double t;
        if (!ap_gpu_share(&f, dist * dist, z, &t)) {
            unsettled++;
            t = ap_gpu_share_slow(&f, dist * dist, z);
        }
        double cold = ap_crossing_cold(dist, z, f.hc, f.na, f.nw);
        double off = fabs(t * dist - cold) / (dist > 0 ? dist : 1.0);
        failures += !(off <= 1e-11);
        worst = off > worst ? off : worst;
    }
    printf("gpu sample: share steps against cold, worst %.3g of the "
           "distance; %d of 1000000 under 60 degrees did not settle\n",
           worst, unsettled);
    if (failures || unsettled) {
        printf("FAIL: %d crossings off by more than 1e-11, %d unsettled\n",
               failures, unsettled);
    }
    return failures + unsettled;
}

/* the rigs' cameras (random_camera) */
static const rig_ranges RIG = {2.0, 0.25, 3.2};

#define W 64
#define H 48
#define N (W * H)
#define SOURCES 3
#define DEPTHS 5

/* One rig: the failures of its samples against the CPU's. */
static int
compare_rig(uint64_t *seed, int refractive, double *worst, long *seen)
{
    double water_z = uniform(seed, 0.05, 1.0), params[28];
    double centre[3] = {0.0, 0.0, 0.0};
    ap_camera ref, src[SOURCES];
    ap_projector proj[SOURCES];
    ap_gpu_frame frames[SOURCES];
    random_camera(seed, &RIG, W, H, centre, refractive, water_z, params);
    if (ap_camera_init(&ref, params)) {
        puts("FAIL: a reference camera was refused");
        return 1;
    }
    for (int v = 0; v < SOURCES; v++) {
        double c[3] = {uniform(seed, -0.3, 0.3), uniform(seed, -0.3, 0.3),
                       uniform(seed, -0.05, 0.05)};
        random_camera(seed, &RIG, W, H, c, refractive, water_z, params);
        if (ap_camera_init(&src[v], params)) {
            puts("FAIL: a source camera was refused");
            return 1;
        }
        ap_projector_init(&proj[v], &src[v]);
        ap_gpu_frame_init(&frames[v], &src[v]);
    }
    static double ray[6][N];
    for (int i = 0; i < N; i++) {
        double o[3], d[3];
        if (!ap_cast(&ref, i % W, i / W, o, d)) {
            o[0] = NAN;
        }
        for (int k = 0; k < 3; k++) {
            ray[k][i] = o[k];
            ray[3 + k][i] = d[k];
        }
    }
    const double *rays[6] = {ray[0], ray[1], ray[2], ray[3], ray[4], ray[5]};
    double depths[DEPTHS];
    for (int j = 0; j < DEPTHS; j++) {
        depths[j] = uniform(seed, 0.1, 3.0);
    }
    if (refractive) {
        double box[SOURCES][3];
        for (int v = 0; v < SOURCES; v++) {
            box[v][0] = 0.0;
            box[v][1] = INFINITY;
            box[v][2] = 0.0;
        }
        for (int j = 0; j < DEPTHS; j++) {
            ap_projectors_extent(proj, SOURCES, rays, N, depths[j], box);
        }
        for (int v = 0; v < SOURCES; v++) {
            if (ap_projector_tabulate(&proj[v], box[v][0], box[v][1],
                                      box[v][2]) < 0) {
                puts("FAIL: out of memory");
                exit(1);
            }
        }
    }
    static float img[SOURCES][N], cpu[SOURCES][N];
    for (int v = 0; v < SOURCES; v++) {
        for (int i = 0; i < N; i++) {
            img[v][i] = (float)uniform(seed, 0.0, 1.0);
        }
    }
    int failures = 0;
    for (int j = 0; j < DEPTHS; j++) {
        float *out[SOURCES] = {cpu[0], cpu[1], cpu[2]};
        ap_project_sample(proj, SOURCES, rays, N, depths[j], img[0], H, W,
                          out);
        for (int v = 0; v < SOURCES; v++) {
            for (int i = 0; i < N; i++) {
                double x[3], u, vv;
                for (int k = 0; k < 3; k++) {
                    x[k] = ray[k][i] + depths[j] * ray[3 + k][i];
                }
                int ok = ray[0][i] == ray[0][i] &&
                         ap_gpu_uv(&frames[v], x, &u, &vv);
                float gpu = ok ? ap_bilinear(img[v], H, W, u, vv) : NAN;
                float want = cpu[v][i];
                double off = fabs((double)gpu - want);
                int bad = isnan(gpu) != isnan(want) ||
                          (!isnan(want) && !(off <= 1e-5));
                *seen += !isnan(want);
                if (!isnan(want) && off > *worst) {
                    *worst = off;
                }
                if (bad && failures++ < 3) {
                    printf("FAIL: %s rig, source %d, pixel (%d, %d), depth "
                           "%g: GPU %.9g, CPU %.9g\n",
                           refractive ? "refractive" : "pinhole", v, i % W,
                           i / W, depths[j], gpu, want);
                }
            }
        }
    }
    for (int v = 0; v < SOURCES; v++) {
        ap_projector_free(&proj[v]);
    }
    return failures;
}

static int
samples_against_cpu(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int failures = 0;
    double worst = 0.0;
    long seen = 0;
    for (int rig = 0; rig < 40; rig++) {
        failures += compare_rig(&seed, rig % 4 != 3, &worst, &seen);
    }
    printf("gpu sample: 40 rigs, %ld samples seen, worst %.3g from the "
           "CPU's; %d failures\n", seen, worst, failures);
    if (seen < 40L * SOURCES * DEPTHS * N / 4) {
        puts("FAIL: too few samples seen to tell");
        failures++;
    }
    return failures;
}

/* Walks down columns of a 1600 x 1200 reference at one depth, source
 * and reference refractive over the same water, as the strip kernel
 * walks (ap_gpu_share_walk, the cold steps where it does not settle,
 * ap_gpu_walk_on): from the third row of a column on, each crossing
 * settles in AP_GPU_WALK_STEPS steps from the line through the two rows
 * above's; every settled one lies within 1e-11 of the distance of the
 * cold crossing (ap_gpu_share_cold). The first row has no guess; the
 * second guesses the first's, which may not settle. */
static int
walks_down_columns(void)
{
    enum { WW = 1600, WH = 1200 };
    uint64_t seed = 0x5851f42d4c957f2dull;
    long walked = 0, unsettled = 0, seconds = 0, second = 0;
    int failures = 0;
    double worst = 0.0;
    for (int rig = 0; rig < 20; rig++) {
        double water_z = uniform(&seed, 0.05, 1.0), params[28];
        double centre[3] = {0.0, 0.0, 0.0};
        ap_camera ref, src;
        ap_gpu_frame f;
        random_camera(&seed, &RIG, WW, WH, centre, 1, water_z, params);
        if (ap_camera_init(&ref, params)) {
            puts("FAIL: a reference camera was refused");
            return 1;
        }
        double c[3] = {uniform(&seed, -0.3, 0.3), uniform(&seed, -0.3, 0.3),
                       uniform(&seed, -0.05, 0.05)};
        random_camera(&seed, &RIG, WW, WH, c, 1, water_z, params);
        if (ap_camera_init(&src, params)) {
            puts("FAIL: a source camera was refused");
            return 1;
        }
        ap_gpu_frame_init(&f, &src);
        double depth = water_z + uniform(&seed, 0.1, 3.0);
        for (int x = rig; x < WW; x += 41) {
            ap_walk walk = ap_walk_none();
            int rows = 0;
            for (int y = 0; y < WH; y++) {
                double o[3], d[3], p[3];
                if (!ap_cast(&ref, x, y, o, d)) {
                    continue;
                }
                for (int k = 0; k < 3; k++) {
                    p[k] = o[k] + depth * d[k];
                }
                double z = f.below[3] - ap_dot3(f.below, p);
                double hx = ap_row_apply(f.e1, p, 1.0);
                double hy = ap_row_apply(f.e2, p, 1.0), d2 = hx * hx + hy * hy;
                if (!(z > 0)) {
                    continue;
                }
                double t, cold = ap_gpu_share_cold(&f, d2, z);
                int settled = ap_gpu_share_walk(&f, d2, z, &walk, &t);
                rows++;
                if (rows >= 3) {
                    walked++;
                    unsettled += !settled;
                } else if (rows == 2) {
                    seconds++;
                    second += !settled;
                }
                if (settled) {
                    double off = fabs(t - cold);    /* of the distance */
                    worst = off > worst ? off : worst;
                    if (!(off <= 1e-11) && failures++ < 3) {
                        printf("FAIL: walk at (%d, %d): share %.17g, "
                               "cold %.17g\n", x, y, t, cold);
                    }
                } else {
                    t = cold;
                }
                ap_gpu_walk_on(&walk, t);
            }
        }
    }
    printf("gpu sample: %ld crossings walked down columns from two rows, "
           "worst %.3g of the distance, %ld did not settle; %ld of %ld "
           "second rows did not\n", walked, worst, unsettled, second,
           seconds);
    if (unsettled) {
        printf("FAIL: %ld walks from two rows did not settle in %d steps\n",
               unsettled, AP_GPU_WALK_STEPS);
    }
    return failures + (unsettled > 0);
}

/* Walks from guesses near and far (shares off the crossing by 1e-8 to
 * 100 %, and lines through any two rows' shares in [-1, 2]): a walk
 * that says it settled has found the cold crossing, whatever root its
 * unclamped steps were drawn to. */
static int
walks_from_far_guesses(void)
{
    uint64_t seed = 0x14057b7ef767814full;
    int failures = 0;
    long settled = 0;
    for (int i = 0; i < 1000000; i++) {
        ap_gpu_frame f = {0};
        f.hc = uniform(&seed, 0.01, 5.0);
        f.na = uniform(&seed, 1.0, 1.1);
        f.nw = uniform(&seed, 1.2, 1.6);
        f.k2 = f.na * f.na - f.nw * f.nw;
        f.a2 = f.na * f.na;
        f.b = f.nw * f.nw * f.hc * f.hc;
        double z = pow(10.0, uniform(&seed, -3.0, 2.0));
        double air = uniform(&seed, 0.0, 80.0) * M_PI / 180.0;
        double water = asin(f.na * sin(air) / f.nw);
        double dist = f.hc * tan(air) + z * tan(water);
        double t, cold = ap_gpu_share_cold(&f, dist * dist, z);
        /* half guessing near the crossing, half through any two rows */
        double off = pow(10.0, uniform(&seed, -8.0, 0.0));
        double near = cold * (1.0 + (i % 4 == 1 ? off : -off));
        ap_walk walk = {i % 2 ? near : uniform(&seed, -1.0, 2.0),
                        i % 2 ? near : uniform(&seed, -1.0, 2.0)};
        if (ap_gpu_share_walk(&f, dist * dist, z, &walk, &t)) {
            settled++;
            if (!(fabs(t - cold) <= 1e-11) && failures++ < 3) {
                printf("FAIL: a walk from (%g, %g) settled at %.17g, the "
                       "crossing is at %.17g\n", walk.last, walk.before, t,
                       cold);
            }
        }
    }
    printf("gpu sample: 1000000 walks from guesses near and far, %ld "
           "settled, %d of them off the crossing\n", settled, failures);
    return failures;
}

int
main(void)
{
    int failures = share_against_cold();
    failures += walks_down_columns();
    failures += walks_from_far_guesses();
    failures += samples_against_cpu();
    return failures ? 1 : 0;
}
