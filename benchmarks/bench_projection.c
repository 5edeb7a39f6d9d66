/* ns per projection of a world point: refractive (cold Newton start,
 * warm start from a neighbour's solution) and pinhole. The refracted
 * projection dominates the plane sweep's CPU time; this isolates it.
 *   make bench-projection */
#include <stdio.h>
#include <time.h>

#include "../csrc/kernels/camera.h"

static double
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* 2M points along a row 1.1 m down; guess < 0 restarts cold each time */
static double
time_projections(const ap_camera *cam, int cold, double *checksum)
{
    const int n = 2000000;
    double guess = -1.0, t = now();
    for (int i = 0; i < n; i++) {
        double x[3] = {-0.1 + 0.2 * i / n, 0.05, 1.1}, u, v;
        if (cold) {
            guess = -1.0;
        }
        ap_camera_project(cam, x, &u, &v, cam->refractive ? &guess : NULL);
        *checksum += u + v;
    }
    return (now() - t) / n * 1e9;
}

int
main(void)
{
    /* K, R, t, refractive, water_z, normal, n_air, n_water */
    double p[AP_CAMERA_PARAMS] = {600, 0, 320, 0, 600, 240, 0, 0, 1,
                                  1, 0, 0, 0, 1, 0, 0, 0, 1,
                                  -0.02, 0, 0, 1, 0.2, 0, 0, -1, 1.0, 1.333};
    ap_camera cam;
    double checksum = 0.0;
    if (ap_camera_init(&cam, p) != 0) {
        return 1;
    }
    double cold = time_projections(&cam, 1, &checksum);
    double warm = time_projections(&cam, 0, &checksum);
    p[21] = 0.0;  /* pinhole */
    ap_camera_init(&cam, p);
    double pinhole = time_projections(&cam, 0, &checksum);
    printf("refractive, cold (%d Newton steps): %6.1f ns\n", AP_NEWTON_COLD,
           cold);
    printf("refractive, warm (%d Newton steps): %6.1f ns\n", AP_NEWTON_WARM,
           warm);
    printf("pinhole:                          %6.1f ns\n", pinhole);
    printf("(checksum %g)\n", checksum);
    return 0;
}
