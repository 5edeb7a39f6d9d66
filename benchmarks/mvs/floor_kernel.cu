/* The instruction-issue floor of the NCC strip kernel: the least work an
 * output must do with the kernel's own maths, counted by
 * benchmarks/mvs/gpu_sass_count.py as it counts the kernel. Never
 * launched, and wrong where a real kernel must test: it assumes every
 * sample seen and inside its image, every crossing settled by the walk's
 * steps, every window textured and a reference whose window sums are
 * made once a frame (two doubles an output, read from `ref_sums`).
 *
 * What it keeps, because no kernel of this maths can drop it:
 * - the block of the strip kernel (AP_STRIP_COLS columns down
 *   AP_STRIP_ROWS rows, the halo's samples warped once a block), so that
 *   both pay the same share of samples an output;
 * - a sample: the ray's point at the plane, its depth below the surface
 *   and horizontal offset, AP_GPU_WALK_STEPS share steps from the line
 *   through the two rows above's, the interface point's homogeneous
 *   pixel, one refined reciprocal, the bilinear mix in float64;
 * - the sums: three float64 moments (s, s^2, r s) slid down the column
 *   (the leaving row's read back from a ring) and along the row, NCC in
 *   float32 from them and the reference's, each output's cost added and
 *   stored once. */
#include "../../csrc/mvs/cuda/gpu_sample.h"
#include "../../csrc/mvs/cuda/gpu_strip.h"
#include "../../csrc/mvs/cpu/cost_math.h"
#include "../../csrc/mvs/cuda/cuda_sweep.h"

#define FLOOR_NQ 3

typedef struct {
    const float *ref, *srcs;
    const double *rays, *depths, *ref_sums;   /* ref_sums: (h, w) of
                                               * (sum r, variance term) */
    float *out;
    int h, w, d;
    int views;
    ap_gpu_frame frames[AP_GPU_VIEWS];
} floor_params;

/* A column's three moments, its ring slot and its walk. */
typedef struct {
    double q[FLOOR_NQ];
    int slot;
    ap_walk walk;
} floor_column;

/* The sample of pixel i: its crossing from the walk, which moves on. */
static __device__ __forceinline__ float
floor_sample(const floor_params &p, const ap_gpu_frame *f, const float *img,
             double depth, ap_walk *walk, int i)
{
    double pt[3];
    ap_ray_point(p.rays, i, depth, pt);
    double z = f->below[3] - ap_dot3(f->below, pt);
    double hx = ap_row_apply(f->e1, pt, 1.0);
    double hy = ap_row_apply(f->e2, pt, 1.0);
    double d2 = hx * hx + hy * hy;
    double k = f->k2 * d2, a = f->a2 * z * z;
    double t = fma(2.0, walk->last, -walk->before);
    for (int s = 0; s < AP_GPU_WALK_STEPS; s++) {
        t = ap_gpu_share_newton(k, a, f->b, t);
    }
    walk->before = walk->last;
    walk->last = t;
    double qx = t * hx, qy = t * hy;
    double hu = f->A[0] + qx * f->A[1] + qy * f->A[2];
    double hv = f->A[3] + qx * f->A[4] + qy * f->A[5];
    double hw = f->A[6] + qx * f->A[7] + qy * f->A[8];
    double inv = ap_gpu_rcp(hw);
    double u = hu * inv, v = hv * inv;
    int x0 = (int)u, y0 = (int)v, at = y0 * p.w + x0;
    return (float)ap_bilinear_mix(img[at], img[at + 1], img[at + p.w],
                                  img[at + p.w + 1], u - x0, v - y0);
}

/* Row y's sample enters column c's window; the row 2 r + 1 above, kept
 * in the ring as (r, s), leaves. */
template <int R>
static __device__ __forceinline__ void
floor_enter(const floor_params &p, const ap_gpu_frame *f, const float *img,
            double depth, floor_column *col, float *ring, int x, int y,
            int c)
{
    int i = y * p.w + x;
    float ref = p.ref[i];
    /* count: part=warp */
    float s = floor_sample(p, f, img, depth, &col->walk, i);
    /* count: part=sums */
    float *old = ring + 2 * (col->slot * AP_STRIP_COLS + c);
    double rl = old[0], sl = old[1];
    col->q[0] += (double)s - sl;
    col->q[1] += (double)s * s - sl * sl;
    col->q[2] += (double)s * ref - sl * rl;
    old[0] = ref;
    old[1] = s;
    col->slot = col->slot == 2 * R ? 0 : col->slot + 1;
}

/* 1 - NCC of a whole, textured window: sums s of s, s^2, r s and the
 * reference's sum and variance term from its frame table. */
static __device__ __forceinline__ float
floor_ncc(double n, const double *s, double2 ref)
{
    double vs = n * s[1] - s[0] * s[0];
    double cov = n * s[2] - ref.x * s[0];
    float ncc = (float)cov * ap_strip_rsqrt((float)ref.y * (float)vs);
    ncc = ncc > 1.0f ? 1.0f : (ncc < -1.0f ? -1.0f : ncc);
    return 1.0f - ncc;
}

template <int R>
static __device__ __forceinline__ void
floor_costs(const floor_params &p)
{
    /* count: kernel=ap_floor_ncc_*; per=views * H * W / (ceil(W /
     * (AP_STRIP_COLS - 2 * radius)) * ceil(H / AP_STRIP_ROWS) *
     * AP_STRIP_COLS) */
    extern __shared__ double shared[];
    const int c = threadIdx.x, outputs = AP_STRIP_COLS - 2 * R;
    const int stride = AP_STRIP_COLS * FLOOR_NQ + 2;
    double *cols = shared;
    float *ring = (float *)(cols + AP_STRIP_GROUP * stride);
    float *acc = ring + 2 * (2 * R + 1) * AP_STRIP_COLS;
    const int x0 = (int)blockIdx.x * outputs - R;
    const int y0 = (int)blockIdx.y * AP_STRIP_ROWS;
    const double depth = p.depths[blockIdx.z], n = (2 * R + 1) * (2 * R + 1);
    const int x = x0 + c;
    /* count: trips=spread(AP_STRIP_ROWS * (AP_STRIP_COLS - 2 * radius),
     * AP_STRIP_COLS); step=AP_STRIP_COLS */
    for (int i = c; i < AP_STRIP_ROWS * outputs; i += AP_STRIP_COLS) {
        acc[i] = 0.0f;
    }
    __syncthreads();
    const size_t pixels = (size_t)p.h * p.w;
    _Pragma("unroll 1")
    /* count: trips=views; part=sums */
    for (int v = 0; v < p.views; v++) {
        const float *img = p.srcs + (size_t)v * pixels;
        asm("mov.b64 %0, %0;" : "+l"(img));
        const ap_gpu_frame *f = &p.frames[v];
        floor_column col = {{0, 0, 0}, 0, {0.5, 0.5}};
        /* count: trips=2 * radius + 1; part=sums */
        for (int k = 0; k <= 2 * R; k++) {
            ring[2 * (k * AP_STRIP_COLS + c)] = 0.0f;
            ring[2 * (k * AP_STRIP_COLS + c) + 1] = 0.0f;
        }
        _Pragma("unroll 1")
        /* count: trips=2 * radius */
        for (int j = 0; j < 2 * R; j++) {
            floor_enter<R>(p, f, img, depth, &col, ring, x, y0 - R + j, c);
        }
        _Pragma("unroll 1")
        /* count: trips=AP_STRIP_ROWS / AP_STRIP_GROUP;
         * step=AP_STRIP_GROUP; part=sums */
        for (int row = 0; row < AP_STRIP_ROWS; row += AP_STRIP_GROUP) {
            /* count: trips=AP_STRIP_GROUP */
            for (int k = 0; k < AP_STRIP_GROUP; k++) {
                floor_enter<R>(p, f, img, depth, &col, ring, x,
                               y0 + row + k + R, c);
                for (int q = 0; q < FLOOR_NQ; q++) {
                    cols[k * stride + c * FLOOR_NQ + q] = col.q[q];
                }
            }
            __syncthreads();
            /* count: trips=spread(AP_STRIP_GROUP * ceil((AP_STRIP_COLS -
             * 2 * radius) / AP_STRIP_SEGMENT), AP_STRIP_COLS);
             * step=AP_STRIP_COLS; part=sums */
            for (int i = c; i < AP_STRIP_GROUP * ((outputs +
                     AP_STRIP_SEGMENT - 1) / AP_STRIP_SEGMENT);
                 i += AP_STRIP_COLS) {
                int k = i % AP_STRIP_GROUP;
                int first = i / AP_STRIP_GROUP * AP_STRIP_SEGMENT;
                const double *at = cols + k * stride + first * FLOOR_NQ;
                float *out = acc + (row + k) * outputs + first;
                const double2 *refs = (const double2 *)p.ref_sums +
                    (size_t)(y0 + row + k) * p.w + x0 + R + first;
                double s[FLOOR_NQ] = {0, 0, 0};
                /* count: trips=window; part=sums */
                for (int j = 0; j <= 2 * R; j++) {
                    for (int q = 0; q < FLOOR_NQ; q++) {
                        s[q] += at[j * FLOOR_NQ + q];
                    }
                }
                _Pragma("unroll")
                /* count: trips=AP_STRIP_SEGMENT; part=sums */
                for (int j = 0; j < AP_STRIP_SEGMENT; j++) {
                    if (j > 0) {
                        for (int q = 0; q < FLOOR_NQ; q++) {
                            s[q] += at[(j + 2 * R) * FLOOR_NQ + q] -
                                    at[(j - 1) * FLOOR_NQ + q];
                        }
                    }
                    out[j] += floor_ncc(n, s, refs[j]);
                }
            }
            __syncthreads();
        }
    }
    /* count: trips=spread(AP_STRIP_ROWS * (AP_STRIP_COLS - 2 * radius),
     * AP_STRIP_COLS); step=AP_STRIP_COLS */
    for (int i = c; i < AP_STRIP_ROWS * outputs; i += AP_STRIP_COLS) {
        int y = y0 + i / outputs, xo = x0 + R + i % outputs;
        p.out[((size_t)y * p.w + xo) * p.d + blockIdx.z] = acc[i];
    }
}

/* The floor at each radius of a strip kernel of its own (windows 3 to
 * 15), as ap_floor_ncc_rN_kernel. */
#define FLOOR_KERNEL(radius)                                             \
    extern "C" __global__ void                                           \
    __launch_bounds__(AP_STRIP_COLS, AP_STRIP_BLOCKS)                    \
    ap_floor_ncc_r##radius##_kernel(floor_params p)                      \
    {                                                                    \
        floor_costs<radius>(p);                                          \
    }

FLOOR_KERNEL(1)
FLOOR_KERNEL(2)
FLOOR_KERNEL(3)
FLOOR_KERNEL(4)
FLOOR_KERNEL(5)
FLOOR_KERNEL(6)
FLOOR_KERNEL(7)
