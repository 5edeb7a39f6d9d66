/* The plane sweep's CUDA kernels: the same maths as the C kernels (the
 * camera, sampling, cost and extraction headers are shared), launched
 * through the driver API by csrc/mvs/cuda/cuda_sweep.c. Compiled by
 * nvcc into a fat binary that the extension embeds.
 *
 * The cost kernels are fused: the warped images never reach global
 * memory. Every cost takes a strip kernel (gpu_strip.h): a thread a
 * column walks down a strip of rows, warping each sample once a block;
 * box windows (NCC, SAD) slide their float64 window sums, SSIM's
 * Gaussian window is summed afresh at each row (gpu_ssim_strip.h). Every
 * cost where $AQUAPROF_MVS_GPU_WARP is "tile" takes the tile kernel: a
 * block owns a
 * tile of output pixels of one depth plane, warps each source view over
 * the tile and its window halo into shared memory, sums the window
 * quantities there (columns, then rows) and keeps the running cost in a
 * register. Its twin ap_cost_planes_kernel reads the tiles from the
 * planes ap_warp_planes_kernel warped first. Unlike the CPU, which
 * starts Newton from a table, the cost kernels' samples (gpu_sample.h)
 * solve from the paraxial guess, or in a strip from the rows above's. */
#include "cuda_sweep.h"
#include "gpu_depth.h"
#include "gpu_sample.h"
#include "gpu_ssim_strip.h"
#include "gpu_strip.h"
#include "../cpu/cost_math.h"
#include "../cpu/extract_math.h"
#include "../geometry/camera_math.h"
#include "../geometry/warp_walk.h"

#define NQ 6

/* The ray table (gpu_sample.h: a pixel's ray as six doubles side by
 * side, NaN origin where the pixel has no ray). Rows from row0: a grid
 * holds at most 65535 blocks down, so tall images take several
 * launches. */
extern "C" __global__ void
ap_rays_kernel(ap_camera ref, int h, int w, int row0, double *rays)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = row0 + (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= w || y >= h) {
        return;
    }
    double o[3], d[3];
    if (!ap_cast(&ref, x, y, o, d)) {
        o[0] = o[1] = o[2] = d[0] = d[1] = d[2] = NAN;
    }
    ap_ray_write(rays, (size_t)y * w + x, o, d);
}

/* src seen from the point of ray i at depth: NaN where it is not seen */
static __device__ float
warp_sample(const double *rays, size_t i, const ap_camera *cam,
            double depth, const float *img, int h, int w)
{
    double x[3], u, v;
    ap_ray_point(rays, i, depth, x);
    if (!(x[0] == x[0]) || !ap_project_fast(cam, x, &u, &v)) {
        return NAN;
    }
    return ap_bilinear(img, h, w, u, v);
}

/* The cost kernel's sample: src seen through its frame from the point
 * of ray i at depth (gpu_sample.h); NaN where it is not seen. */
static __device__ float
frame_sample(const double *rays, size_t i, const ap_gpu_frame *f,
             double depth, const float *img, int h, int w)
{
    double x[3], u, v;
    ap_ray_point(rays, i, depth, x);
    if (!(x[0] == x[0]) || !ap_gpu_uv(f, x, &u, &v)) {
        return NAN;
    }
    return ap_bilinear(img, h, w, u, v);
}

extern "C" __global__ void
ap_warp_kernel(const double *rays, int h, int w, int row0, ap_camera src,
               double depth, const float *img, float *out)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = row0 + (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= w || y >= h) {
        return;
    }
    size_t i = (size_t)y * w + x;
    out[i] = warp_sample(rays, i, &src, depth, img, h, w);
}

/* The launch's views warped once for planes [warp_first, warp_first +
 * planes), into warped, for ap_cost_planes_kernel to read its tiles
 * from, halos included: a thread walks one pixel's ray down the planes
 * for the view blockIdx.z, each crossing from the planes before's
 * (ap_crossing_walk). Rows from row0. */
extern "C" __global__ void
ap_warp_planes_kernel(ap_cuda_sweep p)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = p.row0 + (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= p.w || y >= p.h) {
        return;
    }
    const int v = blockIdx.z;
    const size_t n = (size_t)p.h * p.w, i = (size_t)y * p.w + x;
    double o[3], d[3];
    ap_ray_read((const double *)p.rays, i, o, d);
    ap_warp_walk(o, d, (const double *)p.depths + p.warp_first, p.planes,
                 &p.cams[v], (const float *)p.srcs + (size_t)v * n, p.h,
                 p.w, (float *)p.warped + (size_t)v * n + i,
                 (size_t)p.views * n);
}

/* The cost kernel's body, reading its tiles from p.warped (FROM_PLANES)
 * or warping them itself: two kernels, so that the one that reads holds
 * none of the warp's registers. */
template <bool FROM_PLANES>
static __device__ __forceinline__ void
cost_tiles(const ap_cuda_sweep &p)
{
    extern __shared__ double shared[];
    const int r = p.radius, tw = AP_GPU_TILE_X + 2 * r;
    const int th = AP_GPU_TILE_Y + 2 * r, tile = tw * th;
    double *cols = shared;                          /* NQ x TILE_Y x tw */
    float *ref_tile = (float *)(cols + NQ * AP_GPU_TILE_Y * tw);
    float *src_tile = ref_tile + tile;
    const int tid = threadIdx.y * AP_GPU_TILE_X + threadIdx.x;
    const int threads = AP_GPU_TILE_X * AP_GPU_TILE_Y;
    const int x0 = (int)blockIdx.x * AP_GPU_TILE_X - r;
    const int y0 = p.row0 + (int)blockIdx.y * AP_GPU_TILE_Y - r;
    const int plane = p.first + blockIdx.z;
    const double depth = ((const double *)p.depths)[plane];
    const size_t n = (size_t)p.h * p.w;
    const float *ref = (const float *)p.ref;
    const double *rays = (const double *)p.rays;
    const int box = p.cost != AP_COST_SSIM;
    const double full = box ? (double)(2 * r + 1) * (2 * r + 1) : 1.0;

    /* count: trips=spread((AP_GPU_TILE_X + 2 * radius) *
     * (AP_GPU_TILE_Y + 2 * radius), 512); step=512; part=sums */
    for (int i = tid; i < tile; i += threads) {
        int x = x0 + i % tw, y = y0 + i / tw;
        int inside = x >= 0 && y >= 0 && x < p.w && y < p.h;
        ref_tile[i] = inside ? ref[(size_t)y * p.w + x] : 0.0f;
    }
    /* the views' cameras prepared once a block */
    __shared__ ap_gpu_frame frames[FROM_PLANES ? 1 : AP_GPU_VIEWS];
    if (!FROM_PLANES && tid < p.views) {
        /* count: share=32 / (AP_GPU_TILE_X * AP_GPU_TILE_Y) */
        ap_gpu_frame_init(&frames[tid], &p.cams[tid]);
    }
    if (!FROM_PLANES) {
        __syncthreads();
    }
    double total = 0.0;
    /* count: trips=views; part=sums */
    for (int v = 0; v < p.views; v++) {
        const float *img = (const float *)p.srcs + (size_t)v * n;
        const float *warped = (const float *)p.warped +
                              ((size_t)(plane - p.warp_first) * p.views +
                               v) * n;
        /* count: trips=spread((AP_GPU_TILE_X + 2 * radius) *
         * (AP_GPU_TILE_Y + 2 * radius), 512); step=512; part=warp */
        for (int i = tid; i < tile; i += threads) {
            int x = x0 + i % tw, y = y0 + i / tw;
            int inside = x >= 0 && y >= 0 && x < p.w && y < p.h;
            if (FROM_PLANES) {
                src_tile[i] = inside ? warped[(size_t)y * p.w + x] : NAN;
            } else {
                src_tile[i] = inside
                    ? frame_sample(rays, (size_t)y * p.w + x,
                                   &frames[v], depth, img, p.h, p.w)
                    : NAN;   /* outside the image: not seen */
            }
        }
        __syncthreads();
        /* column sums over the window's rows, for every tile column */
        /* count: trips=spread(AP_GPU_TILE_Y * (AP_GPU_TILE_X + 2 * radius),
         * 512); step=512; part=sums */
        for (int i = tid; i < AP_GPU_TILE_Y * tw; i += threads) {
            int cy = i / tw, cx = i % tw;
            double q[NQ] = {0, 0, 0, 0, 0, 0};
            /* count: trips=window */
            for (int k = 0; k <= 2 * r; k++) {
                float s = src_tile[(cy + k) * tw + cx];
                double g = box ? 1.0 : p.gauss[k];
                if (s == s) {
                    double rv = ref_tile[(cy + k) * tw + cx];
                    double d = p.cost == AP_COST_SAD ? fabs(rv - s) : rv;
                    q[0] += g;
                    q[1] += g * d;
                    q[2] += g * s;
                    q[3] += g * rv * rv;
                    q[4] += g * (double)s * s;
                    q[5] += g * rv * s;
                }
            }
            for (int k = 0; k < NQ; k++) {
                cols[(k * AP_GPU_TILE_Y + cy) * tw + cx] = q[k];
            }
        }
        __syncthreads();
        /* this thread's pixel: the row sums of its window's columns */
        double q[NQ] = {0, 0, 0, 0, 0, 0};
        /* count: trips=window */
        for (int j = 0; j <= 2 * r; j++) {
            double g = box ? 1.0 : p.gauss[j];
            for (int k = 0; k < NQ; k++) {
                q[k] += g * cols[(k * AP_GPU_TILE_Y + threadIdx.y) * tw +
                                 threadIdx.x + j];
            }
        }
        total += p.cost == AP_COST_NCC
            ? ap_ncc_cost(full, q[0], q[1], q[2], q[3], q[4], q[5])
            : p.cost == AP_COST_SSIM
            ? ap_ssim_cost(full, q[0], q[1], q[2], q[3], q[4], q[5])
            : ap_sad_cost(full, q[0], q[1]);
        __syncthreads();   /* the tiles are rewritten for the next view */
    }
    int x = x0 + r + threadIdx.x, y = y0 + r + threadIdx.y;
    if (x < p.w && y < p.h) {
        float *out = (float *)p.out + ((size_t)y * p.w + x) * p.d + plane;
        *out = (float)(((p.add ? *out : 0.0f) + total) * p.scale);
    }
}

extern "C" __global__ void
__launch_bounds__(AP_GPU_TILE_X * AP_GPU_TILE_Y, AP_GPU_COST_BLOCKS)
ap_cost_kernel(ap_cuda_sweep p)
{
    /* count: kernel=ap_cost_kernel; per=views */
    cost_tiles<false>(p);
}

extern "C" __global__ void
__launch_bounds__(AP_GPU_TILE_X * AP_GPU_TILE_Y, AP_GPU_PLANES_BLOCKS)
ap_cost_planes_kernel(ap_cuda_sweep p)
{
    cost_tiles<true>(p);
}

/* This block's plane of the volume and its column of blocks
 * (ap_strip_place). */
static __device__ __forceinline__ int
strip_place(const ap_cuda_strip &p, int *column)
{
    int plane;
    ap_strip_place(blockIdx.x, blockIdx.z, p.planes, p.tiles_first, &plane,
                   column);
    return p.first + plane;
}

/* What a strip kernel's block shares but its sources' images and
 * frames: its place in the image, the plane's depth, the window. */
static __device__ __forceinline__ ap_strip_block
strip_block(const ap_cuda_strip &p, int cost, int r, int plane, int column)
{
    ap_strip_block b;
    b.ref = (const float *)p.ref;
    b.rays = (const double *)p.rays;
    b.taps = p.gauss;
    b.h = p.h;
    b.w = p.w;
    b.x0 = column * ap_strip_outputs(r) - r;
    b.y0 = p.row0 + (int)blockIdx.y * AP_STRIP_ROWS;
    b.cost = cost;
    b.r = r;
    b.depth = ((const double *)p.depths)[plane];
    b.full = cost == AP_COST_SSIM ? 1.0 : (double)(2 * r + 1) * (2 * r + 1);
    return b;
}

/* A strip kernel's accumulators (AP_STRIP_ROWS rows of its block's
 * outputs) set to 0. */
static __device__ __forceinline__ void
strip_zero(float *acc, int r)
{
    /* count: trips=spread(AP_STRIP_ROWS * (AP_STRIP_COLS - 2 * radius),
     * AP_STRIP_COLS); step=AP_STRIP_COLS */
    for (int i = threadIdx.x; i < AP_STRIP_ROWS * ap_strip_outputs(r);
         i += AP_STRIP_COLS) {
        acc[i] = 0.0f;
    }
}

/* A strip kernel's accumulated costs into the volume: added to what it
 * holds where p.add, times p.scale. */
static __device__ __forceinline__ void
strip_store(const ap_cuda_strip &p, const ap_strip_block &b,
            const float *acc, int plane)
{
    const int outputs = ap_strip_outputs(b.r);
    /* count: trips=spread(AP_STRIP_ROWS * (AP_STRIP_COLS - 2 * radius),
     * AP_STRIP_COLS); step=AP_STRIP_COLS */
    for (int i = threadIdx.x; i < AP_STRIP_ROWS * outputs;
         i += AP_STRIP_COLS) {
        int y = b.y0 + i / outputs, x = b.x0 + b.r + i % outputs;
        if (x < p.w && y < p.h) {
            float *out = (float *)p.out + ((size_t)y * p.w + x) * p.d +
                         plane;
            *out = ((p.add ? *out : 0.0f) + acc[i]) * p.scale;
        }
    }
}

/* Sources [v, v + N) of a strip kernel's block, warped at once: the
 * rows of the strip enter its threads' columns, and every
 * AP_STRIP_GROUP rows the block slides the windows along them. */
template <int COST, int R, int N>
static __device__ __forceinline__ void
strip_sources(const ap_cuda_strip &p, ap_strip_block &b,
              const ap_strip_shared_at &at, int v)
{
    const int r = b.r, c = threadIdx.x;
    ap_strip_sources(&b, N, v, (const float *)p.srcs, (size_t)p.h * p.w,
                     p.frames);
    ap_strip_column col;
    ap_strip_start(&col, at.ring, c, r, N);
    ap_strip_prologue(&b, &col, at.ring, c, N);
    AP_NO_UNROLL
    /* count: trips=AP_STRIP_ROWS / AP_STRIP_GROUP;
     * step=AP_STRIP_GROUP; part=sums */
    for (int row = 0; row < AP_STRIP_ROWS; row += AP_STRIP_GROUP) {
        ap_strip_down(&b, &col, at.ring, at.cols, c, row, N);
        __syncthreads();
        /* count: trips=spread(AP_STRIP_GROUP * ceil((AP_STRIP_COLS -
         * 2 * radius) / AP_STRIP_SEGMENT), AP_STRIP_COLS);
         * step=AP_STRIP_COLS; part=sums */
        for (int i = c; i < ap_strip_items(r); i += AP_STRIP_COLS) {
            ap_strip_along(&b, at.cols, at.acc, row, i, N);
        }
        __syncthreads();   /* the group's rows are rewritten next */
    }
}

/* The strip cost kernel (gpu_strip.h): a block of AP_STRIP_COLS threads,
 * one a column, down AP_STRIP_ROWS output rows of one plane, its sources
 * AP_STRIP_SOURCES at a time, then those left one at a time; the cost
 * kind and the radius are constants (R 0: the radius read at run time),
 * so that the window's loops unroll and the other costs' code is not
 * there. */
template <int COST, int R>
static __device__ __forceinline__ void
strip_costs(const ap_cuda_strip &p)
{
    /* count: kernel=ap_strip_[ns][ca]*; per=views * H * W / (ceil(W /
     * (AP_STRIP_COLS - 2 * radius)) * ceil(H / AP_STRIP_ROWS) *
     * AP_STRIP_COLS) */
    extern __shared__ double shared[];
    const int r = R > 0 ? R : p.radius;
    const ap_strip_shared_at at = ap_strip_layout(shared, COST, r);
    int column;
    const int plane = strip_place(p, &column);
    ap_strip_block b = strip_block(p, COST, r, plane, column);
    strip_zero(at.acc, r);
    __syncthreads();
    const int paired = ap_strip_paired(p.views);
    int v = 0;
    AP_NO_UNROLL
    /* count: trips=floor(views / AP_STRIP_SOURCES);
     * step=AP_STRIP_SOURCES; part=sums */
    for (; v < paired; v += AP_STRIP_SOURCES) {
        strip_sources<COST, R, AP_STRIP_SOURCES>(p, b, at, v);
    }
    if (AP_STRIP_SOURCES > 1) {
        AP_NO_UNROLL
        /* count: trips=views % AP_STRIP_SOURCES; part=sums */
        for (; v < p.views; v++) {
            strip_sources<COST, R, 1>(p, b, at, v);
        }
    }
    strip_store(p, b, at.acc, plane);
}

/* The strip kernels by name (csrc/mvs/cuda/cuda_driver.c loads them):
 * NCC at radii 1 to AP_STRIP_RADII and at any radius, SAD at any. */
#define AP_STRIP_KERNEL(name, cost, radius)                              \
    extern "C" __global__ void                                           \
    __launch_bounds__(AP_STRIP_COLS, AP_STRIP_BLOCKS)                    \
    name(ap_cuda_strip p)                                                \
    {                                                                    \
        strip_costs<cost, radius>(p);                                    \
    }

AP_STRIP_KERNEL(ap_strip_ncc_r1_kernel, AP_COST_NCC, 1)
AP_STRIP_KERNEL(ap_strip_ncc_r2_kernel, AP_COST_NCC, 2)
AP_STRIP_KERNEL(ap_strip_ncc_r3_kernel, AP_COST_NCC, 3)
AP_STRIP_KERNEL(ap_strip_ncc_r4_kernel, AP_COST_NCC, 4)
AP_STRIP_KERNEL(ap_strip_ncc_r5_kernel, AP_COST_NCC, 5)
AP_STRIP_KERNEL(ap_strip_ncc_r6_kernel, AP_COST_NCC, 6)
AP_STRIP_KERNEL(ap_strip_ncc_r7_kernel, AP_COST_NCC, 7)
AP_STRIP_KERNEL(ap_strip_ncc_kernel, AP_COST_NCC, 0)
AP_STRIP_KERNEL(ap_strip_sad_kernel, AP_COST_SAD, 0)

/* SSIM's strip kernel (gpu_ssim_strip.h): the same blocks, its Gaussian
 * window summed afresh down and along at each row. */
static __device__ __forceinline__ void
ssim_strip(const ap_cuda_strip &p)
{
    /* count: kernel=ap_strip_ssim_kernel; per=views * H * W / (ceil(W /
     * (AP_STRIP_COLS - 2 * radius)) * ceil(H / AP_STRIP_ROWS) *
     * AP_STRIP_COLS) */
    extern __shared__ double shared[];
    const int r = p.radius, c = threadIdx.x;
    const ap_sstrip_shared_at at = ap_sstrip_layout(shared, r);
    int column;
    const int plane = strip_place(p, &column);
    ap_strip_block b = strip_block(p, AP_COST_SSIM, r, plane, column);
    strip_zero(at.acc, r);
    const size_t n = (size_t)p.h * p.w;
    const int end = ap_sstrip_end(&b);
    AP_NO_UNROLL
    /* count: trips=views; part=sums */
    for (int v = 0; v < p.views; v++) {
        ap_strip_sources(&b, 1, v, (const float *)p.srcs, n, p.frames);
        ap_sstrip_column col;
        ap_sstrip_start(&col);
        AP_NO_UNROLL
        /* count: trips=H / ceil(H / AP_STRIP_ROWS) + 2 * radius */
        for (int y = b.y0 - r; y < end; y++) {
            ap_sstrip_enter(&b, at, &col, c, y);
            if (y < b.y0 + r) {
                continue;
            }
            __syncthreads();
            if (c >= r && c < AP_STRIP_COLS - r) {
                /* count: share=(H / ceil(H / AP_STRIP_ROWS)) / (H /
                 * ceil(H / AP_STRIP_ROWS) + 2 * radius) */
                ap_sstrip_cost(&b, at, c, y);
            }
            __syncthreads();
        }
    }
    strip_store(p, b, at.acc, plane);
}

extern "C" __global__ void
__launch_bounds__(AP_STRIP_COLS, AP_STRIP_BLOCKS)
ap_strip_ssim_kernel(ap_cuda_strip p)
{
    ssim_strip(p);
}

extern "C" __global__ void
ap_extract_kernel(const float *volume, int h, int w, int d,
                  const double *depths, float *depth, float *confidence)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)h * w) {
        return;
    }
    ap_extract_pixel(volume + i * d, d, depths, depth + i, confidence + i);
}

/* A chunk of k planes, [first, first + k) of d, folded into each
 * pixel's state (gpu_depth.h), after the cost launches that filled the
 * chunk: depth and confidence once the last plane is in. */
extern "C" __global__ void
ap_depth_fold_kernel(const float *chunk, int h, int w, int k, int first,
                     int d, const double *depths, ap_depth_state *state,
                     float *depth, float *confidence)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)h * w) {
        return;
    }
    ap_depth_fold_pixel(chunk, i, k, k, first, d, depths, state, depth,
                        confidence);
}

#include "parity_sweep.cuh"
