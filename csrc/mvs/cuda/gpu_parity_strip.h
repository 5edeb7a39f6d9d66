/* AquaMVS parity's costs (../parity/parity_costs.h) in strips, the way
 * gpu_strip.h makes the textbook costs. A block of AP_PSTRIP_COLS
 * threads, one a column of the reference, walks down a strip of
 * AP_PSTRIP_ROWS output rows of one plane, each source in turn. AquaMVS
 * filters twice: each pixel is centred by its own window's means, then
 * the centred products are filtered. So an output needs samples two
 * radii around it: a block outputs all its columns but 2 r each side,
 * and warps 4 r rows more than it outputs. At each row, each thread:
 *   1. warps the sample of its column entering (a ring of 2 r + 1 rows)
 *      and sums the column's m, r m and s m down the window's rows;
 *   2. (the block met) sums those along the row: the count and means of
 *      its pixel r rows up, which it centres, then sums its column's
 *      centred products down the window's rows;
 *   3. (met again) sums those along the row: the cost of its pixel 2 r
 *      rows up, added to the block's accumulators.
 * Samples are warped as the textbook strip kernel warps them (the
 * source's frame, the crossing walked down the column from the two rows
 * above's). Sums are float64, as the CPU's. Down the columns, NCC's
 * box windows slide (the entering row added, the leaving one, read back
 * from its ring, taken out), SSIM's Gaussian windows are summed afresh;
 * along the rows both are summed afresh. Costs are added in float32
 * (the volume's type) over the sources. Each sample is warped
 * once a block, where the three passes of parity_sweep.cuh warp it once
 * and read it back from global memory 2 (2 r + 1)^2 times.
 * Written in C for the host too, so that
 * tests/mvs/kernels/test_gpu_parity_strip.c runs a block's threads in
 * turn against the windows summed whole and against the CPU path;
 * parity_sweep.cuh calls these with the cost as a template constant. */
#ifndef AP_GPU_PARITY_STRIP_H
#define AP_GPU_PARITY_STRIP_H

#include <math.h>
#include <stddef.h>

#include "gpu_sample.h"
#include "../cpu/sweep.h"
#include "../geometry/camera_math.h"
#include "../geometry/host_device.h"
#include "../parity/parity_math.h"

/* Threads (columns, both halos included) and output rows of a block;
 * radii up to AP_PSTRIP_RADII take the strip, wider windows the three
 * passes (a block of 128 columns would output under half of them). */
#define AP_PSTRIP_COLS 128
#define AP_PSTRIP_ROWS 64
#define AP_PSTRIP_RADII 7

#ifdef __CUDACC__
#define AP_PSTRIP_FN static __forceinline__ AP_HD
#else
#define AP_PSTRIP_FN static inline
#endif

#if AP_PSTRIP_COLS <= 4 * AP_PSTRIP_RADII
#error "a block must have a column of outputs at the widest strip window"
#endif

/* Output columns of a block. */
AP_PSTRIP_FN int
ap_pstrip_outputs(int r)
{
    return AP_PSTRIP_COLS - 4 * r;
}

/* What a cost keeps of a centred pixel until its output row: NCC its
 * window's count, SSIM the count and the two means. */
AP_PSTRIP_FN int
ap_pstrip_nstats(int cost)
{
    return cost == AP_COST_SSIM ? 3 : 1;
}

/* The block's shared memory: the ring of samples (a double a column and
 * row, NaN unseen) and of the reference's values where they are seen (a
 * float, 0 elsewhere), the column sums of the first filter (three doubles a
 * column: m, r m, s m), the ring of centred products (three a column and
 * row: rc^2, sc^2, rc sc), their column sums, the ring of what the
 * centred rows keep (ap_pstrip_nstats, r + 1 rows) and the outputs'
 * accumulated costs. 88.5 KiB for NCC at window 11, under the 99 KiB a
 * block of the GeForce cards of compute capability 8.6 and 8.9 may ask
 * for. */
typedef struct {
    double *ring, *first, *products, *second, *stats;
    float *refs, *acc;
} ap_pstrip_shared_at;

AP_PSTRIP_FN unsigned
ap_pstrip_shared(int cost, int r)
{
    unsigned doubles = (unsigned)((2 * r + 1) * 4 + 6 +
                                  ap_pstrip_nstats(cost) * (r + 1)) *
                       AP_PSTRIP_COLS;
    unsigned floats = (unsigned)((2 * r + 1) * AP_PSTRIP_COLS +
                                 AP_PSTRIP_ROWS * ap_pstrip_outputs(r));
    return doubles * 8 + floats * 4;
}

AP_PSTRIP_FN ap_pstrip_shared_at
ap_pstrip_layout(double *base, int cost, int r)
{
    ap_pstrip_shared_at at;
    at.ring = base;
    at.first = at.ring + (2 * r + 1) * AP_PSTRIP_COLS;
    at.products = at.first + 3 * AP_PSTRIP_COLS;
    at.second = at.products + 3 * (2 * r + 1) * AP_PSTRIP_COLS;
    at.stats = at.second + 3 * AP_PSTRIP_COLS;
    at.refs = (float *)(at.stats +
                        ap_pstrip_nstats(cost) * (r + 1) * AP_PSTRIP_COLS);
    at.acc = at.refs + (2 * r + 1) * AP_PSTRIP_COLS;
    return at;
}

/* What a block's threads share for one source: the images, the rays of
 * the reference's pixels (ap_ray_read), the source's frame (as the
 * textbook strip kernel projects), the window's taps (SSIM's Gaussian
 * weights, NULL for NCC's box) and the plane's depth; x0: the image
 * column of thread 0 (2 r left of the first output), y0: the first
 * output row. */
typedef struct {
    const float *ref, *img;
    const double *rays, *taps;
    const ap_gpu_frame *frame;
    int h, w, x0, y0, cost, r;
    double depth;
#ifndef __CUDA_ARCH__
    /* the host's tests of the sums: not NULL, the samples themselves
     * (h x w, NaN unseen), which ap_pstrip_sample reads instead of
     * warping */
    const double *warped;
#endif
} ap_pstrip_block;

/* A thread's column, for one source: its walk down the column; the
 * slot of the row entering the rings of 2 r + 1 rows and the slot, in
 * the ring of r + 1 rows, of the row it centres (r rows up), both
 * advanced as each row enters, so that no slot is a division; and, for
 * a box window, its sums down the window's rows: the samples' m, r m
 * and s m, and the centred products. */
typedef struct {
    ap_walk walk;
    int slot, stat;
    double down[3], products[3], products_err[3];
} ap_pstrip_column;

/* The slot after `slot` in a ring of `rows` rows. */
AP_PSTRIP_FN int
ap_pstrip_next(int slot, int rows)
{
    return slot + 1 == rows ? 0 : slot + 1;
}

/* A column before its first row: the slots one before those of its
 * first row, y0 - 2 r, which enters slot 0 of the larger ring, and the
 * row it would centre then, y0 - 3 r, slot (-r) mod (r + 1) = 1 of the
 * smaller. */
AP_PSTRIP_FN ap_pstrip_column
ap_pstrip_column_start(int r)
{
    ap_pstrip_column col = {ap_walk_none(), 2 * r, 0, {0.0, 0.0, 0.0},
                            {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}};
    return col;
}

/* x added to the sum *sum + *err, the rounding of each step kept in
 * *err (Neumaier): a window of centred products that slides from
 * texture onto a nearly flat patch keeps its small sum to within a
 * rounding of it, where a plain running sum would keep the rounding of
 * the texture that left, as large as the patch's whole variance. */
AP_PSTRIP_FN void
ap_pstrip_add(double *sum, double *err, double x)
{
    double t = *sum + x;
    *err += fabs(*sum) >= fabs(x) ? (*sum - t) + x : (x - t) + *sum;
    *sum = t;
}

/* Whether the windows are boxes, whose sums down a column slide. */
AP_PSTRIP_FN int
ap_pstrip_box(const ap_pstrip_block *b)
{
    return b->taps == NULL;
}

AP_PSTRIP_FN double
ap_pstrip_tap(const ap_pstrip_block *b, int k)
{
    return b->taps != NULL ? b->taps[k] : 1.0;
}

/* The window's sums along a row of column sums (three a column) that
 * centre on column c. */
AP_PSTRIP_FN void
ap_pstrip_along(const ap_pstrip_block *b, const double *row, int c,
                double *sums)
{
    sums[0] = sums[1] = sums[2] = 0.0;
    /* count: trips=window */
    for (int k = 0; k <= 2 * b->r; k++) {
        const double *q = row + 3 * (c - b->r + k);
        double g = ap_pstrip_tap(b, k);
        sums[0] += g * q[0];
        sums[1] += g * q[1];
        sums[2] += g * q[2];
    }
}

/* The sample of source b->frame at reference pixel (x, y), zero-padded
 * as AquaMVS samples; NaN where it is not seen, and outside the
 * reference, which no filter counts. A refractive crossing from the walk
 * down the column (ap_gpu_uv_with): the crossing converged, as the
 * CPU's parity finds it, to within 2^-30 of its share. */
AP_PSTRIP_FN double
ap_pstrip_sample(const ap_pstrip_block *b, int x, int y, ap_walk *walk)
{
    if (x < 0 || y < 0 || x >= b->w || y >= b->h) {
        return NAN;
    }
    size_t i = (size_t)y * b->w + x;
#ifndef __CUDA_ARCH__
    if (b->warped != NULL) {
        return b->warped[i];
    }
#endif
    double point[3], u, v;
    ap_ray_point(b->rays, i, b->depth, point);
    int seen = point[0] == point[0] &&
               ap_gpu_uv_with(b->frame, point, &u, &v, walk);
    return seen ? ap_bilinear_zeros(b->img, b->h, b->w, u, v) : NAN;
}

/* Row y enters column c, whose crossings walk down it: its sample and
 * r m into the rings and, once the rows of the window centred r rows up
 * are all in (y >= y0), the column's sums of m, r m and s m over them
 * into `first`. */
AP_PSTRIP_FN void
ap_pstrip_enter(const ap_pstrip_block *b, ap_pstrip_shared_at at,
                ap_pstrip_column *col, int c, int y)
{
    const int r = b->r, rows = 2 * r + 1, x = b->x0 + c;
    col->slot = ap_pstrip_next(col->slot, rows);
    col->stat = ap_pstrip_next(col->stat, r + 1);
    int slot = col->slot, at_c = slot * AP_PSTRIP_COLS + c;
    /* count: part=warp */
    double sample = ap_pstrip_sample(b, x, y, &col->walk);
    float ref = sample == sample ? b->ref[(size_t)y * b->w + x] : 0.0f;
    if (ap_pstrip_box(b)) {
        /* the row leaving the window, y - 2 r - 1, held this slot; the
         * block's first row entered is y0 - 2 r */
        double left = at.ring[at_c];
        if (y > b->y0 && left == left) {
            col->down[0] -= 1.0;
            col->down[1] -= at.refs[at_c];
            col->down[2] -= left;
        }
        if (sample == sample) {
            col->down[0] += 1.0;
            col->down[1] += ref;
            col->down[2] += sample;
        }
    }
    at.ring[at_c] = sample;
    at.refs[at_c] = ref;
    if (y < b->y0) {
        return;
    }
    double *q = at.first + 3 * c;
    if (ap_pstrip_box(b)) {
        q[0] = col->down[0];
        q[1] = col->down[1];
        q[2] = col->down[2];
        return;
    }
    double n = 0.0, sr = 0.0, ss = 0.0;
    /* count: trips=window * (H / ceil(H / AP_PSTRIP_ROWS) + 2 * radius) /
     * (H / ceil(H / AP_PSTRIP_ROWS) + 4 * radius) */
    for (int k = 0; k < rows; k++) {
        slot = ap_pstrip_next(slot, rows);     /* row y - 2 r + k */
        double s = at.ring[slot * AP_PSTRIP_COLS + c];
        if (s == s) {
            double g = ap_pstrip_tap(b, k);
            n += g;
            sr += g * at.refs[slot * AP_PSTRIP_COLS + c];
            ss += g * s;
        }
    }
    q[0] = n;
    q[1] = sr;
    q[2] = ss;
}

/* Column c's pixel r rows above row y (r <= c < AP_PSTRIP_COLS - r):
 * its window's count (unclamped) and means from `first` along the row,
 * its centred products into their ring and its count and means into
 * theirs; then, once the rows of the window centred 2 r rows above y
 * are all centred, the column's sums of the products over them into
 * `second`. */
AP_PSTRIP_FN void
ap_pstrip_centre(const ap_pstrip_block *b, ap_pstrip_shared_at at,
                 ap_pstrip_column *col, int c, int y)
{
    const int r = b->r, rows = 2 * r + 1, yc = y - r;
    double sums[3];
    ap_pstrip_along(b, at.first, c, sums);
    double n = sums[0], sr = sums[1], ss = sums[2];
    double least = b->cost == AP_COST_SSIM ? AP_AQUAMVS_SSIM_LEAST
                                           : AP_AQUAMVS_NCC_LEAST;
    double count = n < least ? least : n;
    double mr = sr / count, ms = ss / count;
    /* row yc's slot in the rings of 2 r + 1 rows */
    int slot = col->slot - r < 0 ? col->slot - r + rows : col->slot - r;
    double s = at.ring[slot * AP_PSTRIP_COLS + c];
    int seen = s == s;
    double rc = seen ? at.refs[slot * AP_PSTRIP_COLS + c] - mr : 0.0;
    double sc = seen ? s - ms : 0.0;
    double *p = at.products + 3 * (slot * AP_PSTRIP_COLS + c);
    double entering[3] = {rc * rc, sc * sc, rc * sc};
    if (ap_pstrip_box(b)) {
        for (int k = 0; k < 3; k++) {
            /* the products of row yc - 2 r - 1, centred from y0 - r on */
            if (y >= b->y0 + rows) {
                ap_pstrip_add(&col->products[k], &col->products_err[k],
                              -p[k]);
            }
            ap_pstrip_add(&col->products[k], &col->products_err[k],
                          entering[k]);
        }
    }
    p[0] = entering[0];
    p[1] = entering[1];
    p[2] = entering[2];
    int nstats = ap_pstrip_nstats(b->cost);
    double *stats = at.stats + nstats * (col->stat * AP_PSTRIP_COLS + c);
    stats[0] = n;
    if (nstats == 3) {
        stats[1] = mr;
        stats[2] = ms;
    }
    if (yc - r < b->y0) {
        return;
    }
    double *q = at.second + 3 * c;
    if (ap_pstrip_box(b)) {
        for (int k = 0; k < 3; k++) {
            q[k] = col->products[k] + col->products_err[k];
        }
        /* squares' sums below 0 by a rounding: the sum is 0 */
        q[0] = q[0] > 0.0 ? q[0] : 0.0;
        q[1] = q[1] > 0.0 ? q[1] : 0.0;
        return;
    }
    double srr = 0.0, sss = 0.0, srs = 0.0;
    /* count: trips=window * (H / ceil(H / AP_PSTRIP_ROWS)) / (H / ceil(H /
     * AP_PSTRIP_ROWS) + 2 * radius) */
    for (int k = 0; k < rows; k++) {
        slot = ap_pstrip_next(slot, rows);     /* row yc - 2 r + k */
        const double *pk = at.products + 3 * (slot * AP_PSTRIP_COLS + c);
        double g = ap_pstrip_tap(b, k);
        srr += g * pk[0];
        sss += g * pk[1];
        srs += g * pk[2];
    }
    q[0] = srr;
    q[1] = sss;
    q[2] = srs;
}

/* Column c's output 2 r rows above row y (2 r <= c < AP_PSTRIP_COLS -
 * 2 r, y - 2 r an output row of the block): the sums of the centred
 * products from `second` along the row, its cost from them and the
 * pixel's count and means, added to its accumulator where the pixel is
 * in the image. */
AP_PSTRIP_FN void
ap_pstrip_cost(const ap_pstrip_block *b, ap_pstrip_shared_at at,
               const ap_pstrip_column *col, int c, int y)
{
    const int r = b->r, rows = 2 * r + 1, yo = y - 2 * r, x = b->x0 + c;
    double q[3];
    ap_pstrip_along(b, at.second, c, q);
    /* row yo's slot in the ring of r + 1 rows: the one after yc's */
    const double *stats =
        at.stats + ap_pstrip_nstats(b->cost) *
                       (ap_pstrip_next(col->stat, r + 1) * AP_PSTRIP_COLS +
                        c);
    double cost = b->cost == AP_COST_SSIM
        ? ap_aquamvs_ssim(stats[0], stats[1], stats[2], q[0], q[1], q[2])
        : ap_aquamvs_ncc(stats[0], q[0], q[1], q[2],
                         (double)(rows * rows / 2));
    if (x < b->w && yo < b->h) {
        at.acc[(yo - b->y0) * ap_pstrip_outputs(r) + c - 2 * r] +=
            (float)cost;
    }
}

/* The last row a block warps, plus one: 2 r below its last output row
 * in the image. */
AP_PSTRIP_FN int
ap_pstrip_end(const ap_pstrip_block *b)
{
    int last = b->y0 + AP_PSTRIP_ROWS < b->h ? b->y0 + AP_PSTRIP_ROWS : b->h;
    return last + 2 * b->r;
}

#endif
