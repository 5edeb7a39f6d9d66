/* How both CPU sweeps (sweep.c's and AquaMVS parity's,
 * ../parity/parity_costs.c) share out a cost volume's planes: work items
 * of a band of rows through a group of consecutive planes, taken by the
 * workers as each comes free. Each plane's costs for the band are staged,
 * plane by plane, then written into the (h, w, d) volume a pixel at a
 * time: each pixel's planes are one stretch of memory, where written a
 * plane at a time every line of the volume would be fetched once a
 * plane. */
#ifndef AP_STAGED_PLANES_H
#define AP_STAGED_PLANES_H

#include <stdatomic.h>
#include <stddef.h>

#include "sweep.h"

/* The most planes a work item stages: a pixel's 16 costs are one cache
 * line of the volume. */
#define AP_STAGED_PLANES 16

/* Planes [plane0, plane0 + count) of rows [y0, y1) of the volume (h, w,
 * d) from staged: plane k's row y at staged + k * plane_size +
 * (y - y0) * w. */
void ap_write_staged(float *volume, int w, int d, int plane0,
                     const float *staged, size_t plane_size, int count,
                     int y0, int y1);

/* A sweep's work items: (plane group, band) pairs, the group the major
 * index, over args->count planes from args->first. The caller sets the
 * first five fields; the atomics start at 0. */
typedef struct {
    const ap_sweep_args *args;
    int band_rows;              /* rows a band takes of a plane */
    int bands;                  /* (h + band_rows - 1) / band_rows */
    int group;                  /* planes an item takes, at most
                                 * AP_STAGED_PLANES */
    float *out;                 /* the (h, w, d) volume */
    atomic_llong next_item;     /* items are as many as planes / group
                                 * times bands, which an int need not
                                 * hold */
    atomic_int failed;
    atomic_int stopped;         /* args->stop said so */
} ap_plane_bands;

/* One plane's costs (the mean over the source views) for rows [y0, y1)
 * of a band, with the worker's own workspace: into stage (row y at
 * stage + (y - y0) * w) or, where stage is NULL, straight into the
 * volume. */
typedef void (*ap_band_costs)(const void *job, void *workspace, int plane,
                              int y0, int y1, float *stage);

/* A worker's loop: takes items until none is left, a worker has failed or
 * the sweep is stopped (ap_worker_stopped, asked before each plane), and
 * runs costs(job, workspace, ...) over each item's planes in turn: staged
 * in `staged` (group planes of band_rows x w floats), then written out
 * (the planes done, where stopped), or straight into the volume where
 * staged is NULL. */
void ap_plane_bands_work(ap_plane_bands *items, ap_band_costs costs,
                         const void *job, void *workspace, float *staged);

/* Runs worker(job) on as many of args->threads threads as there are
 * items; each worker makes its workspace (setting items->failed where it
 * cannot) and calls ap_plane_bands_work. Returns 0, -1 where a worker
 * failed, -2 when a thread cannot start, or AP_SWEEP_STOPPED. */
int ap_plane_bands_run(ap_plane_bands *items, void *(*worker)(void *),
                       void *job);

#endif
