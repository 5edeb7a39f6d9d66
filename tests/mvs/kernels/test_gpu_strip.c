/* The GPU's strip cost kernel (gpu_strip.h), its blocks run on the host
 * thread by thread between the points where the device's threads meet
 * (as sweep.cu's strip_costs calls the same functions), built with
 * -ffp-contract=fast (and -mfma on x86-64) as nvcc contracts the device
 * code:
 * - the sliding sums: every column sum of every group row against the
 *   column's samples summed afresh (within 1e-12 of the window's size),
 *   and every cost against the window's six sums made afresh and costed
 *   in float64 (ap_ncc_cost, ap_sad_cost: within 2e-6, the float32 NCC's
 *   share); images whose width and height are not whole blocks, samples
 *   not seen (NaN) scattered, in runs and in whole rows, windows of
 *   radius 1 to 7 and 9, 15 and 31 (the kernel that reads the radius);
 * - uniform windows (a constant warped patch below rows of noise that
 *   slid through first): the variance test finds them flat, cost exactly
 *   1, where float32 sums would leave noise above AP_NCC_MIN_VARIANCE;
 * - the whole kernel against the CPU path (ap_cost_volume): random rigs
 *   of refractive and pinhole cameras over a textured plane, NCC and
 *   SAD: no cost more than 1e-4 from the CPU's;
 * - sources warped side by side (AP_STRIP_SOURCES) against the same
 *   sources one a pass: the same bits and as many cold crossings, with
 *   NaN rays, a plane above the water and a pinhole among the sources;
 * - depth without the volume (gpu_depth.h): the fold of a pixel's
 *   planes a chunk at a time gives ap_extract_pixel's depth and
 *   confidence to the bit, for every chunk size, on random costs full of
 *   ties, NaN and infinities, the least at either end; and on the rigs,
 *   the fold of the strip kernel's costs picks the CPU extraction's
 *   plane wherever the CPU's least cost leads every other by more than
 *   2e-4 (each cost within 1e-4 of the CPU's cannot swap them there).
 * - the launches' grids (ap_strip_launch_planes, ap_strip_grid,
 *   ap_strip_place): every (plane, column of blocks) of a volume is one
 *   block's, in either order, across the launches a grid's limits cut
 *   the planes into; planes first, the GPU starts a column's planes one
 *   after another, tiles first a plane's columns.
 * Exits 1 saying what failed. */
/* crossings the walks' steps did not settle, counted (gpu_sample.h) */
#define AP_GPU_COUNT_COLD
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../csrc/mvs/cpu/cost_math.h"
#include "../../../csrc/mvs/cpu/sweep.h"
#include "../../../csrc/mvs/cpu/extract_math.h"
#include "../../../csrc/mvs/cuda/gpu_depth.h"
#include "../../../csrc/mvs/cuda/gpu_sample.h"
#include "../../../csrc/mvs/cuda/gpu_ssim_strip.h"
#include "../../../csrc/mvs/cuda/gpu_strip.h"
#include "../../../csrc/mvs/geometry/camera_math.h"
#include "random_cases.h"
#include "strip_on_host.h"

#define MAX_VIEWS 5

long ap_gpu_colds;
/* 1: strip_plane warps its sources one a pass, whatever
 * AP_STRIP_SOURCES (the side by side passes' test) */
static int one_at_a_time;

/* What a plane's blocks read: the views' images (srcs, `pixels` floats
 * each in turn) and frames or, for the sums' tests, their samples
 * themselves. */
typedef struct {
    int views;
    const float *srcs;
    size_t pixels;
    const ap_gpu_frame *frames;
    const float *warped[MAX_VIEWS];
} plane_views;

static int column_failures;
static double column_worst;

/* Column c's sums over rows [y - r, y + r] (the window's rows of group
 * row `row`), summed afresh from the samples; the kernel's against them. */
static void
check_column(const ap_strip_block *b, const float *warped, const double *q,
             int c, int y)
{
    double want[6] = {0, 0, 0, 0, 0, 0};
    int x = b->x0 + c;
    for (int yy = y - b->r; yy <= y + b->r; yy++) {
        if (x < 0 || yy < 0 || x >= b->w || yy >= b->h) {
            continue;
        }
        float s = warped[(size_t)yy * b->w + x];
        double rv = b->ref[(size_t)yy * b->w + x];
        if (s == s) {
            double d = b->cost == AP_COST_SAD ? fabs(rv - s) : rv;
            double sample[6] = {1.0, d, s, rv * rv, (double)s * s, rv * s};
            for (int k = 0; k < 6; k++) {
                want[k] += sample[k];
            }
        }
    }
    int nq = ap_strip_nq(b->cost);
    double tolerance = 1e-12 * (2 * b->r + 1);
    for (int k = 0; k < nq; k++) {
        double off = fabs(q[k] - want[k]);
        column_worst = off > column_worst ? off : column_worst;
        if (!(off <= tolerance) && column_failures++ < 3) {
            printf("FAIL: column sum %d at (%d, %d), radius %d: %.17g, "
                   "afresh %.17g\n", k, x, y, b->r, q[k], want[k]);
        }
    }
}

/* A block's accumulated costs (AP_STRIP_ROWS rows of its outputs) into
 * the plane's, their mean over the views. */
static void
block_out(const ap_strip_block *b, const float *acc, int views, float *out)
{
    int outputs = ap_strip_outputs(b->r);
    float scale = (float)(1.0 / views);
    for (int i = 0; i < AP_STRIP_ROWS * outputs; i++) {
        int y = b->y0 + i / outputs, x = b->x0 + b->r + i % outputs;
        if (x < b->w && y < b->h) {
            out[(size_t)y * b->w + x] = acc[i] * scale;
        }
    }
}

/* Each group's column sums checked against the samples summed afresh,
 * where the views are samples. */
static void
check_group(const ap_strip_block *b, ap_strip_shared_at at, int row, int n)
{
    for (int c = 0; b->warped[0] != NULL && c < AP_STRIP_COLS; c++) {
        for (int k = 0; k < n; k++) {
            for (int j = 0; j < AP_STRIP_GROUP; j++) {
                check_column(b, b->warped[k],
                             at.cols + ap_strip_cols(b->cost, k, j, c), c,
                             b->y0 + row + j);
            }
        }
    }
}

/* One plane's costs (h x w, the mean over the views), the strip
 * kernel's blocks in turn, AP_STRIP_SOURCES sources at once, then
 * those left one at a time; shared memory starts NaN, so that a sum
 * read from a place no thread wrote shows. */
static void
strip_plane(ap_strip_block proto, const plane_views *pv, float *out)
{
    int r = proto.r, outputs = ap_strip_outputs(r);
    unsigned bytes = ap_strip_shared(proto.cost, r);
    double *shared = malloc(bytes);
    static ap_strip_column col[AP_STRIP_COLS];
    if (shared == NULL) {
        puts("FAIL: out of memory");
        exit(1);
    }
    for (unsigned i = 0; i < bytes / sizeof(double); i++) {
        shared[i] = NAN;
    }
    for (int y0 = 0; y0 < proto.h; y0 += AP_STRIP_ROWS) {
        for (int bx = 0; bx * outputs < proto.w; bx++) {
            ap_strip_block b = proto;
            b.x0 = bx * outputs - r;
            b.y0 = y0;
            ap_strip_shared_at at = ap_strip_layout(shared, b.cost, r);
            for (int i = 0; i < AP_STRIP_ROWS * outputs; i++) {
                at.acc[i] = 0.0f;
            }
            for (int v = 0, n; v < pv->views; v += n) {
                n = strip_pass_sources(v, pv->views, one_at_a_time);
                ap_strip_sources(&b, n, v, pv->srcs, pv->pixels, pv->frames);
                for (int k = 0; k < n; k++) {
                    b.warped[k] = pv->warped[v + k];
                }
                strip_pass(&b, at, col, n, check_group);
            }
            block_out(&b, at.acc, pv->views, out);
        }
    }
    free(shared);
}

/* Whether SSIM's blocks run their threads in reverse between the points
 * where they meet (the sums' test runs both orders: no cost may depend
 * on theirs, nor on shared memory no thread wrote, filled with NaN). */
static int ssim_reversed;

/* One plane's SSIM costs (h x w, the mean over the views), SSIM's strip
 * kernel's blocks (gpu_ssim_strip.h) in turn. */
static void
ssim_plane(ap_strip_block proto, const plane_views *pv, float *out)
{
    int r = proto.r, outputs = ap_strip_outputs(r);
    unsigned bytes = ap_sstrip_shared(r);
    double *shared = malloc(bytes);
    static ap_sstrip_column cols[AP_STRIP_COLS];
    if (shared == NULL) {
        puts("FAIL: out of memory");
        exit(1);
    }
    for (unsigned i = 0; i < bytes / sizeof(double); i++) {
        shared[i] = NAN;
    }
    ap_sstrip_shared_at at = ap_sstrip_layout(shared, r);
    for (int y0 = 0; y0 < proto.h; y0 += AP_STRIP_ROWS) {
        for (int bx = 0; bx * outputs < proto.w; bx++) {
            ap_strip_block b = proto;
            b.x0 = bx * outputs - r;
            b.y0 = y0;
            for (int i = 0; i < AP_STRIP_ROWS * outputs; i++) {
                at.acc[i] = 0.0f;
            }
            for (int v = 0; v < pv->views; v++) {
                ap_strip_sources(&b, 1, v, pv->srcs, pv->pixels,
                                 pv->frames);
                b.warped[0] = pv->warped[v];
                for (int c = 0; c < AP_STRIP_COLS; c++) {
                    ap_sstrip_start(&cols[c]);
                }
                for (int y = b.y0 - r; y < ap_sstrip_end(&b); y++) {
                    for (int k = 0; k < AP_STRIP_COLS; k++) {
                        int c = ssim_reversed ? AP_STRIP_COLS - 1 - k : k;
                        ap_sstrip_enter(&b, at, &cols[c], c, y);
                    }
                    for (int k = r; y >= b.y0 + r && k < AP_STRIP_COLS - r;
                         k++) {
                        int c = ssim_reversed ? AP_STRIP_COLS - 1 - k : k;
                        ap_sstrip_cost(&b, at, c, y);
                    }
                }
            }
            block_out(&b, at.acc, pv->views, out);
        }
    }
    free(shared);
}

/* A plane's costs by the strip kernel of its cost. */
static void
cost_plane(ap_strip_block proto, const plane_views *pv, float *out)
{
    if (proto.cost == AP_COST_SSIM) {
        ssim_plane(proto, pv, out);
    } else {
        strip_plane(proto, pv, out);
    }
}

/* ------------------------------------------- the sums, against afresh */

/* The window cost of pixel (x, y) from its six sums made afresh. */
static double
afresh_cost(const float *ref, const float *warped, int h, int w, int x,
            int y, int r, int cost)
{
    double q[6] = {0, 0, 0, 0, 0, 0}, taps[AP_MAX_WINDOW];
    ap_gauss_weights(r, taps);
    for (int yy = y - r; yy <= y + r; yy++) {
        for (int xx = x - r; xx <= x + r; xx++) {
            if (xx < 0 || yy < 0 || xx >= w || yy >= h) {
                continue;
            }
            float s = warped[(size_t)yy * w + xx];
            double rv = ref[(size_t)yy * w + xx];
            if (s == s) {
                double d = cost == AP_COST_SAD ? fabs(rv - s) : rv;
                double g = cost == AP_COST_SSIM
                    ? taps[yy - y + r] * taps[xx - x + r] : 1.0;
                double sample[6] = {1.0, d, s, rv * rv, (double)s * s,
                                    rv * s};
                for (int k = 0; k < 6; k++) {
                    q[k] += g * sample[k];
                }
            }
        }
    }
    double full = cost == AP_COST_SSIM ? 1.0
                                       : (double)(2 * r + 1) * (2 * r + 1);
    return cost == AP_COST_SAD
        ? ap_sad_cost(full, q[0], q[1])
        : cost == AP_COST_SSIM
        ? ap_ssim_cost(full, q[0], q[1], q[2], q[3], q[4], q[5])
        : ap_ncc_cost(full, q[0], q[1], q[2], q[3], q[4], q[5]);
}

/* Samples in [0, 1), some not seen: scattered (a share `scattered`),
 * in runs along rows, and every sample of a few whole rows. */
static void
warped_image(uint64_t *s, float *img, int h, int w, double scattered)
{
    for (int i = 0; i < h * w; i++) {
        img[i] = uniform(s, 0.0, 1.0) < scattered
            ? NAN : (float)uniform(s, 0.0, 1.0);
    }
    for (int run = 0; run < h / 4; run++) {
        int y = (int)uniform(s, 0.0, h), x = (int)uniform(s, 0.0, w);
        int len = (int)uniform(s, 1.0, 40.0);
        for (int k = 0; k < len && x + k < w; k++) {
            img[(size_t)y * w + x + k] = NAN;
        }
    }
    for (int k = 0; k < 2; k++) {
        int y = (int)uniform(s, 0.0, h);
        for (int x = 0; x < w; x++) {
            img[(size_t)y * w + x] = NAN;
        }
    }
}

/* The sums' tests' planes: not whole blocks across nor down. */
enum { NOISE_H = 150, NOISE_W = 141 };

/* A reference of noise and `views` warped images (warped_image) of
 * h x w, their samples the views' (no images, no frames). */
static plane_views
noise_plane(uint64_t *seed, float *ref, float (*warped)[NOISE_H * NOISE_W],
            int h, int w, int views)
{
    for (int i = 0; i < h * w; i++) {
        ref[i] = (float)uniform(seed, 0.0, 1.0);
    }
    plane_views pv = {.views = views};
    for (int v = 0; v < views; v++) {
        warped_image(seed, warped[v], h, w, 0.02 * v);
        pv.warped[v] = warped[v];
    }
    return pv;
}

static int
sums_against_afresh(void)
{
    enum { H = NOISE_H, W = NOISE_W };
    static float ref[H * W], warped[MAX_VIEWS][H * W], got[H * W];
    static const int radii[] = {1, 2, 3, 4, 5, 6, 7, 9, 15, 31};
    uint64_t seed = 0x853c49e6748fea9bull;
    int failures = 0;
    double worst = 0.0;
    long costs = 0;
    for (size_t ri = 0; ri < sizeof(radii) / sizeof(radii[0]); ri++) {
        for (int cost = AP_COST_NCC; cost <= AP_COST_SAD; cost += 2) {
            int r = radii[ri];
            plane_views pv = noise_plane(&seed, ref, warped, H, W,
                                         1 + (int)ri % MAX_VIEWS);
            ap_strip_block b = {.ref = ref, .h = H, .w = W, .cost = cost,
                                .r = r,
                                .full = (double)(2 * r + 1) * (2 * r + 1)};
            strip_plane(b, &pv, got);
            for (int y = 0; y < H; y++) {
                for (int x = 0; x < W; x++) {
                    double want = 0.0;
                    for (int v = 0; v < pv.views; v++) {
                        want += afresh_cost(ref, warped[v], H, W, x, y, r,
                                            cost);
                    }
                    want /= pv.views;
                    double off = fabs(got[y * W + x] - want);
                    worst = off > worst ? off : worst;
                    costs++;
                    if (!(off <= 2e-6) && failures++ < 3) {
                        printf("FAIL: %s radius %d, pixel (%d, %d): strip "
                               "%.9g, afresh %.9g\n",
                               cost == AP_COST_SAD ? "SAD" : "NCC", r, x, y,
                               got[y * W + x], want);
                    }
                }
            }
        }
    }
    printf("gpu strip: %ld costs against their sums afresh, worst %.3g; "
           "column sums worst %.3g; %d failures\n", costs, worst,
           column_worst, failures + column_failures);
    return failures + column_failures;
}

/* SSIM's strip kernel against its window's Gaussian sums made afresh,
 * and run with its threads in reverse: the same bits. */
static int
ssim_against_afresh(void)
{
    enum { H = NOISE_H, W = NOISE_W };
    static float ref[H * W], warped[MAX_VIEWS][H * W], got[H * W];
    static float again[H * W];
    static const int radii[] = {1, 2, 3, 5, 7, 9, 15, 31};
    uint64_t seed = 0x1d8e4e27c47d124full;
    int failures = 0, order = 0;
    double worst = 0.0, taps[AP_MAX_WINDOW];
    long costs = 0;
    for (size_t ri = 0; ri < sizeof(radii) / sizeof(radii[0]); ri++) {
        int r = radii[ri];
        ap_gauss_weights(r, taps);
        plane_views pv = noise_plane(&seed, ref, warped, H, W,
                                     1 + (int)ri % MAX_VIEWS);
        ap_strip_block b = {.ref = ref, .taps = taps, .h = H, .w = W,
                            .cost = AP_COST_SSIM, .r = r, .full = 1.0};
        ssim_plane(b, &pv, got);
        ssim_reversed = 1;
        ssim_plane(b, &pv, again);
        ssim_reversed = 0;
        for (int i = 0; i < H * W; i++) {
            double want = 0.0;
            for (int v = 0; v < pv.views; v++) {
                want += afresh_cost(ref, warped[v], H, W, i % W, i / W, r,
                                    AP_COST_SSIM);
            }
            want /= pv.views;
            double off = fabs(got[i] - want);
            worst = off > worst ? off : worst;
            costs++;
            if (!(off <= 2e-6) && failures++ < 3) {
                printf("FAIL: SSIM radius %d, pixel (%d, %d): strip %.9g, "
                       "afresh %.9g\n", r, i % W, i / W, got[i], want);
            }
            if (memcmp(&got[i], &again[i], sizeof(float)) != 0 &&
                order++ < 3) {
                printf("FAIL: SSIM radius %d, pixel (%d, %d): %.9g with "
                       "the threads in order, %.9g in reverse\n", r, i % W,
                       i / W, got[i], again[i]);
            }
        }
    }
    printf("gpu ssim strip: %ld costs against their sums afresh, worst "
           "%.3g; %d failures; %d not the same bits with the threads in "
           "reverse\n", costs, worst, failures, order);
    return failures + order;
}

/* A warped image of noise whose rows [flat0, h) hold one value, c, and
 * a reference of noise: every window wholly in the flat rows has no
 * variance in its samples, so its NCC cost is 1 exactly. */
static int
uniform_windows(void)
{
    enum { H = 140, W = 130 };
    static float ref[H * W], warped[H * W], got[H * W];
    static const float values[] = {0.7f, 1.0f / 3.0f, 0.999f, 1e-3f};
    uint64_t seed = 0x2f1c0a0b47d35a1dull;
    int failures = 0;
    long flat = 0;
    for (int r = 1; r <= 15; r += 2) {
        for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++) {
            int flat0 = 37 + r;
            for (int i = 0; i < H * W; i++) {
                ref[i] = (float)uniform(&seed, 0.0, 1.0);
                warped[i] = i / W >= flat0 ? values[k]
                                           : (float)uniform(&seed, 0.0, 1.0);
            }
            plane_views pv = {.views = 1, .warped = {warped}};
            ap_strip_block b = {.ref = ref, .h = H, .w = W,
                                .cost = AP_COST_NCC, .r = r,
                                .full = (double)(2 * r + 1) * (2 * r + 1)};
            strip_plane(b, &pv, got);
            for (int y = flat0 + r; y < H; y++) {
                for (int x = 0; x < W; x++) {
                    flat++;
                    if (got[y * W + x] != 1.0f && failures++ < 3) {
                        printf("FAIL: uniform window at (%d, %d), radius "
                               "%d, value %g: cost %.9g, not 1\n", x, y, r,
                               values[k], got[y * W + x]);
                    }
                }
            }
        }
    }
    printf("gpu strip: %ld uniform windows, %d not found flat\n", flat,
           failures);
    return failures;
}

/* ------------------------------------------- the kernel, against the CPU */

/* ------------------------------------------- depth without the volume */

static long fold_compared, fold_led, fold_agreed;

/* Whether two results are the same bits (NaN depths alike). */
static int
same_result(float depth, float conf, float want_depth, float want_conf)
{
    int depths_same = (depth != depth && want_depth != want_depth) ||
                      memcmp(&depth, &want_depth, sizeof(float)) == 0;
    return depths_same && memcmp(&conf, &want_conf, sizeof(float)) == 0;
}

/* Pixel i of an (n, d) volume folded `chunk` planes at a time, each
 * chunk copied apart as the GPU's chunk buffer holds it. */
static void
fold_chunks(const float *volume, size_t i, int d, int chunk,
            const double *depths, float *depth, float *conf)
{
    float part[64];
    ap_depth_state s;
    for (int first = 0; first < d; first += chunk) {
        int k = d - first < chunk ? d - first : chunk;
        memcpy(part, volume + i * d + first, (size_t)k * sizeof(float));
        ap_depth_fold_pixel(part, 0, k, k, first, d, depths, &s, depth,
                            conf);
    }
}

/* Random pixels of d costs: few distinct values (ties), some NaN and
 * infinite, some least at the first or last plane; every chunk size. */
static int
fold_against_extract(void)
{
    static const float values[] = {0.25f, 0.5f, 0.75f, 1.0f, 0.1f,
                                   1.9f, 0.0f, -0.5f};
    uint64_t seed = 0x5851f42d4c957f2dull;
    int failures = 0;
    long pixels = 0;
    for (int trial = 0; trial < 4000; trial++) {
        int d = 1 + (int)uniform(&seed, 0.0, 40.0);
        float c[64];
        double depths[64];
        double at = uniform(&seed, 0.3, 2.0);
        for (int k = 0; k < d; k++) {
            double pick = uniform(&seed, 0.0, 1.0);
            c[k] = pick < 0.5 ? values[(int)uniform(&seed, 0.0, 8.0)]
                              : (float)uniform(&seed, 0.0, 2.0);
            at += uniform(&seed, 0.001, 0.05);     /* uneven steps */
            depths[k] = at;
        }
        int odd = trial % 16;
        if (odd == 1) {
            c[(int)uniform(&seed, 0.0, d)] = NAN;
        } else if (odd == 2) {
            c[(int)uniform(&seed, 0.0, d)] = INFINITY;
        } else if (odd == 3) {
            c[(int)uniform(&seed, 0.0, d)] = -INFINITY;
        } else if (odd == 4) {
            c[0] = -1.0f;
        } else if (odd == 5) {
            c[d - 1] = -1.0f;
        } else if (odd == 6 && d > 2) {   /* ties with the least */
            c[1] = c[d - 2] = -1.0f;
        }
        float want_depth, want_conf;
        ap_extract_pixel(c, d, depths, &want_depth, &want_conf);
        for (int chunk = 1; chunk <= d; chunk++) {
            float depth, conf;
            fold_chunks(c, 0, d, chunk, depths, &depth, &conf);
            pixels++;
            if (!same_result(depth, conf, want_depth, want_conf) &&
                failures++ < 3) {
                printf("FAIL: fold of %d planes in chunks of %d: depth "
                       "%.9g confidence %.9g, extracted %.9g %.9g\n", d,
                       chunk, depth, conf, want_depth, want_conf);
            }
        }
    }
    printf("gpu depth: %ld pixel folds against ap_extract_pixel, %d not "
           "the same bits\n", pixels, failures);
    return failures;
}

/* A rig's volumes, the CPU's and the strip kernel's (n, d): each folded
 * in chunks as its own extraction to the bit, and the strip's fold on
 * the CPU extraction's plane where the CPU's least leads by 2e-4. */
static int
fold_rig(const float *cpu, const float *strip, size_t n, int d,
         const double *depths)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        for (int v = 0; v < 2; v++) {
            const float *volume = v ? strip : cpu;
            float want_depth, want_conf, depth, conf;
            ap_extract_pixel(volume + i * d, d, depths, &want_depth,
                             &want_conf);
            fold_chunks(volume, i, d, 1 + (int)(i % d), depths, &depth,
                        &conf);
            fold_compared++;
            if (!same_result(depth, conf, want_depth, want_conf) &&
                failures++ < 3) {
                printf("FAIL: %s volume, pixel %zu: fold %.9g %.9g, "
                       "extracted %.9g %.9g\n", v ? "strip" : "CPU", i,
                       depth, conf, want_depth, want_conf);
            }
        }
        const float *c = cpu + i * d, *g = strip + i * d;
        int best = 0, gbest = 0;
        for (int k = 1; k < d; k++) {
            best = c[k] < c[best] ? k : best;
            gbest = g[k] < g[gbest] ? k : gbest;
        }
        int leads = 1;
        for (int k = 0; k < d; k++) {
            leads &= k == best || c[k] > c[best] + 2e-4;
        }
        if (leads) {
            fold_led++;
            fold_agreed += gbest == best;
            if (gbest != best && failures++ < 3) {
                printf("FAIL: pixel %zu: the strip's least cost at plane "
                       "%d, the CPU's at %d by a lead over 2e-4\n", i,
                       gbest, best);
            }
        }
    }
    return failures;
}

enum { RH = 80, RW = 150, VIEWS = 3, DEPTHS = 4, RN = RH * RW };

/* One rig: its costs by the strip kernel against the CPU's. */
static int
compare_rig(uint64_t *seed, int refractive, int cost, int r, double *worst,
            long *compared)
{
    double water_z;
    ap_camera ref_cam, cams[VIEWS];
    ap_gpu_frame frames[VIEWS];
    if (random_rig(seed, refractive, RW, RH, VIEWS, &water_z, &ref_cam,
                   cams)) {
        return 1;
    }
    for (int v = 0; v < VIEWS; v++) {
        ap_gpu_frame_init(&frames[v], &cams[v]);
    }
    static double rays[AP_RAY_DOUBLES * RN];
    static float ref[RN], srcs[VIEWS * RN], cpu[RN * DEPTHS], got[RN];
    static float strip[RN * DEPTHS];
    double depths[DEPTHS];
    rig_scene(seed, &ref_cam, RW, RH, VIEWS, water_z, DEPTHS, rays, ref,
              srcs, depths);
    ap_sweep_args a = {.ref = ref, .srcs = srcs, .h = RH, .w = RW,
                       .n = VIEWS, .ref_cam = &ref_cam, .src_cams = cams,
                       .depths = depths, .d = DEPTHS, .first = 0,
                       .count = DEPTHS, .cost = cost, .window = 2 * r + 1,
                       .threads = 1, .parity = AP_PARITY_TEXTBOOK};
    if (ap_cost_volume(&a, cpu) != 0) {
        puts("FAIL: the CPU's cost volume failed");
        return 1;
    }
    int failures = 0;
    double taps[AP_MAX_WINDOW];
    ap_gauss_weights(r, taps);
    for (int j = 0; j < DEPTHS; j++) {
        plane_views pv = {.views = VIEWS, .srcs = srcs, .pixels = RN,
                          .frames = frames};
        ap_strip_block b = {.ref = ref, .rays = rays, .taps = taps,
                            .h = RH, .w = RW, .cost = cost, .r = r,
                            .depth = depths[j],
                            .full = cost == AP_COST_SSIM
                                ? 1.0 : (double)(2 * r + 1) * (2 * r + 1)};
        cost_plane(b, &pv, got);
        for (int i = 0; i < RN; i++) {
            strip[(size_t)i * DEPTHS + j] = got[i];
        }
        for (int i = 0; i < RN; i++) {
            float want = cpu[(size_t)i * DEPTHS + j];
            double off = fabs((double)got[i] - want);
            *worst = off > *worst ? off : *worst;
            (*compared)++;
            if (!(off <= 1e-4) && failures++ < 3) {
                printf("FAIL: %s rig, %s radius %d, pixel (%d, %d), depth "
                       "%g: strip %.9g, CPU %.9g\n",
                       refractive ? "refractive" : "pinhole",
                       cost == AP_COST_SAD ? "SAD"
                       : cost == AP_COST_SSIM ? "SSIM" : "NCC", r, i % RW,
                       i / RW, depths[j], got[i], want);
            }
        }
    }
    return failures + fold_rig(cpu, strip, RN, DEPTHS, depths);
}

static int
kernel_against_cpu(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    static const int radii[] = {5, 1, 3, 7, 9};
    int failures = 0;
    double worst = 0.0;
    long compared = 0;
    for (int rig = 0; rig < 12; rig++) {
        int cost = rig % 4 == 2 ? AP_COST_SAD : AP_COST_NCC;
        failures += compare_rig(&seed, rig % 3 != 2, cost,
                                radii[rig % 5], &worst, &compared);
    }
    printf("gpu strip: 12 rigs, %ld costs against the CPU's, worst %.3g; "
           "%d past 1e-4\n", compared, worst, failures);
    printf("gpu depth: 12 rigs, %ld folds against their volumes' "
           "extraction; %ld of %ld pixels with a lead over 2e-4 on the "
           "CPU's plane\n", fold_compared, fold_agreed, fold_led);
    static const int ssim_radii[] = {5, 1, 3, 7, 9, 15};
    int ssim_failures = 0;
    double ssim_worst = 0.0;
    long ssim_compared = 0;
    for (int rig = 0; rig < 6; rig++) {
        ssim_failures += compare_rig(&seed, rig % 3 != 2, AP_COST_SSIM,
                                     ssim_radii[rig], &ssim_worst,
                                     &ssim_compared);
    }
    printf("gpu ssim strip: 6 rigs, %ld costs against the CPU's, worst "
           "%.3g; %d past 1e-4\n", ssim_compared, ssim_worst,
           ssim_failures);
    return failures + ssim_failures;
}

/* The blocks of strip launches of `count` planes over `columns`
 * columns of blocks, as csrc/mvs/cuda/cuda_sweep.c's launch_strips cuts
 * them (a row strip's; the grid's y holds the strips): each (plane,
 * column) placed once, each launch's grid within its limits. Planes
 * first, block x + 1 is the next plane of x's column until the launch's
 * last plane; tiles first, a launch's blocks go a plane at a time, its
 * columns in turn. Where the grid is too large to walk, only the cut is
 * checked. */
static int
grid_places_each_block_once(void)
{
    static const int cases[][2] = {{1, 1}, {128, 14}, {7, 3}, {65537, 2},
                                   {300, 1}, {1, 300}, {70000, 3},
                                   /* launches cut by the grid's x */
                                   {1000, 0x7fffffff / 100},
                                   {65535, 0x7fffffff / 7 + 1}};
    int failures = 0;
    long placed = 0;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        int count = cases[k][0], columns = cases[k][1];
        long long blocks = (long long)count * columns;
        unsigned char *seen = blocks <= 1 << 20 ? calloc((size_t)blocks, 1)
                                                : NULL;
        for (int tiles_first = 0; tiles_first < 2; tiles_first++) {
            const char *order = tiles_first ? "tiles first" : "planes first";
            if (seen != NULL) {
                memset(seen, 0, (size_t)blocks);
            }
            int launches = 0;
            for (int done = 0, slice; done < count; done += slice) {
                slice = ap_strip_launch_planes(count - done, columns,
                                               tiles_first);
                unsigned gx, gz;
                ap_strip_grid(slice, columns, tiles_first, &gx, &gz);
                launches++;
                if (slice < 1 || (long long)gx * gz != (long long)slice *
                    columns || gx > 0x7fffffffu || gz > 65535u) {
                    printf("FAIL: %d planes of %d columns, %s: a launch of "
                           "%d planes in %u x %u blocks\n", count, columns,
                           order, slice, gx, gz);
                    failures++;
                    break;
                }
                int last_plane = -1, last_column = -1;
                for (unsigned z = 0; seen != NULL && z < gz; z++) {
                    for (unsigned x = 0; x < gx; x++) {
                        int plane, column;
                        ap_strip_place(x, z, slice, tiles_first, &plane,
                                       &column);
                        /* the blocks in the order the GPU starts them */
                        int next = last_plane < 0 ||
                            (tiles_first
                             ? (plane == last_plane &&
                                column == last_column + 1) ||
                               (plane == last_plane + 1 && column == 0)
                             : (column == last_column &&
                                plane == last_plane + 1) ||
                               (column == last_column + 1 && plane == 0));
                        if (plane < 0 || plane >= slice || column < 0 ||
                            column >= columns || !next ||
                            seen[(long long)(done + plane) * columns +
                                 column]++) {
                            if (failures++ < 3) {
                                printf("FAIL: %d planes of %d columns, %s: "
                                       "block (%u, %u) at plane %d, column "
                                       "%d\n", count, columns, order, x, z,
                                       done + plane, column);
                            }
                        }
                        last_plane = plane;
                        last_column = column;
                        placed++;
                    }
                }
            }
            long long most = tiles_first ? 65535 : 0x7fffffff / columns;
            if (launches != (count + most - 1) / most) {
                printf("FAIL: %d planes of %d columns, %s, took %d "
                       "launches\n", count, columns, order, launches);
                failures++;
            }
            for (long long i = 0; seen != NULL && i < blocks; i++) {
                if (seen[i] != 1 && failures++ < 3) {
                    printf("FAIL: %d planes of %d columns, %s: plane %lld, "
                           "column %lld placed %d times\n", count, columns,
                           order, i / columns, i % columns, seen[i]);
                }
            }
        }
        free(seen);
    }
    printf("gpu strip grid: %ld blocks placed, %d failures\n", placed,
           failures);
    return failures;
}

/* Sources warped side by side (AP_STRIP_SOURCES) against the same
 * sources one a pass: the same bits and as many cold crossings, on rigs
 * of five sources (passes of two, then one, each added to the
 * accumulators of those before), with rays that are NaN, a plane above
 * the water (not seen), and a pinhole among refractive sources (those
 * passes warp a source at a time). */
static int
paired_against_single(void)
{
    enum { V = MAX_VIEWS, D = 3 };
    static double rays[AP_RAY_DOUBLES * RN];
    static float ref[RN], srcs[V * RN], paired[RN], single[RN];
    uint64_t seed = 0xd1b54a32d192ed03ull;
    int failures = 0;
    long costs = 0, colds = 0;
    for (int rig = 0; rig < 6; rig++) {
        double water_z, depths[D];
        ap_camera ref_cam, cams[V];
        ap_gpu_frame frames[V];
        if (random_rig(&seed, 1, RW, RH, V, &water_z, &ref_cam, cams)) {
            return 1;
        }
        for (int v = 0; v < V; v++) {
            ap_gpu_frame_init(&frames[v], &cams[v]);
        }
        frames[rig % V].refractive = rig % 3 != 1;
        rig_scene(&seed, &ref_cam, RW, RH, V, water_z, D, rays, ref, srcs,
                  depths);
        depths[D - 1] = -0.05;
        for (int i = rig; i < RN; i += 37) {
            rays[AP_RAY_DOUBLES * i] = NAN;
        }
        int cost = rig % 2 ? AP_COST_SAD : AP_COST_NCC, r = 1 + rig;
        plane_views pv = {.views = V, .srcs = srcs, .pixels = RN,
                          .frames = frames};
        for (int j = 0; j < D; j++) {
            ap_strip_block b = {.ref = ref, .rays = rays, .h = RH, .w = RW,
                                .cost = cost, .r = r, .depth = depths[j],
                                .full = (double)(2 * r + 1) * (2 * r + 1)};
            long before = ap_gpu_colds;
            strip_plane(b, &pv, paired);
            long side_by_side = ap_gpu_colds - before;
            one_at_a_time = 1;
            strip_plane(b, &pv, single);
            one_at_a_time = 0;
            long apart = ap_gpu_colds - before - side_by_side;
            colds += apart;
            costs += RN;
            if (memcmp(paired, single, sizeof(paired)) != 0 &&
                failures++ < 3) {
                printf("FAIL: rig %d, plane %d: the sources side by side "
                       "do not cost the bits of one a pass\n", rig, j);
            }
            if (side_by_side != apart && failures++ < 3) {
                printf("FAIL: rig %d, plane %d: %ld cold crossings side by "
                       "side, %ld one a pass\n", rig, j, side_by_side,
                       apart);
            }
        }
    }
    printf("gpu strip: AP_STRIP_SOURCES %d against one source a pass, %ld "
           "costs of 6 rigs (%ld cold crossings each way); %d not the "
           "same\n", AP_STRIP_SOURCES, costs, colds, failures);
    return failures;
}

int
main(void)
{
    int failures = grid_places_each_block_once();
    failures += sums_against_afresh();
    failures += ssim_against_afresh();
    failures += uniform_windows();
    failures += kernel_against_cpu();
    failures += paired_against_single();
    failures += fold_against_extract();
    return failures ? 1 : 0;
}
