/* ns per projected sample: a refracted projection solved cold (the
 * per-point API, AP_NEWTON_COLD Newton steps), the sweep's path (its
 * guess, one step, vectorised, bilinear sample included), and a pinhole
 * through the sweep's path. The refracted projection dominates the plane
 * sweep's CPU time; this isolates it.
 *   make bench-projection */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../csrc/mvs/geometry/camera.h"
#include "../../csrc/mvs/geometry/projector.h"

#define N 640
#define ROWS 2000

static double
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* rays of a row of a camera looking down through the water: origin on
 * the surface (z = 0.2), direction fanning out in x */
static void
make_rays(double *planes)
{
    for (int i = 0; i < N; i++) {
        double dx = (i - N / 2) / 900.0, len = sqrt(dx * dx + 1.0);
        planes[i] = 0.2 * dx;
        planes[N + i] = 0.05;
        planes[2 * N + i] = 0.2;
        planes[3 * N + i] = dx / len;
        planes[4 * N + i] = 0.0;
        planes[5 * N + i] = 1.0 / len;
    }
}

static double
time_cold(const ap_camera *cam, const double *planes, double *checksum)
{
    double t = now();
    for (int row = 0; row < ROWS; row++) {
        double depth = 0.8 + 0.4 * row / ROWS;
        for (int i = 0; i < N; i++) {
            double x[3], u, v;
            for (int k = 0; k < 3; k++) {
                x[k] = planes[k * N + i] + depth * planes[(3 + k) * N + i];
            }
            ap_camera_project(cam, x, &u, &v);
            *checksum += u + v;
        }
    }
    return (now() - t) / ((double)N * ROWS) * 1e9;
}

static double
time_sweep_path(const ap_camera *cam, const double *planes, const float *img,
                double *checksum, int *poly)
{
    ap_projector p;
    ap_projector_init(&p, cam);
    const double *ray[6];
    for (int k = 0; k < 6; k++) {
        ray[k] = planes + k * N;
    }
    double box[1][3] = {{0.0, INFINITY, 0.0}};
    if (cam->refractive) {
        ap_projectors_extent(&p, 1, ray, N, 0.8, box);
        ap_projectors_extent(&p, 1, ray, N, 1.2, box);
        if (ap_projector_tabulate(&p, box[0][0], box[0][1], box[0][2]) < 0) {
            return NAN;
        }
    }
    float out[N];
    double t = now();
    for (int row = 0; row < ROWS; row++) {
        float *rows[1] = {out};
        ap_project_sample(&p, 1, ray, N, 0.8 + 0.4 * row / ROWS, img, 480, N,
                          rows);
        *checksum += out[row % N] == out[row % N] ? out[row % N] : 0.0;
    }
    t = (now() - t) / ((double)N * ROWS) * 1e9;
    *poly = p.terms > 0;
    ap_projector_free(&p);
    return t;
}

int
main(void)
{
    /* K, R, t, refractive, water_z, normal, n_air, n_water */
    double p[AP_CAMERA_PARAMS] = {600, 0, 320, 0, 600, 240, 0, 0, 1,
                                  1, 0, 0, 0, 1, 0, 0, 0, 1,
                                  -0.02, 0, 0, 1, 0.2, 0, 0, -1, 1.0, 1.333};
    double planes[6 * N], checksum = 0.0;
    float *img = malloc(480 * N * sizeof(float));
    ap_camera cam;
    if (img == NULL || ap_camera_init(&cam, p) != 0) {
        return 1;
    }
    for (int i = 0; i < 480 * N; i++) {
        img[i] = (float)(0.5 + 0.4 * sin(i * 0.37));
    }
    make_rays(planes);
    double cold = time_cold(&cam, planes, &checksum);
    int poly;
    double guessed = time_sweep_path(&cam, planes, img, &checksum, &poly);
    p[21] = 0.0;  /* pinhole */
    ap_camera_init(&cam, p);
    int unused;
    double pinhole = time_sweep_path(&cam, planes, img, &checksum, &unused);
    printf("refractive, cold (%d Newton steps):              %6.1f ns\n",
           AP_NEWTON_COLD, cold);
    printf("refractive, sweep path (%s guess + %d step, sample): "
           "%6.1f ns\n", poly ? "polynomial" : "table", AP_NEWTON_TABLE,
           guessed);
    printf("pinhole, sweep path (sample):                    %6.1f ns\n",
           pinhole);
    printf("(checksum %g)\n", checksum);
    free(img);
    return 0;
}
