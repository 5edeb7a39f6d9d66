/* The GPU's AquaMVS parity strip kernel (gpu_parity_strip.h), its blocks
 * run on the host thread by thread between the points where the
 * device's threads meet (as parity_sweep.cuh's parity_strip calls the
 * same functions), built with -ffp-contract=fast (and -mfma on x86-64)
 * as nvcc contracts the device code:
 * - the two filterings: every cost against its windows summed whole, as
 *   the three passes of parity_sweep.cuh sum them (within 1e-6, the
 *   float32 accumulators' share), on samples with some not seen
 *   (scattered, in runs and in whole rows) and a flat patch that
 *   windows slide onto from random texture, images whose width and
 *   height are not whole blocks, NCC and SSIM, radii 1 to 7, one to
 *   three sources; the same bits with the block's threads run in
 *   reverse between the points where they meet, and shared memory
 *   filled with NaN first (no result may depend on their order, nor on
 *   memory no thread wrote);
 * - the whole kernel against the CPU's AquaMVS parity
 *   (ap_aquamvs_cost_volume): random rigs of refractive and pinhole
 *   cameras over a textured plane, NCC and SSIM: no cost more than 1e-6
 *   from the CPU's (the float32 accumulators' share; the GPU parity
 *   tests allow 1e-5 on a device).
 * - NCC's sums of centred products down a column, slid, against the
 *   window's products summed afresh: within 1e-12 of their magnitude
 *   and 1e-24, which a running sum that does not keep its roundings
 *   fails where a window turns flat.
 * Exits 1 saying what failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../csrc/mvs/cpu/sweep.h"
#include "../../../csrc/mvs/cuda/gpu_parity_strip.h"
#include "../../../csrc/mvs/cuda/gpu_sample.h"
#include "../../../csrc/mvs/parity/parity_costs.h"
#include "random_cases.h"

#define MAX_VIEWS 3

/* What a plane's blocks read for each source: its image and frame or,
 * for the sums' tests, its samples themselves. */
typedef struct {
    int views;
    const float *imgs[MAX_VIEWS];
    const ap_gpu_frame *frames;
    const double *warped[MAX_VIEWS];
} plane_views;

/* Whether a block's threads run in reverse between the points where
 * they meet: a result that depends on their order, or on shared memory
 * no thread wrote (filled with NaN before each plane), differs between
 * the two orders. */
static int reversed;
/* box windows: the second filter's column sums that strayed from the
 * products summed afresh, and the worst such gap */
static long second_strays;
static double second_worst;

/* Column c's sums down the window of centred products, against the
 * ring's rows summed afresh (the ring holds the window's rows once they
 * are all centred), within 1e-12 of the window's products' magnitude
 * and 1e-24: a running sum that kept the rounding of texture long gone
 * is off by about 1e-15 where the window turned flat. */
static void
check_second(ap_pstrip_shared_at at, int c, int r)
{
    for (int q = 0; q < 3; q++) {
        /* the window's own products' magnitude: the cross products'
         * signed sum is known to a rounding of it, not of the sum */
        double whole = 0.0, size = 0.0;
        for (int k = 0; k <= 2 * r; k++) {
            double p = at.products[3 * (k * AP_PSTRIP_COLS + c) + q];
            whole += p;
            size += fabs(p);
        }
        double off = fabs(at.second[3 * c + q] - whole);
        second_worst = off > second_worst ? off : second_worst;
        if (!(off <= 1e-12 * size + 1e-24)) {
            second_strays++;
        }
    }
}

/* Column k of a phase's columns [lo, hi), in the order of the run. */
static int
column(int k, int lo, int hi)
{
    return reversed ? hi - 1 - (k - lo) : k;
}

/* One plane's costs (h x w, the mean over the views), the strip
 * kernel's blocks in turn. */
static void
strip_plane(ap_pstrip_block proto, const plane_views *pv, float *out)
{
    int r = proto.r, outputs = ap_pstrip_outputs(r);
    double *shared = malloc(ap_pstrip_shared(proto.cost, r));
    if (shared == NULL) {
        puts("FAIL: out of memory");
        exit(1);
    }
    for (size_t i = 0; i < ap_pstrip_shared(proto.cost, r) / sizeof(double); i++) {
        shared[i] = NAN;
    }
    ap_pstrip_shared_at at = ap_pstrip_layout(shared, proto.cost, r);
    for (int y0 = 0; y0 < proto.h; y0 += AP_PSTRIP_ROWS) {
        for (int bx = 0; bx * outputs < proto.w; bx++) {
            ap_pstrip_block b = proto;
            b.x0 = bx * outputs - 2 * r;
            b.y0 = y0;
            for (int i = 0; i < AP_PSTRIP_ROWS * outputs; i++) {
                at.acc[i] = 0.0f;
            }
            for (int v = 0; v < pv->views; v++) {
                /* each thread's column: its walk from no guess, its
                 * rings' slots and sums */
                ap_pstrip_column cols[AP_PSTRIP_COLS];
                for (int c = 0; c < AP_PSTRIP_COLS; c++) {
                    cols[c] = ap_pstrip_column_start(r);
                }
                b.img = pv->imgs[v];
                b.frame = pv->frames != NULL ? &pv->frames[v] : NULL;
                b.warped = pv->warped[v];
                for (int y = b.y0 - 2 * r; y < ap_pstrip_end(&b); y++) {
                    for (int k = 0; k < AP_PSTRIP_COLS; k++) {
                        int c = column(k, 0, AP_PSTRIP_COLS);
                        ap_pstrip_enter(&b, at, &cols[c], c, y);
                    }
                    if (y < b.y0) {
                        continue;
                    }
                    for (int k = r; k < AP_PSTRIP_COLS - r; k++) {
                        int c = column(k, r, AP_PSTRIP_COLS - r);
                        ap_pstrip_centre(&b, at, &cols[c], c, y);
                        if (b.taps == NULL && y - 2 * r >= b.y0) {
                            check_second(at, c, r);
                        }
                    }
                    for (int k = 2 * r;
                         y >= b.y0 + 2 * r && k < AP_PSTRIP_COLS - 2 * r;
                         k++) {
                        int c = column(k, 2 * r, AP_PSTRIP_COLS - 2 * r);
                        ap_pstrip_cost(&b, at, &cols[c], c, y);
                    }
                }
            }
            float scale = (float)(1.0 / pv->views);
            for (int i = 0; i < AP_PSTRIP_ROWS * outputs; i++) {
                int y = b.y0 + i / outputs, x = b.x0 + 2 * r + i % outputs;
                if (x < b.w && y < b.h) {
                    out[(size_t)y * b.w + x] = at.acc[i] * scale;
                }
            }
        }
    }
    free(shared);
}

/* ----------------------------------- the filterings, against whole windows */

/* The seen weight of pixel (x, y)'s window and its means of r m and s m,
 * the window summed whole with the taps' products as weights (taps NULL:
 * a box), as parity_sweep.cuh's three passes sum it. */
static double
whole_means(const float *ref, const double *warped, int h, int w, int x,
            int y, int r, const double *taps, double least, double *mr,
            double *ms)
{
    double n = 0.0, sr = 0.0, ss = 0.0;
    for (int i = 0; i <= 2 * r; i++) {
        for (int j = 0; j <= 2 * r; j++) {
            int yy = y + i - r, xx = x + j - r;
            if (xx < 0 || yy < 0 || xx >= w || yy >= h) {
                continue;
            }
            double s = warped[(size_t)yy * w + xx];
            if (s == s) {
                double g = taps != NULL ? taps[i] * taps[j] : 1.0;
                n += g;
                sr += g * ref[(size_t)yy * w + xx];
                ss += g * s;
            }
        }
    }
    double c = n < least ? least : n;
    *mr = sr / c;
    *ms = ss / c;
    return n;
}

/* Each pixel's window weight n and means (mr, ms) of one source. */
static void
whole_all_means(const float *ref, const double *warped, int h, int w,
                int r, int cost, const double *taps, double *n, double *mr,
                double *ms)
{
    double least = cost == AP_COST_SSIM ? AP_AQUAMVS_SSIM_LEAST
                                        : AP_AQUAMVS_NCC_LEAST;
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            size_t k = (size_t)y * w + x;
            n[k] = whole_means(ref, warped, h, w, x, y, r, taps, least,
                               &mr[k], &ms[k]);
        }
    }
}

/* Pixel (x, y)'s cost from every pixel's means, the centred products
 * summed whole. */
static double
whole_cost(const float *ref, const double *warped, int h, int w, int x,
           int y, int r, int cost, const double *taps, const double *n,
           const double *mr, const double *ms)
{
    double srr = 0.0, sss = 0.0, srs = 0.0;
    for (int i = 0; i <= 2 * r; i++) {
        for (int j = 0; j <= 2 * r; j++) {
            int yy = y + i - r, xx = x + j - r;
            if (xx < 0 || yy < 0 || xx >= w || yy >= h) {
                continue;
            }
            size_t k = (size_t)yy * w + xx;
            double s = warped[k];
            if (!(s == s)) {
                continue;       /* centred to 0 */
            }
            double rc = ref[k] - mr[k], sc = s - ms[k];
            double g = taps != NULL ? taps[i] * taps[j] : 1.0;
            srr += g * rc * rc;
            sss += g * sc * sc;
            srs += g * rc * sc;
        }
    }
    size_t k = (size_t)y * w + x;
    return cost == AP_COST_SSIM
        ? ap_aquamvs_ssim(n[k], mr[k], ms[k], srr, sss, srs)
        : ap_aquamvs_ncc(n[k], srr, sss, srs,
                         (double)((2 * r + 1) * (2 * r + 1) / 2));
}

/* Samples in [0, 1), some not seen: scattered (a share `scattered`),
 * in runs along rows, and every sample of a few whole rows. */
static void
warped_samples(uint64_t *s, double *img, int h, int w, double scattered)
{
    for (int i = 0; i < h * w; i++) {
        img[i] = uniform(s, 0.0, 1.0) < scattered ? NAN
                                                  : uniform(s, 0.0, 1.0);
    }
    for (int run = 0; run < h / 4; run++) {
        int y = (int)uniform(s, 0.0, h), x = (int)uniform(s, 0.0, w);
        int len = (int)uniform(s, 1.0, 40.0);
        for (int k = 0; k < len && x + k < w; k++) {
            img[(size_t)y * w + x + k] = NAN;
        }
    }
    int y = (int)uniform(s, 0.0, h);
    for (int x = 0; x < w; x++) {
        img[(size_t)y * w + x] = NAN;
    }
}

/* A patch of flat samples (0, as a source's zero padding is flat) under
 * the reference's random texture, where windows slide from texture onto
 * a variance of 0: a running sum down the column must neither keep the
 * rounding of the texture that left (check_second) nor fall below 0,
 * which would make the cost NaN. */
static void
flat_patch(double *img, int h, int w)
{
    for (int y = h / 3; y < 2 * h / 3; y++) {
        for (int x = w / 4; x < w / 2; x++) {
            size_t i = (size_t)y * w + x;
            img[i] = img[i] == img[i] ? 0.0 : img[i];
        }
    }
}

static int
filterings_against_whole(void)
{
    enum { H = 93, W = 141 };
    static float ref[H * W], got[H * W], again[H * W];
    static double warped[MAX_VIEWS][H * W], n[MAX_VIEWS][H * W];
    static double mr[MAX_VIEWS][H * W], ms[MAX_VIEWS][H * W];
    uint64_t seed = 0x4d595df4d0f33173ull;
    int failures = 0, order_failures = 0;
    double worst = 0.0;
    long costs = 0;
    for (int r = 1; r <= AP_PSTRIP_RADII; r++) {
        for (int cost = AP_COST_NCC; cost <= AP_COST_SSIM; cost++) {
            double taps[AP_MAX_WINDOW];
            ap_gauss_weights(r, taps);
            const double *weights = cost == AP_COST_SSIM ? taps : NULL;
            for (int i = 0; i < H * W; i++) {
                ref[i] = (float)uniform(&seed, 0.0, 1.0);
            }
            plane_views pv = {.views = 1 + (r + cost) % MAX_VIEWS};
            for (int v = 0; v < pv.views; v++) {
                warped_samples(&seed, warped[v], H, W, 0.03 * v);
                flat_patch(warped[v], H, W);
                pv.warped[v] = warped[v];
            }
            ap_pstrip_block b = {.ref = ref, .taps = weights, .h = H,
                                 .w = W, .cost = cost, .r = r};
            strip_plane(b, &pv, got);
            reversed = 1;
            strip_plane(b, &pv, again);
            reversed = 0;
            for (int i = 0; i < H * W; i++) {
                if (memcmp(&got[i], &again[i], sizeof(float)) != 0 &&
                    order_failures++ < 3) {
                    printf("FAIL: %s radius %d, pixel (%d, %d): %.9g with "
                           "the threads in order, %.9g in reverse\n",
                           cost == AP_COST_SSIM ? "SSIM" : "NCC", r, i % W,
                           i / W, got[i], again[i]);
                }
            }
            for (int v = 0; v < pv.views; v++) {
                whole_all_means(ref, warped[v], H, W, r, cost, weights,
                                n[v], mr[v], ms[v]);
            }
            for (int y = 0; y < H; y++) {
                for (int x = 0; x < W; x++) {
                    double want = 0.0;
                    for (int v = 0; v < pv.views; v++) {
                        want += whole_cost(ref, warped[v], H, W, x, y, r,
                                           cost, weights, n[v], mr[v],
                                           ms[v]);
                    }
                    want /= pv.views;
                    double off = fabs(got[y * W + x] - want);
                    worst = off > worst ? off : worst;
                    costs++;
                    if (!(off <= 1e-6) && failures++ < 3) {
                        printf("FAIL: %s radius %d, pixel (%d, %d): strip "
                               "%.9g, whole windows %.9g\n",
                               cost == AP_COST_SSIM ? "SSIM" : "NCC", r, x,
                               y, got[y * W + x], want);
                    }
                }
            }
        }
    }
    printf("gpu parity strip: %ld costs against their windows summed "
           "whole, worst %.3g; %d failures; %d not the same bits with the "
           "threads in reverse\n", costs, worst, failures, order_failures);
    printf("gpu parity strip: NCC's sliding sums of centred products "
           "against the ring summed afresh, worst %.3g; %ld past 1e-12 of "
           "the products' magnitude and 1e-24\n", second_worst,
           second_strays);
    return failures + order_failures + (second_strays > 0);
}

/* ------------------------------------------- the kernel, against the CPU */

enum { RH = 70, RW = 150, VIEWS = 3, DEPTHS = 3, RN = RH * RW };

/* One rig: its costs by the strip kernel against the CPU's. */
static int
compare_rig(uint64_t *seed, int refractive, int cost, int r, double *worst,
            long *compared)
{
    double water_z;
    ap_camera ref_cam, cams[VIEWS];
    if (random_rig(seed, refractive, RW, RH, VIEWS, &water_z, &ref_cam,
                   cams)) {
        return 1;
    }
    static double rays[AP_RAY_DOUBLES * RN];
    static float ref[RN], srcs[VIEWS * RN], cpu[RN * DEPTHS], got[RN];
    double depths[DEPTHS], taps[AP_MAX_WINDOW];
    rig_scene(seed, &ref_cam, RW, RH, VIEWS, water_z, DEPTHS, rays, ref,
              srcs, depths);
    ap_gauss_weights(r, taps);
    ap_sweep_args a = {.ref = ref, .srcs = srcs, .h = RH, .w = RW,
                       .n = VIEWS, .ref_cam = &ref_cam, .src_cams = cams,
                       .depths = depths, .d = DEPTHS, .first = 0,
                       .count = DEPTHS, .cost = cost, .window = 2 * r + 1,
                       .threads = 1, .parity = AP_PARITY_AQUAMVS};
    if (ap_aquamvs_cost_volume(&a, cpu) != 0) {
        puts("FAIL: the CPU's AquaMVS cost volume failed");
        return 1;
    }
    ap_gpu_frame frames[VIEWS];
    for (int v = 0; v < VIEWS; v++) {
        ap_gpu_frame_init(&frames[v], &cams[v]);
    }
    int failures = 0;
    for (int j = 0; j < DEPTHS; j++) {
        plane_views pv = {.views = VIEWS, .frames = frames};
        for (int v = 0; v < VIEWS; v++) {
            pv.imgs[v] = srcs + v * RN;
        }
        ap_pstrip_block b = {.ref = ref, .rays = rays, .h = RH, .w = RW,
                             .cost = cost, .r = r, .depth = depths[j],
                             .taps = cost == AP_COST_SSIM ? taps : NULL};
        strip_plane(b, &pv, got);
        for (int i = 0; i < RN; i++) {
            float want = cpu[(size_t)i * DEPTHS + j];
            double off = fabs((double)got[i] - want);
            *worst = off > *worst ? off : *worst;
            (*compared)++;
            if (!(off <= 1e-6) && failures++ < 3) {
                printf("FAIL: %s rig, %s radius %d, pixel (%d, %d), depth "
                       "%g: strip %.9g, CPU %.9g\n",
                       refractive ? "refractive" : "pinhole",
                       cost == AP_COST_SSIM ? "SSIM" : "NCC", r, i % RW,
                       i / RW, depths[j], got[i], want);
            }
        }
    }
    return failures;
}

static int
kernel_against_cpu(void)
{
    uint64_t seed = 0x6a09e667f3bcc909ull;
    static const int radii[] = {5, 1, 3, 7, 2, 4, 6};
    int failures = 0;
    double worst = 0.0;
    long compared = 0;
    for (int rig = 0; rig < 14; rig++) {
        int cost = rig % 2 ? AP_COST_SSIM : AP_COST_NCC;
        failures += compare_rig(&seed, rig % 3 != 2, cost, radii[rig % 7],
                                &worst, &compared);
    }
    printf("gpu parity strip: 14 rigs, %ld costs against the CPU's AquaMVS "
           "parity, worst %.3g; %d past 1e-6\n", compared, worst, failures);
    return failures;
}

int
main(void)
{
    int failures = filterings_against_whole();
    failures += kernel_against_cpu();
    return failures ? 1 : 0;
}
