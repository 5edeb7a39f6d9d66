/* The plane sweep's CUDA kernels: the same maths as the C kernels (the
 * camera, sampling, cost and extraction headers are shared), launched
 * through the driver API by csrc/module/mvs/cuda_sweep.c. Compiled by
 * nvcc into a fat binary that the extension embeds.
 *
 * The cost kernel is fused: a block owns a tile of output pixels of one
 * depth plane, warps each source view over the tile and its window halo
 * into shared memory, sums the window quantities there (columns, then
 * rows) and keeps the running cost in a register; the warped images
 * never reach global memory. Its twin ap_cost_planes_kernel reads them
 * from the planes ap_warp_planes_kernel warped first: each sample once,
 * not once for every tile that reads it. Unlike the CPU, which starts
 * Newton from a table, each sample of the fused kernel solves from the
 * paraxial guess, in float first and then in double (ap_project_fast):
 * ten double Newton steps a sample were about 40 % of the kernel's time,
 * and the result is the converged one. */
#include "camera_math.h"
#include "cost_math.h"
#include "cuda_sweep.h"
#include "extract_math.h"
#include "gpu_sample.h"
#include "warp_walk.h"

#define NQ 6

/* The ray table: six (h, w) planes, origin then direction, NaN origin
 * where the pixel has no ray. Rows from row0: a grid holds at most 65535
 * blocks down, so tall images take several launches. */
extern "C" __global__ void
ap_rays_kernel(ap_camera ref, int h, int w, int row0, double *rays)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = row0 + (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= w || y >= h) {
        return;
    }
    size_t n = (size_t)h * w, i = (size_t)y * w + x;
    double o[3], d[3];
    int ok = ap_cast(&ref, x, y, o, d);
    for (int k = 0; k < 3; k++) {
        rays[k * n + i] = ok ? o[k] : NAN;
        rays[(3 + k) * n + i] = ok ? d[k] : NAN;
    }
}

/* src seen from the point of ray i at depth: NaN where it is not seen */
static __device__ float
warp_sample(const double *rays, size_t n, size_t i, const ap_camera *cam,
            double depth, const float *img, int h, int w)
{
    double x[3], u, v;
    for (int k = 0; k < 3; k++) {
        x[k] = rays[k * n + i] + depth * rays[(3 + k) * n + i];
    }
    if (!(x[0] == x[0]) || !ap_project_fast(cam, x, &u, &v)) {
        return NAN;
    }
    return ap_bilinear(img, h, w, u, v);
}

/* The cost kernel's sample: src seen through its frame from the point
 * of ray i at depth (gpu_sample.h); NaN where it is not seen. */
static __device__ float
frame_sample(const double *rays, size_t n, size_t i, const ap_gpu_frame *f,
             double depth, const float *img, int h, int w)
{
    double x[3], u, v;
    for (int k = 0; k < 3; k++) {
        x[k] = rays[k * n + i] + depth * rays[(3 + k) * n + i];
    }
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
    out[i] = warp_sample(rays, (size_t)h * w, i, &src, depth, img, h, w);
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
    const double *rays = (const double *)p.rays;
    double o[3], d[3];
    for (int k = 0; k < 3; k++) {
        o[k] = rays[k * n + i];
        d[k] = rays[(3 + k) * n + i];
    }
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
                    ? frame_sample(rays, n, (size_t)y * p.w + x,
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

#include "aquamvs_sweep.cuh"
