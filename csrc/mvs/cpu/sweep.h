/* Plane sweep on the CPU: warping, fused cost volumes, depth extraction.
 * Images are float32, row-major (H, W), values in [0, 1]; pixel (u, v) is
 * column u, row v, with pixel centres at integer coordinates. */
#ifndef AP_SWEEP_H
#define AP_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "../geometry/camera.h"

typedef enum { AP_COST_NCC = 0, AP_COST_SSIM = 1, AP_COST_SAD = 2 } ap_cost;
/* Whose costs: ours, or AquaMVS's (../parity/parity_costs.h; NCC and SSIM). */
typedef enum { AP_PARITY_TEXTBOOK = 0, AP_PARITY_AQUAMVS = 1 } ap_parity;

#define AP_MAX_WINDOW 63
#define AP_SSIM_SIGMA 1.5
#define AP_SSIM_C1 (0.01 * 0.01)
#define AP_SSIM_C2 (0.03 * 0.03)
/* Rows a worker takes of one depth plane: fixed, because sliding window
 * sums depend (in the last bits) on where they start. */
#define AP_SWEEP_BAND 128
/* Images hold at most this many pixels, so that a pixel's index is an
 * int (the CPU loops gather through int indices, the kernels index
 * with ints). */
#define AP_MAX_PIXELS 2147483647LL
/* Depth planes and source views are C ints too. */
#define AP_MAX_COUNT 2147483647LL
/* Below this variance a window has no texture to correlate: cost 1. */
#define AP_NCC_MIN_VARIANCE 1e-10

/* src resampled into the reference view at ray depth `depth`, bilinear;
 * NaN where the point is not seen. Returns 0, or -1 out of memory. */
int ap_warp(const float *src, int h, int w, const ap_camera *ref,
            const ap_camera *src_cam, double depth, float *out);

typedef struct {
    const float *ref;          /* (h, w), finite */
    const float *srcs;         /* (n, h, w) */
    int h, w, n;
    const ap_camera *ref_cam;
    const ap_camera *src_cams; /* n */
    const double *depths;      /* d, increasing */
    int d;
    int first, count;          /* the planes this call computes */
    ap_cost cost;
    int window;                /* odd, 3 .. AP_MAX_WINDOW */
    int threads;               /* >= 1 */
    ap_parity parity;          /* AP_PARITY_AQUAMVS: NCC or SSIM only */
    /* asked on the calling thread before each plane of a work item (a
     * band through up to 16 planes): nonzero stops the sweep, which then
     * returns AP_SWEEP_STOPPED; NULL: never asked */
    int (*stop)(void *ctx);
    void *stop_ctx;
} ap_sweep_args;

/* ap_cost_volume's status when args->stop said so: the planes asked for
 * are written in part. */
#define AP_SWEEP_STOPPED (-3)

/* Planes [first, first + count) of the cost volume (h, w, d) into out:
 * per pixel and depth, the mean over source views of the window cost.
 * Work is split into bands of AP_SWEEP_BAND rows of one depth plane,
 * whatever the thread count, so the result does not depend on threads,
 * nor on how the planes are split between calls.
 * Returns 0, -1 out of memory, -2 when a thread cannot start, or
 * AP_SWEEP_STOPPED. */
int ap_cost_volume(const ap_sweep_args *args, float *out);

/* SSIM's Gaussian window: 2 radius + 1 weights whose 2-D product sums
 * to 1. */
void ap_gauss_weights(int radius, double *gauss);

/* Winner-take-all with parabola refinement over a (h, w, d) volume.
 * depth NaN and confidence 0 at the first and last hypothesis, and where
 * a pixel's costs are not all finite (ap_extract_pixel). */
void ap_extract_depth(const float *volume, int h, int w, int d,
                      const double *depths, float *depth, float *confidence);

#endif
