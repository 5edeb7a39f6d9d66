/* Depth without the cost volume: a pixel's costs folded in a chunk of
 * planes at a time, in plane order, into what ap_extract_pixel
 * (csrc/mvs/cpu/extract_math.h) reads of them, so that the (H, W, D)
 * volume is never held. The cost kernels fill planes in any order (a
 * block a plane) and more than AP_GPU_VIEWS sources add to a plane over
 * several launches, so a plane's cost is final only once its launches
 * are done: the fold runs after them, over a chunk buffer of a few
 * planes, never inside the cost kernels. Written in C for the host too:
 * the CPU's depth_map folds its chunks with the same functions, and
 * tests/mvs/kernels/test_gpu_strip.c holds the fold to ap_extract_pixel
 * bit for bit. */
#ifndef AP_GPU_DEPTH_H
#define AP_GPU_DEPTH_H

#include <math.h>
#include <stddef.h>

#include "../cpu/extract_math.h"
#include "../geometry/host_device.h"

/* A pixel's fold so far: its costs' sum, added in plane order as
 * ap_extract_pixel adds them; the least cost, its plane (the first of
 * equals) and the costs of the planes either side of it (hi is the
 * latest plane's while the least is that plane's neighbour above); the
 * last plane's cost, which becomes lo when a later plane is less. 32
 * bytes: four doubles of the caller's scratch a pixel. */
typedef struct {
    double sum;
    float best, lo, hi, last;
    int at, spare;
} ap_depth_state;

#define AP_DEPTH_STATE_DOUBLES 4
#ifndef __cplusplus
_Static_assert(sizeof(ap_depth_state) == 8 * AP_DEPTH_STATE_DOUBLES,
               "a pixel's fold fills its doubles of scratch");
#endif

/* Folds planes [first, first + k) of a pixel, whose costs are c[0..k),
 * into s; first 0 starts s afresh. */
static inline AP_HD void
ap_depth_fold(ap_depth_state *s, const float *c, int k, int first)
{
    int j = 0;
    if (first == 0) {
        s->sum = 0.0;
        s->sum += c[0];
        s->best = c[0];
        s->lo = s->hi = NAN;
        s->last = c[0];
        s->at = 0;
        s->spare = 0;
        j = 1;
    }
    for (; j < k; j++) {
        int plane = first + j;
        float v = c[j];
        s->sum += v;
        if (plane == s->at + 1) {
            s->hi = v;
        }
        if (v < s->best) {
            s->lo = s->last;
            s->best = v;
            s->at = plane;
        }
        s->last = v;
    }
}

/* The depth and confidence of a pixel whose d planes s holds. */
static inline AP_HD void
ap_depth_finish(const ap_depth_state *s, int d, const double *depths,
                float *depth, float *confidence)
{
    int edge = s->at == 0 || s->at == d - 1;
    ap_extract_finish(s->at, d, s->sum, edge ? 0.0 : s->lo, s->best,
                      edge ? 0.0 : s->hi, depths, depth, confidence);
}

/* Pixel i's planes [first, first + k) of d, chunk[i stride + j] for j
 * below k, folded into state[i]; the last chunk writes the pixel's
 * depth and confidence instead. */
static inline AP_HD void
ap_depth_fold_pixel(const float *chunk, size_t i, int stride, int k,
                    int first, int d, const double *depths,
                    ap_depth_state *state, float *depth, float *confidence)
{
    /* set whole, for compilers that cannot see first 0 start it */
    ap_depth_state s = {0.0, 0.0f, 0.0f, 0.0f, 0.0f, 0, 0};
    if (first > 0) {
        s = state[i];
    }
    ap_depth_fold(&s, chunk + i * stride, k, first);
    if (first + k == d) {
        ap_depth_finish(&s, d, depths, depth + i, confidence + i);
    } else {
        state[i] = s;
    }
}

#endif
