/* The cost volume samples its sources from copies with their first row
 * and column repeated (ap_project_sample_edges), with half the clamps at
 * the border that ap_project_sample makes: the two must give the same
 * bits everywhere, and above all in the border's slack (within
 * AP_BORDER_SLACK outside the image), on the edge texels themselves, and
 * just outside the slack, where both must say not seen (NaN); for two
 * views at once, images of 2 x 2 and 2 x 5 texels, and texels whose
 * neighbours are 1e12 times larger (where a texel mixed with a fraction
 * of 1 is not that texel's bits). Points go through a pinhole camera at
 * the origin with K = I, so that the point (u, v, 1) lands on pixel
 * (u, v) to the bit. Exits 1 saying what failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../csrc/mvs/cpu/cost_math.h"
#include "../../../csrc/mvs/geometry/camera.h"
#include "../../../csrc/mvs/geometry/projector.h"
#include "random_cases.h"

#define VIEWS 2
#define N 4096

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

/* Texels of [0, 1), or in alternate rounds tiny ones beside large ones */
static float
texel(uint64_t *s, int round, int x, int y)
{
    if (round % 2 == 0) {
        return (float)uniform(s, 0.0, 1.0);
    }
    return (x + y) % 2 ? (float)uniform(s, 1.0, 3.0)
                       : (float)uniform(s, 1e-12, 2e-12);
}

/* Samples of VIEWS (h, w) images both ways; the differences counted,
 * the first few said. */
static int
compare(uint64_t *seed, const ap_projector *proj, int h, int w, int round,
        int *slack, int *unseen)
{
    size_t size = (size_t)h * w, pad_size = ap_edges_size(h, w);
    float *img = malloc(VIEWS * size * sizeof(float));
    float *pad = malloc(VIEWS * pad_size * sizeof(float));
    static double ray[6][N];
    static float as_is[VIEWS][N], edges[VIEWS][N];
    if (img == NULL || pad == NULL) {
        puts("FAIL: out of memory");
        exit(1);
    }
    for (int v = 0; v < VIEWS; v++) {
        for (size_t i = 0; i < size; i++) {
            img[v * size + i] = texel(seed, round, (int)(i % w),
                                      (int)(i / w));
        }
        ap_pad_edges(img + v * size, h, w, pad + v * pad_size);
    }
    for (int i = 0; i < N; i++) {
        ray[0][i] = ray[1][i] = ray[2][i] = 0.0;
        ray[3][i] = coordinate(seed, w);
        ray[4][i] = coordinate(seed, h);
        ray[5][i] = 1.0;
        if (i % 97 == 0) {
            ray[3][i] = NAN;    /* a pixel without a ray */
        }
    }
    const double *rays[6] = {ray[0], ray[1], ray[2], ray[3], ray[4], ray[5]};
    const ap_projector projs[VIEWS] = {*proj, *proj};
    float *out_as_is[VIEWS] = {as_is[0], as_is[1]};
    float *out_edges[VIEWS] = {edges[0], edges[1]};
    ap_project_sample(projs, VIEWS, rays, N, 1.0, img, h, w, out_as_is);
    ap_project_sample_edges(projs, VIEWS, rays, N, 1.0, pad, h, w,
                            out_edges);
    int failures = 0;
    for (int v = 0; v < VIEWS; v++) {
        for (int i = 0; i < N; i++) {
            double x = ray[3][i], y = ray[4][i];
            float a = as_is[v][i], b = edges[v][i];
            *slack += !isnan(a) && (x < 0 || x > w - 1 || y < 0 ||
                                    y > h - 1);
            *unseen += isnan(a);
            if (memcmp(&a, &b, sizeof(a)) != 0 && !(isnan(a) && isnan(b))) {
                if (failures++ < 3) {
                    printf("FAIL: %dx%d view %d at (%.17g, %.17g): as is "
                           "%.9g, from the padded copy %.9g\n", h, w, v, x,
                           y, a, b);
                }
            }
        }
    }
    free(img);
    free(pad);
    return failures;
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
    static const int sizes[3][2] = {{7, 9}, {2, 2}, {2, 5}};
    uint64_t seed = 0x2545f4914f6cdd1dull;
    int failures = 0, slack = 0, unseen = 0, samples = 0;
    for (int round = 0; round < 48; round++) {
        const int *hw = sizes[round % 3];
        failures += compare(&seed, &proj, hw[0], hw[1], round / 3, &slack,
                            &unseen);
        samples += VIEWS * N;
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
           "of them in the border's slack, %d not seen\n", samples, slack,
           unseen);
    return 0;
}
