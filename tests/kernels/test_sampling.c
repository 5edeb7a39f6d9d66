/* The cost volume samples its sources from copies with their edges
 * repeated (ap_project_sample_edges), without the clamps at the border
 * that ap_project_sample makes: the two must give the same bits
 * everywhere, and above all in the border's slack (within
 * AP_BORDER_SLACK outside the image), on the edge texels themselves, and
 * just outside the slack, where both must say not seen (NaN). Points go
 * through a pinhole camera at the origin with K = I, so that the point
 * (u, v, 1) lands on pixel (u, v) to the bit. Exits 1 saying what
 * failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "camera.h"
#include "cost_math.h"
#include "projector.h"

#define H 7
#define W 9
#define N 4096

static double
uniform(uint64_t *s, double lo, double hi)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    double unit = (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-53;
    return lo + (hi - lo) * unit;
}

/* A coordinate on a line of `size` texels: the places that matter near
 * each edge, else anywhere from a pixel before it to a pixel after. */
static double
coordinate(uint64_t *s, int size)
{
    double last = size - 1, e = AP_BORDER_SLACK;
    const double near[] = {0.0, last, -e, last + e, -e / 2, last + e / 2,
                           -nextafter(e, 1.0), last + nextafter(e, 1.0),
                           -1e-300, nextafter(last, 0.0),
                           nextafter(last, 2 * last), 0.5, last - 0.5};
    int pick = (int)uniform(s, 0.0, 2.0 * sizeof(near) / sizeof(near[0]));
    if (pick < (int)(sizeof(near) / sizeof(near[0]))) {
        return near[pick];
    }
    return uniform(s, -1.0, size);
}

int
main(void)
{
    double params[AP_CAMERA_PARAMS] = {1, 0, 0, 0, 1, 0, 0, 0, 1,  /* K */
                                       1, 0, 0, 0, 1, 0, 0, 0, 1,  /* R */
                                       0, 0, 0};                   /* t */
    ap_camera cam;
    ap_projector proj;
    if (ap_camera_init(&cam, params) != AP_CAMERA_OK) {
        puts("FAIL: the test camera is refused");
        return 1;
    }
    ap_projector_init(&proj, &cam);
    uint64_t seed = 0x2545f4914f6cdd1dull;
    float img[H * W], pad[(H + 2) * (W + 2)];
    static double ray[6][N];
    static float as_is[N], edges[N];
    int failures = 0, slack = 0, unseen = 0;
    for (int round = 0; round < 64; round++) {
        for (int i = 0; i < H * W; i++) {
            img[i] = (float)uniform(&seed, 0.0, 1.0);
        }
        ap_pad_edges(img, H, W, pad);
        for (int i = 0; i < N; i++) {
            ray[0][i] = ray[1][i] = ray[2][i] = 0.0;
            ray[3][i] = coordinate(&seed, W);
            ray[4][i] = coordinate(&seed, H);
            ray[5][i] = 1.0;
            if (i % 97 == 0) {
                ray[3][i] = NAN;    /* a pixel without a ray */
            }
        }
        const double *rays[6] = {ray[0], ray[1], ray[2],
                                 ray[3], ray[4], ray[5]};
        float *out_as_is = as_is, *out_edges = edges;
        ap_project_sample(&proj, 1, rays, N, 1.0, img, H, W, &out_as_is);
        ap_project_sample_edges(&proj, 1, rays, N, 1.0, pad, H, W,
                                &out_edges);
        for (int i = 0; i < N; i++) {
            double u = ray[3][i], v = ray[4][i];
            int in_slack = (u < 0 || u > W - 1 || v < 0 || v > H - 1) &&
                           !isnan(as_is[i]);
            slack += in_slack;
            unseen += isnan(as_is[i]);
            if (memcmp(&as_is[i], &edges[i], sizeof(float)) != 0 &&
                !(isnan(as_is[i]) && isnan(edges[i]))) {
                if (failures++ < 5) {
                    printf("FAIL: (%.17g, %.17g): as is %.9g, from the "
                           "padded copy %.9g\n", u, v, as_is[i], edges[i]);
                }
            }
        }
    }
    if (slack < 1000 || unseen < 1000) {
        printf("FAIL: the cases reach the slack %d times and the unseen %d "
               "times, too few to tell\n", slack, unseen);
        return 1;
    }
    if (failures) {
        printf("FAIL: %d samples differ\n", failures);
        return 1;
    }
    printf("sampling from padded copies: the same bits in %d samples, %d "
           "of them in the border's slack, %d not seen\n", 64 * N, slack,
           unseen);
    return 0;
}
