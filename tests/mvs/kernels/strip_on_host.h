/* The strip cost kernel's block (gpu_strip.h) run on the host thread
 * by thread, between the points where the device's threads meet, in
 * sweep.cu's order: for each pass of sources, every column's start and
 * prologue, then for each group of rows every column down the strip and
 * the items along it. Shared by test_gpu_strip.c and the host emulation
 * of a whole volume in tests/mvs/test_mvs_gpu.py, so that both drive the
 * kernel as the launch does. */
#ifndef AP_TEST_STRIP_ON_HOST_H
#define AP_TEST_STRIP_ON_HOST_H

#include <stddef.h>

#include "../../../csrc/mvs/cuda/gpu_strip.h"

/* Called after a group's columns went down and before the items along
 * the row read them (NULL: nothing between). */
typedef void strip_group_check(const ap_strip_block *b,
                               ap_strip_shared_at at, int row, int n);

/* One pass of b's sources (already set, ap_strip_sources): n of them a
 * thread; col: the block's AP_STRIP_COLS columns. */
static inline void
strip_pass(const ap_strip_block *b, ap_strip_shared_at at,
           ap_strip_column *col, int n, strip_group_check *check)
{
    for (int c = 0; c < AP_STRIP_COLS; c++) {
        ap_strip_start(&col[c], at.ring, c, b->r, n);
        ap_strip_prologue(b, &col[c], at.ring, c, n);
    }
    for (int row = 0; row < AP_STRIP_ROWS; row += AP_STRIP_GROUP) {
        for (int c = 0; c < AP_STRIP_COLS; c++) {
            ap_strip_down(b, &col[c], at.ring, at.cols, c, row, n);
        }
        if (check != NULL) {
            check(b, at, row, n);
        }
        for (int i = 0; i < ap_strip_items(b->r); i++) {
            ap_strip_along(b, at.cols, at.acc, row, i, n);
        }
    }
}

/* The sources a pass at v warps: AP_STRIP_SOURCES while a whole pass of
 * them is left among the first ap_strip_paired(views), one after that;
 * one always where `single`. */
static inline int
strip_pass_sources(int v, int views, int single)
{
    return !single && v < ap_strip_paired(views) ? AP_STRIP_SOURCES : 1;
}

#endif
