/* SSIM's strip cost kernel, a thread's work at a time: the block of the
 * box windows' strip kernel (gpu_strip.h: AP_STRIP_COLS threads, one a
 * column, down AP_STRIP_ROWS output rows of one plane, each sample
 * warped once a block by the walk down its column), its sources one at
 * a time whatever AP_STRIP_SOURCES.
 * SSIM's Gaussian window does not slide, so its sums are made afresh:
 * at each row a thread sums its column's six quantities down the
 * window's rows, weighted by the taps, from a ring of the rows' values;
 * the block meets, and each thread sums those along the row, weighted
 * again: the cost of its pixel r rows up. The same float64 sums, down
 * then along, as the tile kernel makes in shared tiles (sweep.cu), which
 * warps each sample 2.19 times at window 11 where this warps it 1.25
 * times. Written in C for the host too, so that
 * tests/mvs/kernels/test_gpu_strip.c runs a block's threads in turn. */
#ifndef AP_GPU_SSIM_STRIP_H
#define AP_GPU_SSIM_STRIP_H

#include "gpu_strip.h"

/* The block's shared memory: the column sums (six doubles a column: the
 * seen weight, r, s, r^2, s^2, r s), the ring of the window's rows (a
 * float pair a column and row: the reference, 0 outside the image, and
 * the sample, NaN where not seen) and the outputs' accumulated costs.
 * 46.5 KiB at window 11, 85.5 KiB at 63. */
typedef struct {
    double *cols;
    float *ring, *acc;
} ap_sstrip_shared_at;

AP_STRIP_FN unsigned
ap_sstrip_shared(int r)
{
    return (unsigned)(6 * AP_STRIP_COLS * 8 +
                      (2 * r + 1) * AP_STRIP_COLS * 8 +
                      AP_STRIP_ROWS * ap_strip_outputs(r) * 4);
}

AP_STRIP_FN ap_sstrip_shared_at
ap_sstrip_layout(double *base, int r)
{
    ap_sstrip_shared_at at;
    at.cols = base;
    at.ring = (float *)(base + 6 * AP_STRIP_COLS);
    at.acc = at.ring + 2 * (2 * r + 1) * AP_STRIP_COLS;
    return at;
}

/* A thread's column: the ring's slot of the row that enters next (the
 * oldest of the window's rows once it is full) and the walk down it. */
typedef struct {
    int slot;
    ap_walk walk;
} ap_sstrip_column;

/* A column before a source's first row: the ring's first slot, no
 * crossing to walk from. */
AP_STRIP_FN void
ap_sstrip_start(ap_sstrip_column *col)
{
    col->slot = 0;
    col->walk = ap_walk_none();
}

/* Column c's weighted sums over the ring's rows, oldest first (from
 * `slot`), into `cols`. */
AP_STRIP_FN void
ap_sstrip_down(const ap_strip_block *b, ap_sstrip_shared_at at, int c,
               int slot)
{
    const int rows = 2 * b->r + 1;
    double q[6] = {0, 0, 0, 0, 0, 0};
    /* count: trips=window */
    for (int k = 0; k < rows; k++) {
        const float *at_k = at.ring + 2 * (slot * AP_STRIP_COLS + c);
        float s = at_k[1];
        if (s == s) {
            double g = b->taps[k], rv = at_k[0];
            q[0] += g;
            q[1] += g * rv;
            q[2] += g * s;
            q[3] += g * rv * rv;
            q[4] += g * (double)s * s;
            q[5] += g * rv * s;
        }
        slot = slot + 1 == rows ? 0 : slot + 1;
    }
    for (int k = 0; k < 6; k++) {
        at.cols[6 * c + k] = q[k];
    }
}

/* Row y enters column c: its reference value and sample into the ring
 * and, once the rows of the window centred r rows up are all in, the
 * column's weighted sums over them into `cols`. The walk moves on to
 * row y. */
AP_STRIP_FN void
ap_sstrip_enter(const ap_strip_block *b, ap_sstrip_shared_at at,
                ap_sstrip_column *col, int c, int y)
{
    const int r = b->r, x = b->x0 + c;
    ap_strip_pixel px = ap_strip_read(b, x, y);
    float s;
    /* count: part=warp */
    ap_strip_warps(b, 1, &px, x, y, &col->walk, &s);
    float *in = at.ring + 2 * (col->slot * AP_STRIP_COLS + c);
    in[0] = px.ref;
    in[1] = s;
    col->slot = col->slot == 2 * r ? 0 : col->slot + 1;
    if (y >= b->y0 + r) {
        /* count: share=(H / ceil(H / AP_STRIP_ROWS)) / (H / ceil(H /
         * AP_STRIP_ROWS) + 2 * radius) */
        ap_sstrip_down(b, at, c, col->slot);
    }
}

/* Column c's output r rows above row y (r <= c < AP_STRIP_COLS - r):
 * the column sums along the row, weighted, its cost added to its
 * accumulator where the pixel is in the image. */
AP_STRIP_FN void
ap_sstrip_cost(const ap_strip_block *b, ap_sstrip_shared_at at, int c,
               int y)
{
    const int r = b->r, yo = y - r, x = b->x0 + c;
    double q[6] = {0, 0, 0, 0, 0, 0};
    /* count: trips=window */
    for (int j = 0; j <= 2 * r; j++) {
        double g = b->taps[j];
        for (int k = 0; k < 6; k++) {
            q[k] += g * at.cols[6 * (c - r + j) + k];
        }
    }
    if (x < b->w && yo < b->h) {
        at.acc[(yo - b->y0) * ap_strip_outputs(r) + c - r] +=
            (float)ap_ssim_cost(b->full, q[0], q[1], q[2], q[3], q[4], q[5]);
    }
}

/* The last row a block warps, plus one: r below its last output row in
 * the image. */
AP_STRIP_FN int
ap_sstrip_end(const ap_strip_block *b)
{
    int last = b->y0 + AP_STRIP_ROWS < b->h ? b->y0 + AP_STRIP_ROWS : b->h;
    return last + b->r;
}

#endif
