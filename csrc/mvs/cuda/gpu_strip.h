/* The strip cost kernel's work, a thread's at a time: a block of
 * AP_STRIP_COLS threads, one a column of the reference (its window's
 * halo included), walks down a strip of AP_STRIP_ROWS output rows of one
 * depth plane, each source in turn (AP_STRIP_SOURCES at once). Each
 * thread warps the sample entering its column's window, its refracted
 * crossing found from the two rows above's (ap_gpu_share_walk), and
 * slides the column's sums in float64: the entering row added, the
 * leaving one, read back from a ring of the window's values, taken out.
 * Every AP_STRIP_GROUP rows the block's column sums meet in shared
 * memory and a thread slides a window along AP_STRIP_SEGMENT outputs of
 * one of those rows, adding their costs to the block's accumulators.
 * Every sample is warped once a block: 1.25 samples an output at window
 * 11 (1.31 at 1600 x 1200, whose last blocks are part outside), where
 * the tile kernel warps 2.19.
 *
 * Float64, because a uniform window's variance (n sum s^2 - (sum s)^2)
 * is below float32's resolution; float32 only once the differences are
 * formed (ap_strip_ncc). Box windows only (NCC, SAD): SSIM's Gaussian
 * window does not slide (gpu_ssim_strip.h sums it afresh in the same
 * blocks). Written in C for the host too, so that
 * tests/mvs/kernels/test_gpu_strip.c runs a block's threads in turn, against
 * sums made afresh and against the CPU path; csrc/mvs/cuda/sweep.cu calls
 * these with the cost and the radius as template constants. */
#ifndef AP_GPU_STRIP_H
#define AP_GPU_STRIP_H

#include <math.h>
#include <stddef.h>

#include "gpu_sample.h"
#include "../cpu/cost_math.h"
#include "../cpu/sweep.h"
#include "../geometry/host_device.h"

/* Threads (columns, halo included) and output rows of a block, the
 * rows between two passes along the rows, and the outputs a thread
 * slides its window along in such a pass (the window summed afresh once
 * a segment, then slid a column at a time; at 16 the pass over 4 rows
 * of 118 outputs is one warp's). 128 x 64 holds 65 KiB of shared memory
 * at NCC's window 11 with one source a thread (ap_strip_shared): three
 * blocks an SM. The launcher (csrc/mvs/cuda/cuda_sweep.c) sizes its
 * grids and shared memory from these, so a variant to time sets the
 * rows, the group and the segment for both compilers: setup.py passes
 * $AQUAPROF_NVCC_FLAGS's -D macros to the launcher's C too
 * (benchmarks/mvs/gpu_variants.sh). */
#define AP_STRIP_COLS 128
#ifndef AP_STRIP_ROWS
#define AP_STRIP_ROWS 64
#endif
#ifndef AP_STRIP_GROUP
#define AP_STRIP_GROUP 4
#endif
#ifndef AP_STRIP_SEGMENT
#define AP_STRIP_SEGMENT 16
#endif
/* blocks an SM the kernels' registers are capped for (kernel-side only:
 * a variant may come from $AQUAPROF_NVCC_FLAGS) */
#ifndef AP_STRIP_BLOCKS
#define AP_STRIP_BLOCKS 3
#endif
/* 1: a thread reads the next row's ray and reference value a row
 * ahead, into registers, so that their loads are in flight while it
 * warps the row before (a variant to time: the kernel waits on latency,
 * docs/benchmarks.md; three blocks an SM leave it the registers). */
#ifndef AP_STRIP_AHEAD
#define AP_STRIP_AHEAD 0
#endif
/* Sources a thread warps at once, side by side (ap_strip_warps): each
 * sample is a chain of dependent float64 steps, and at three blocks an
 * SM the kernel waits on them (docs/benchmarks.md), so that a second
 * source's chain fills the first's waits; the sources share the ray's
 * and the reference's loads and a pass down the strip. A variant to
 * time: each source keeps its own sums in registers and in shared
 * memory. */
#ifndef AP_STRIP_SOURCES
#define AP_STRIP_SOURCES 1
#endif
#if AP_STRIP_SOURCES < 1
#error "a thread warps one source at least"
#endif
/* Radii with a kernel of their own (windows 3 to 15); wider windows take
 * the kernel that reads the radius at run time. */
#define AP_STRIP_RADII 7

#ifdef __CUDACC__
#define AP_STRIP_FN static __forceinline__ AP_HD
#define AP_NO_UNROLL _Pragma("unroll 1")
#define AP_UNROLL _Pragma("unroll")
#else
#define AP_STRIP_FN static inline
#define AP_NO_UNROLL
#define AP_UNROLL
#endif

#if AP_STRIP_ROWS % AP_STRIP_GROUP != 0
#error "a strip must be a whole number of groups of rows"
#endif
#if AP_STRIP_SEGMENT < 1
#error "a segment holds an output at least"
#endif
#if AP_STRIP_COLS <= AP_MAX_WINDOW
#error "a block must have a column of outputs at the widest window"
#endif

/* The grids of the strip kernels (csrc/mvs/cuda/cuda_sweep.c launches
 * them, the kernels place their blocks by ap_strip_place), row strips
 * down the grid's y either way. Planes first (the default): x holds a
 * launch's planes times its columns of blocks, the planes varying
 * fastest, so that the blocks of one tile at every plane run side by
 * side. Then the rays of a tile's reference pixels (48 bytes a sample,
 * 92 MB at 1200 x 1600, more than an L2) come from memory once for all
 * planes and sources, not once a plane and source, and the 8 planes
 * that share a 32-byte sector of the (H, W, D) volume are written
 * together (figures: docs/benchmarks.md). Tiles first ($AQUAPROF_MVS_
 * GPU_ORDER=tiles, kept to time against): x the columns and z the
 * planes, a plane's blocks at a time, the order before. */

/* The planes of `count` that one strip launch holds: within a grid's x
 * of 2^31 - 1 blocks planes first, its z of 65535 tiles first. */
AP_STRIP_FN int
ap_strip_launch_planes(int count, int columns, int tiles_first)
{
    int most = tiles_first ? 65535 : 0x7fffffff / columns;
    return count < most ? count : most;
}

/* The grid's x and z of a launch of `planes` planes, `columns` blocks
 * across. */
AP_STRIP_FN void
ap_strip_grid(int planes, int columns, int tiles_first, unsigned *x,
              unsigned *z)
{
    *x = tiles_first ? (unsigned)columns
                     : (unsigned)planes * (unsigned)columns;
    *z = tiles_first ? (unsigned)planes : 1u;
}

/* The plane of the launch and the column of blocks of the block at
 * grid x and z in a launch of `planes` planes. */
AP_STRIP_FN void
ap_strip_place(unsigned x, unsigned z, int planes, int tiles_first,
               int *plane, int *column)
{
    if (tiles_first) {
        *column = (int)x;
        *plane = (int)z;
    } else {
        *plane = (int)(x % (unsigned)planes);
        *column = (int)(x / (unsigned)planes);
    }
}

/* The column sums a cost keeps: NCC the count of seen samples and r, s,
 * r^2, s^2, r s (reference, warped); SAD the count and |r - s|. */
AP_STRIP_FN int
ap_strip_nq(int cost)
{
    return cost == AP_COST_SAD ? 2 : 6;
}

/* Output columns of a block. */
AP_STRIP_FN int
ap_strip_outputs(int r)
{
    return AP_STRIP_COLS - 2 * r;
}

/* Doubles of a group row of column sums: nq a column, then two more, so
 * that the group's rows at the same column, which a quarter warp's
 * threads read together, start four banks apart. */
AP_STRIP_FN int
ap_strip_stride(int cost)
{
    return AP_STRIP_COLS * ap_strip_nq(cost) + 2;
}

/* The block's shared memory: the column sums of a group of rows for
 * each of the sources a thread warps at once (doubles), the ring of the
 * window's rows (a float pair a source, column and row: reference,
 * warped) and the outputs' accumulated costs. */
typedef struct {
    double *cols;
    float *ring, *acc;
} ap_strip_shared_at;

AP_STRIP_FN unsigned
ap_strip_shared(int cost, int r)
{
    return (unsigned)(AP_STRIP_SOURCES * AP_STRIP_GROUP *
                          ap_strip_stride(cost) * 8 +
                      AP_STRIP_SOURCES * (2 * r + 1) * AP_STRIP_COLS * 8 +
                      AP_STRIP_ROWS * ap_strip_outputs(r) * 4);
}

AP_STRIP_FN ap_strip_shared_at
ap_strip_layout(double *base, int cost, int r)
{
    ap_strip_shared_at at;
    at.cols = base;
    at.ring = (float *)(base + AP_STRIP_SOURCES * AP_STRIP_GROUP *
                                   ap_strip_stride(cost));
    at.acc = at.ring + 2 * AP_STRIP_SOURCES * (2 * r + 1) * AP_STRIP_COLS;
    return at;
}

/* Column c's pair of ring floats of source k at slot `slot`: the
 * reference's value and the sample, as they count in the sums. */
AP_STRIP_FN float *
ap_strip_ring(float *ring, int r, int k, int slot, int c)
{
    return ring + 2 * ((k * (2 * r + 1) + slot) * AP_STRIP_COLS + c);
}

/* What a block's threads share for the sources they warp at once: the
 * images, the rays of the reference's pixels (ap_ray_read), the
 * sources' frames and the plane's depth; x0, y0: the image column of
 * thread 0 (r left of the first output) and the first output row;
 * `refracted`: every source of the pass refractive, so that their
 * samples are warped side by side (ap_strip_warps); SSIM's window taps
 * (gpu_ssim_strip.h), whose kernel warps one source at a time. */
typedef struct {
    const float *ref, *img[AP_STRIP_SOURCES];
    const double *rays, *taps;
    const ap_gpu_frame *frame[AP_STRIP_SOURCES];
    int h, w, x0, y0, cost, r, refracted;
    double depth, full;
#ifndef __CUDA_ARCH__
    /* the host's tests of the sums: warped[0] not NULL, each source's
     * samples themselves (h x w), read instead of warped */
    const float *warped[AP_STRIP_SOURCES];
#endif
} ap_strip_block;

/* What the samples of a row read of its reference pixel: its value, or
 * nothing (`inside` 0) outside the image; with AP_STRIP_AHEAD, read a
 * row ahead, its ray too (origin, direction; NaN where it has none),
 * which the samples otherwise read as they warp. */
typedef struct {
    double o[3], d[3];
    float ref;
    int inside;
} ap_strip_pixel;

/* A thread's column: for each source of the pass, its sums over the
 * window's rows (the count's made from `seen`, a bit a row, the newest
 * lowest) and the crossings of the rows above; the ring's slot of the
 * row that leaves next; with AP_STRIP_AHEAD, the next row's pixel, once
 * read (`primed`). */
typedef struct {
    double q[AP_STRIP_SOURCES][6];
    unsigned long long seen[AP_STRIP_SOURCES];
    int slot;
    ap_walk walk[AP_STRIP_SOURCES];
#if AP_STRIP_AHEAD
    ap_strip_pixel ahead;
    int primed;
#endif
} ap_strip_column;

/* The block's pass over sources [v, v + n) of `frames` (srcs: each
 * source's `pixels` floats in turn): their images and frames, and
 * whether every one is refractive, so that ap_strip_warps warps them
 * side by side. No frames: the host's tests of the sums. */
AP_STRIP_FN void
ap_strip_sources(ap_strip_block *b, int n, int v, const float *srcs,
                 size_t pixels, const ap_gpu_frame *frames)
{
    b->refracted = frames != NULL;
    for (int k = 0; k < n; k++) {
        b->img[k] = srcs == NULL ? NULL : srcs + (size_t)(v + k) * pixels;
#ifdef __CUDA_ARCH__
        /* one register, so that each sample adds its 32-bit index to it
         * (nvcc would fold v n into every index, in 64 bits) */
        asm("mov.b64 %0, %0;" : "+l"(b->img[k]));
#endif
        b->frame[k] = frames == NULL ? NULL : &frames[v + k];
        b->refracted &= frames != NULL && frames[v + k].refractive;
    }
}

/* The sources a strip kernel's block warps in passes of
 * AP_STRIP_SOURCES, of `views`: those after are warped one a pass. */
AP_STRIP_FN int
ap_strip_paired(int views)
{
    return views - views % AP_STRIP_SOURCES;
}

/* Source k's sample at the point p of a reference pixel's ray: NaN
 * where the pixel has no ray or the source does not see it. A
 * refractive crossing from the walk down the column (ap_gpu_uv_with). */
AP_STRIP_FN float
ap_strip_warp(const ap_strip_block *b, int k, const double *p,
              ap_walk *walk)
{
    double u, v;
    if (!(p[0] == p[0]) || !ap_gpu_uv_with(b->frame[k], p, &u, &v, walk)) {
        return NAN;
    }
    return ap_bilinear(b->img[k], b->h, b->w, u, v);
}

/* Reference pixel (x, y) of the block, read for its samples. */
AP_STRIP_FN ap_strip_pixel
ap_strip_read(const ap_strip_block *b, int x, int y)
{
    ap_strip_pixel px;
    px.inside = x >= 0 && y >= 0 && x < b->w && y < b->h;
    px.ref = 0.0f;
    int i = y * b->w + x;
#ifndef __CUDA_ARCH__
    if (b->warped[0] != NULL) { /* the host's tests of the sums: no rays */
        for (int k = 0; k < 3; k++) {
            px.o[k] = px.d[k] = NAN;
        }
        px.ref = px.inside ? b->ref[i] : 0.0f;
        return px;
    }
#endif
    if (px.inside) {
        px.ref = b->ref[i];
#if AP_STRIP_AHEAD
        ap_ray_read(b->rays, (size_t)i, px.o, px.d);
#endif
    }
    return px;
}

/* The samples s[0, n) of the pass's sources at reference pixel (x, y),
 * read as px, each crossing from its source's walk. Two or more
 * refractive sources: each source's crossing found, then settled where
 * the walk's steps did not, then its pixel and sample, the sources side
 * by side with no branch between them, so that the latency of one
 * source's chain of float64 steps is spent on the other's. */
AP_STRIP_FN void
ap_strip_warps(const ap_strip_block *b, int n, const ap_strip_pixel *px,
               int x, int y, ap_walk *walk, float *s)
{
    if (!px->inside) {
        for (int k = 0; k < n; k++) {
            s[k] = NAN;
        }
        return;
    }
#ifndef __CUDA_ARCH__
    if (b->warped[0] != NULL) {
        for (int k = 0; k < n; k++) {
            s[k] = b->warped[k][y * b->w + x];
        }
        return;
    }
#endif
    double p[3];
#if AP_STRIP_AHEAD
    for (int j = 0; j < 3; j++) {
        p[j] = px->o[j] + b->depth * px->d[j];
    }
#else
    ap_ray_point(b->rays, y * b->w + x, b->depth, p);
#endif
    /* one source, and the rigs with a pinhole (off the count's path),
     * take the same per-source warp, written twice for the count */
    if (n == 1) {
        s[0] = ap_strip_warp(b, 0, p, &walk[0]);
        return;
    }
    if (!b->refracted) {
        for (int k = 0; k < n; k++) {
            /* count: off-path */
            s[k] = ap_strip_warp(b, k, p, &walk[k]);
        }
        return;
    }
    ap_gpu_crossing c[AP_STRIP_SOURCES];
    AP_UNROLL
    for (int k = 0; k < n; k++) {
        /* NaN where the pixel has no ray: not seen */
        c[k] = ap_gpu_cross_walk(b->frame[k], p, &walk[k]);
    }
    AP_UNROLL
    for (int k = 0; k < n; k++) {
        ap_gpu_cross_settle(b->frame[k], &c[k]);
    }
    AP_UNROLL
    for (int k = 0; k < n; k++) {
        ap_walk on = walk[k];
        ap_gpu_walk_on(&on, c[k].t);
        walk[k] = c[k].seen ? on : walk[k];     /* not seen: not moved */
        double hu, hv, hw, zc, u, v;
        ap_gpu_cross_point(b->frame[k], &c[k], &hu, &hv, &hw, &zc);
        ap_gpu_pixel(hu, hv, hw, &u, &v);
        int seen = c[k].seen & (zc > 0);
        s[k] = ap_bilinear(b->img[k], b->h, b->w, seen ? u : NAN, v);
    }
}

/* Adds weight (1: entering, -1: leaving) times the quantities of a
 * sample whose values are r and v (both 0 where it is not seen) to a
 * column's sums, all but the count (ap_strip_count). */
AP_STRIP_FN void
ap_strip_add(double *q, int cost, double r, double v, double weight)
{
    if (cost == AP_COST_SAD) {
        q[1] += weight * fabs(r - v);
        return;
    }
    double wr = weight * r, wv = weight * v;
    q[1] += wr;
    q[2] += wv;
    q[3] += wr * r;
    q[4] += wv * v;
    q[5] += wv * r;
}

/* A thread's column before the first row of a pass of n sources: no
 * sums, the ring's rows not seen. */
AP_STRIP_FN void
ap_strip_start(ap_strip_column *col, float *ring, int c, int r, int n)
{
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < 6; j++) {
            col->q[k][j] = 0.0;
        }
        col->seen[k] = 0;
        col->walk[k] = ap_walk_none();
    }
    col->slot = 0;
#if AP_STRIP_AHEAD
    col->primed = 0;
#endif
    /* count: trips=2 * radius + 1; part=sums */
    for (int j = 0; j <= 2 * r; j++) {
        for (int k = 0; k < n; k++) {
            float *at = ap_strip_ring(ring, r, k, j, c);
            at[0] = at[1] = 0.0f;
        }
    }
}

/* The count of seen samples among the window's rows of a column: the
 * bits of `seen`, a row each. */
AP_STRIP_FN double
ap_strip_count(unsigned long long seen)
{
#ifdef __CUDA_ARCH__
    return (double)__popcll(seen);
#else
    return (double)__builtin_popcountll(seen);
#endif
}

/* Reference value ref and the samples s[0, n) enter column c's window
 * and the row 2 r + 1 above leaves it. The ring keeps each row's
 * reference value and sample of each source as they count in its sums,
 * 0 where not seen, so that the leaving row's quantities come back
 * without a test. */
AP_STRIP_FN void
ap_strip_slide(ap_strip_column *col, float *ring, int c, int cost, int r,
               float ref, const float *s, int n)
{
    /* the window's 2 r + 1 rows, the newest in the lowest bit */
    unsigned long long rows = (2ull << (2 * r)) - 1;
    for (int k = 0; k < n; k++) {
        float *at = ap_strip_ring(ring, r, k, col->slot, c);
        int seen = s[k] == s[k];
        float rs = seen ? ref : 0.0f, vs = seen ? s[k] : 0.0f;
        ap_strip_add(col->q[k], cost, at[0], at[1], -1.0);
        ap_strip_add(col->q[k], cost, rs, vs, 1.0);
        at[0] = rs;
        at[1] = vs;
        col->seen[k] = ((col->seen[k] << 1) | (unsigned)seen) & rows;
    }
    col->slot = col->slot == 2 * r ? 0 : col->slot + 1;
}

/* Row y enters column c's window of each of the pass's n sources: its
 * reference value (0 outside the image) and samples. */
AP_STRIP_FN void
ap_strip_enter(const ap_strip_block *b, ap_strip_column *col, float *ring,
               int c, int y, int n)
{
    int x = b->x0 + c;
#if AP_STRIP_AHEAD
    ap_strip_pixel px = col->primed ? col->ahead : ap_strip_read(b, x, y);
    col->ahead = ap_strip_read(b, x, y + 1);
    col->primed = 1;
#else
    ap_strip_pixel px = ap_strip_read(b, x, y);
#endif
    float s[AP_STRIP_SOURCES];
    /* count: part=warp */
    ap_strip_warps(b, n, &px, x, y, col->walk, s);
    /* count: part=sums */
    ap_strip_slide(col, ring, c, b->cost, b->r, px.ref, s, n);
}

/* The 2 r rows above the strip's first output row, into column c. */
AP_STRIP_FN void
ap_strip_prologue(const ap_strip_block *b, ap_strip_column *col,
                  float *ring, int c, int n)
{
    AP_NO_UNROLL
    /* count: trips=2 * radius */
    for (int j = 0; j < 2 * b->r; j++) {
        ap_strip_enter(b, col, ring, c, b->y0 - b->r + j, n);
    }
}

/* Where column c's sums of source k at group row `row` start in cols. */
AP_STRIP_FN int
ap_strip_cols(int cost, int k, int row, int c)
{
    return (k * AP_STRIP_GROUP + row) * ap_strip_stride(cost) +
           c * ap_strip_nq(cost);
}

/* Output rows [row, row + AP_STRIP_GROUP) of the strip into column c:
 * the rows below enter, and the column's sums of each source at each go
 * to its group row of cols. */
AP_STRIP_FN void
ap_strip_down(const ap_strip_block *b, ap_strip_column *col, float *ring,
              double *cols, int c, int row, int n)
{
    int nq = ap_strip_nq(b->cost);
    /* count: trips=AP_STRIP_GROUP */
    for (int j = 0; j < AP_STRIP_GROUP; j++) {
        ap_strip_enter(b, col, ring, c, b->y0 + row + j + b->r, n);
        for (int k = 0; k < n; k++) {
            double *at = cols + ap_strip_cols(b->cost, k, j, c);
            col->q[k][0] = ap_strip_count(col->seen[k]);
            for (int q = 0; q < nq; q++) {
                at[q] = col->q[k][q];
            }
        }
    }
}

/* 1 / sqrt(x) within about 2^-22 (one MUFU). */
AP_STRIP_FN float
ap_strip_rsqrt(float x)
{
#ifdef __CUDA_ARCH__
    float y;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    /* the host's stands in with an error larger than the device's */
    return (float)((1.0 / sqrt((double)x)) * (1.0 + 0x1p-22));
#endif
}

/* 1 - NCC of a window from its sums s (ap_strip_nq's): the moments in
 * float64, the normalised correlation in float32, as ap_ncc_cost decides
 * which windows are flat or too little seen. */
AP_STRIP_FN float
ap_strip_ncc(double full, const double *s)
{
    double n = s[0], sr = s[1], ss = s[2];
    double vr = n * s[3] - sr * sr, vs = n * s[4] - ss * ss;
    double cov = n * s[5] - sr * ss;
    double least = AP_NCC_MIN_VARIANCE * n * n;
    int flat = (n < full / 2) | (vr < least) | (vs < least);
    float ncc = (float)cov * ap_strip_rsqrt((float)vr * (float)vs);
    ncc = ncc > 1.0f ? 1.0f : (ncc < -1.0f ? -1.0f : ncc);
    return flat ? 1.0f : 1.0f - ncc;
}

/* SAD's cost from its sums, as ap_sad_cost. */
AP_STRIP_FN float
ap_strip_sad(double full, const double *s)
{
    return s[0] < full / 2 ? 1.0f : (float)(s[1] * ap_gpu_rcp(s[0]));
}

/* The items of a group's pass along the rows: AP_STRIP_SEGMENT outputs
 * of one of its rows each, the rows of the same outputs side by side. */
AP_STRIP_FN int
ap_strip_items(int r)
{
    int outputs = ap_strip_outputs(r);
    return AP_STRIP_GROUP *
           ((outputs + AP_STRIP_SEGMENT - 1) / AP_STRIP_SEGMENT);
}

/* Item i of the group at output row `row`: the window slid along its
 * outputs (those of the block and the image), each output's costs of
 * the pass's n sources added to the accumulators acc (AP_STRIP_ROWS
 * rows of the block's outputs) one source after another. */
AP_STRIP_FN void
ap_strip_along(const ap_strip_block *b, const double *cols, float *acc,
               int row, int i, int n)
{
    int nq = ap_strip_nq(b->cost);
    int k = i % AP_STRIP_GROUP, first = i / AP_STRIP_GROUP * AP_STRIP_SEGMENT;
    int outputs = ap_strip_outputs(b->r);
    int last = outputs < b->w - b->x0 - b->r ? outputs : b->w - b->x0 - b->r;
    float *out = acc + (row + k) * outputs + first;
    const double *at[AP_STRIP_SOURCES];
    double s[AP_STRIP_SOURCES][6];
    for (int m = 0; m < n; m++) {
        at[m] = cols + ap_strip_cols(b->cost, m, k, first);
        for (int q = 0; q < 6; q++) {
            s[m][q] = 0.0;
        }
    }
    /* count: trips=window; part=sums */
    for (int j = 0; j <= 2 * b->r; j++) {
        for (int m = 0; m < n; m++) {
            for (int q = 0; q < nq; q++) {
                s[m][q] += at[m][j * nq + q];
            }
        }
    }
    /* the block's or the image's last output: its window's last column
     * is the block's last at most */
    int count = last - first < AP_STRIP_SEGMENT ? last - first
                                                : AP_STRIP_SEGMENT;
    AP_UNROLL
    /* count: trips=AP_STRIP_SEGMENT; part=sums */
    for (int j = 0; j < AP_STRIP_SEGMENT; j++) {
        if (j < count) {
            float cost = out[j];
            for (int m = 0; m < n; m++) {
                if (j > 0) {
                    for (int q = 0; q < nq; q++) {
                        s[m][q] += at[m][(j + 2 * b->r) * nq + q] -
                                   at[m][(j - 1) * nq + q];
                    }
                }
                cost += b->cost == AP_COST_SAD ? ap_strip_sad(b->full, s[m])
                                               : ap_strip_ncc(b->full, s[m]);
            }
            out[j] = cost;
        }
    }
}

#endif
