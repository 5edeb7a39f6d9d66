/* The GPU's refracted crossing (ap_crossing_fast: float steps, then
 * double ones, the cold steps where those have not settled) against the
 * cold double steps, compiled for the host: the CUDA kernels include the
 * same header, so a wrong fast path fails here on a machine without a
 * GPU. Rays under 60 degrees must settle without the cold steps, in
 * lengths of microns, metres or kilometres alike: a warp of GPU threads
 * where one does not pays for them all. Exits 1 saying what failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "camera_math.h"
#include "random_cases.h"

int
main(void)
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
