/* The GPU's refracted crossings against the cold double steps, compiled
 * for the host: the CUDA kernels include the same header, so a wrong fast
 * path fails here on a machine without a GPU.
 * - ap_crossing_fast (float steps, then double ones, the cold steps where
 *   those have not settled): rays under 60 degrees must settle without
 *   the cold steps, in lengths of microns, metres or kilometres alike: a
 *   warp of GPU threads where one does not pays for them all.
 * - ap_crossing_walk (a thread walking a ray through the depth planes,
 *   each crossing from the two planes before's): under 60 degrees all
 *   but one plane in 1000 after the second must settle from them.
 * Exits 1 saying what failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "../../../csrc/mvs/geometry/camera_math.h"
#include "random_cases.h"

static int
fast_against_cold(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    double worst = 0.0, worst_case[5] = {0};
    int failures = 0, cold_under_60 = 0, cold_steps = 0;
    static const double units[3] = {1.0, 1e-6, 1e6};
    for (int i = 0; i < 2000000; i++) {
        double unit = units[i % 3];
        double hc = unit * uniform(&seed, 0.01, 5.0);
        double depth = unit * pow(10.0, uniform(&seed, -3.0, 2.0));
        double na = uniform(&seed, 1.0, 1.1);
        double nw = uniform(&seed, 1.2, 1.6);
        /* up to grazing: 89 degrees in air */
        double air = uniform(&seed, 0.0, 89.0) * M_PI / 180.0;
        double water = asin(na * sin(air) / nw);
        double dist = hc * tan(air) + depth * tan(water);
        if (i % 1000 == 0) {
            dist = 0.0;          /* straight below the camera */
        }
        double fast = ap_crossing_fast(dist, depth, hc, na, nw), settled;
        if (!ap_crossing_float_first(dist, depth, hc, na, nw, &settled)) {
            cold_steps++;
            cold_under_60 += dist > 0 && air < M_PI / 3;
        }
        double cold = ap_crossing_cold(dist, depth, hc, na, nw);
        double off = fabs(fast - cold) / (dist > 0 ? dist : 1.0);
        if (!(off <= 1e-11)) {
            failures++;
        }
        if (!(off <= worst)) {
            worst = off;
            worst_case[0] = dist, worst_case[1] = depth, worst_case[2] = hc;
            worst_case[3] = na, worst_case[4] = nw;
        }
    }
    printf("crossing: fast against cold, worst %.3g of the distance "
           "(dist %g, depth %g, hc %g, na %g, nw %g); %d of 2000000 took "
           "the cold steps, %d of them under 60 degrees\n", worst,
           worst_case[0], worst_case[1], worst_case[2], worst_case[3],
           worst_case[4], cold_steps, cold_under_60);
    if (failures) {
        printf("crossing: %d cases off by more than 1e-11\n", failures);
        return 1;
    }
    return cold_under_60 ? 1 : 0;
}

/* A point walking down a straight line in the water, as a reference
 * pixel's ray does through the planes, seen from a source camera: its
 * horizontal offset from the camera's foot and its depth both move
 * linearly, by up to 2 % of the camera's height a plane. */
static int
walk_against_cold(void)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
    enum { RAYS = 20000, PLANES = 128 };
    int failures = 0, walked = 0, fell_back = 0;
    double worst = 0.0;
    for (int i = 0; i < RAYS; i++) {
        double hc = uniform(&seed, 0.05, 5.0);
        double na = uniform(&seed, 1.0, 1.1);
        double nw = uniform(&seed, 1.2, 1.6);
        double hx = hc * uniform(&seed, -2.0, 2.0);
        double hy = hc * uniform(&seed, -2.0, 2.0);
        double dx = hc * uniform(&seed, -0.02, 0.02);
        double dy = hc * uniform(&seed, -0.02, 0.02);
        double depth0 = hc * uniform(&seed, 0.01, 1.0);
        double step = hc * uniform(&seed, 0.001, 0.02);
        ap_walk walk = ap_walk_none();
        for (int k = 0; k < PLANES; k++) {
            double px = hx + k * dx, py = hy + k * dy;
            double dist = sqrt(px * px + py * py), depth = depth0 + k * step;
            ap_walk before = walk;
            double t, guess = 2 * before.last - before.before;
            double walked_r = ap_crossing_walk(dist, depth, hc, na, nw,
                                               &walk);
            double cold = ap_crossing_cold(dist, depth, hc, na, nw);
            double off = fabs(walked_r - cold) / (dist > 0 ? dist : 1.0);
            failures += !(off <= 1e-11);
            worst = off > worst ? off : worst;
            if (k > 1 && dist > 0 && atan(cold / hc) < M_PI / 3) {
                walked++;
                guess = guess < 0 ? 0 : (guess > 1 ? 1 : guess);
                fell_back += !ap_crossing_from(guess, dist, depth, hc, na,
                                               nw, &t);
            }
        }
    }
    printf("crossing: walk against cold over %d rays of %d planes, worst "
           "%.3g of the distance; %d of %d planes under 60 degrees after "
           "the second did not settle from the two before\n", RAYS,
           PLANES, worst, fell_back, walked);
    if (failures) {
        printf("crossing: walk: %d cases off by more than 1e-11\n",
               failures);
    }
    /* those few pay for ap_crossing_fast as well: points just under the
     * surface whose depth doubles in a few planes */
    if (fell_back > walked / 1000) {
        printf("crossing: walk: more than one plane in 1000 did not "
               "settle\n");
    }
    return failures || fell_back > walked / 1000;
}

int
main(void)
{
    int fast = fast_against_cold();
    return walk_against_cold() || fast;
}
