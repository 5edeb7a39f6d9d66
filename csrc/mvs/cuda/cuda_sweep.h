/* What the CUDA kernels of the plane sweep take, shared by the kernels
 * (csrc/mvs/cuda/sweep.cu) and the C code that launches them. Plain C:
 * device pointers are integers here. */
#ifndef AP_CUDA_SWEEP_H
#define AP_CUDA_SWEEP_H

#include "gpu_sample.h"
#include "../cpu/sweep.h"
#include "../geometry/camera.h"

/* Source views per launch of the cost kernel: their cameras travel in
 * the kernel's parameters, which must stay under 4 KiB. More views take
 * more launches, each adding to the volume. */
#define AP_GPU_VIEWS 8
/* Output pixels of a block of the cost kernel, and blocks per SM it is
 * compiled for. Each block warps its tile's halo again: 32 x 16 warps
 * 2.1 samples an output at window 11 where 32 x 8 warped 3.0; two blocks
 * of 512 threads cap the registers at 64 and keep half the SM's warps
 * in flight. 32 x 8 at 76 registers took 175 ms for the 1200 x 1600,
 * 5 views, 128 depths volume on an H200, 32 x 16 takes 149 ms
 * (docs/benchmarks.md). */
#define AP_GPU_TILE_X 32
#define AP_GPU_TILE_Y 16
#define AP_GPU_COST_BLOCKS 2
/* The same for ap_cost_planes_kernel, which holds none of the warp's
 * registers: 2 gives it 64 registers, 3 would give 40 with 24 bytes
 * spilled. A variant to time (benchmarks/mvs/gpu_variants.sh). */
#ifndef AP_GPU_PLANES_BLOCKS
#define AP_GPU_PLANES_BLOCKS 2
#endif

typedef unsigned long long ap_devptr;

typedef struct {
    ap_devptr ref;      /* float (h, w) */
    ap_devptr srcs;     /* float (n, h, w): this launch's views */
    ap_devptr rays;     /* double (h, w, 6), from ap_rays_kernel
                         * (ap_ray_read) */
    ap_devptr depths;   /* double (d) */
    ap_devptr out;      /* float (h, w, d) */
    int h, w, d;
    int first;          /* planes [first, first + gridDim.z); AquaMVS
                         * parity's passes: the one plane */
    int row0;           /* blocks from this row down (a multiple of
                         * their rows, AP_GPU_TILE_Y or AP_STRIP_ROWS):
                         * grids hold 65535 blocks down */
    int views;          /* in this launch */
    int add;            /* add to out: a later launch of the same planes */
    float scale;        /* out = (out if add) + sum of costs, times scale */
    int cost, radius;
    ap_devptr scratch;  /* AquaMVS parity: double (views, 3, h, w) */
    ap_devptr warped;   /* 0, or float (planes, views, h, w): this
                         * launch's views at planes [warp_first,
                         * warp_first + planes), which the cost kernel
                         * reads where it would warp its tile */
    int warp_first, planes;
    double gauss[AP_MAX_WINDOW];        /* SSIM: 2 radius + 1 weights */
    ap_camera cams[AP_GPU_VIEWS];
} ap_cuda_sweep;

/* What the strip cost kernels take (gpu_strip.h, gpu_ssim_strip.h,
 * gpu_parity_strip.h): ap_cuda_sweep's buffers and sizes, and the views'
 * frames made on the host, so that they sit in the kernel's constant
 * bank, which barriers do not make it read again as they do shared
 * memory; planes [first, ...) placed by ap_strip_place. */
typedef struct {
    ap_devptr ref, srcs, rays, depths, out;
    int h, w, d, first, row0, views, add;
    float scale;
    int radius;
    int planes, tiles_first;    /* the launch's, ap_strip_place's */
    double gauss[AP_MAX_WINDOW];        /* SSIM: 2 radius + 1 weights */
    ap_gpu_frame frames[AP_GPU_VIEWS];
} ap_cuda_strip;

/* Dynamic shared memory of one block of the cost kernel. */
static inline unsigned
ap_cuda_sweep_shared(int radius)
{
    unsigned tw = AP_GPU_TILE_X + 2 * radius, th = AP_GPU_TILE_Y + 2 * radius;
    /* reference and warped tiles (float), six column sums (double) */
    return 2 * tw * th * 4u + 6u * AP_GPU_TILE_Y * tw * 8u;
}

#endif
