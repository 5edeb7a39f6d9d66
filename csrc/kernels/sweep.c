#include "sweep.h"
#include "aquamvs_costs.h"
#include "extract_math.h"
#include "projector.h"
#include "sweep_rays.h"
#include "window_costs.h"
#include "workers.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int
ap_warp(const float *src, int h, int w, const ap_camera *ref,
        const ap_camera *src_cam, double depth, float *out)
{
    ap_ray_table t;
    ap_projector proj;
    if (ap_ray_table_make(&t, ref, h, w) < 0) {
        return -1;
    }
    if (ap_projectors_make(&proj, src_cam, 1, &t, depth, depth) < 0) {
        free(t.planes);
        return -1;
    }
    for (int y = 0; y < h; y++) {
        const double *row[6];
        ap_ray_row(&t, y, row);
        float *out_row = out + (size_t)y * w;
        ap_project_sample(&proj, 1, row, w, depth, src, h, w, &out_row);
    }
    ap_projector_free(&proj);
    free(t.planes);
    return 0;
}

/* ------------------------------------------------------------ workers */

/* A work item is one band through this many consecutive planes: its
 * costs are staged plane by plane and written out a pixel at a time, so
 * that a pixel's 16 costs (one cache line) are stored together. */
#define PLANE_GROUP 16

typedef struct {
    const ap_sweep_args *args;
    const ap_ray_table *rays;
    const ap_projector *proj;   /* one a source view */
    const double *gauss;        /* 2 * radius + 1, 2-D weights sum to 1 */
    int bands;
    float *out;
    /* items are (plane group, band) pairs: as many as planes / 16 times
     * rows / 128, which an int need not hold */
    atomic_llong next_item;
    atomic_int failed;
} sweep_job;

/* A worker's memory: per view a ring of warped rows (2 radius + 2: the
 * window's and the one entering it) and AP_NQ column sums; window sums
 * and a cost row shared by the views; the views' rows being warped; and
 * the costs of the work item's planes, plane by plane, until they are
 * written out pixel by pixel. */
typedef struct {
    float *ring, *staged, **rows;
    double *cols, *scratch, *acc;
} workspace;

static int
workspace_make(workspace *ws, const ap_sweep_args *a)
{
    size_t w = (size_t)a->w, rows = (size_t)(a->window | 1) + 1;
    ws->ring = malloc((size_t)a->n * rows * w * sizeof(float));
    ws->staged = malloc(PLANE_GROUP * AP_SWEEP_BAND * w * sizeof(float));
    ws->cols = malloc((size_t)a->n * AP_NQ * w * sizeof(double));
    ws->scratch = malloc(2 * AP_NQ * (w + 1) * sizeof(double));
    ws->acc = malloc(w * sizeof(double));
    ws->rows = malloc((size_t)a->n * sizeof(*ws->rows));
    return ws->ring && ws->staged && ws->cols && ws->scratch && ws->acc &&
                   ws->rows
               ? 0
               : -1;
}

static void
workspace_free(workspace *ws)
{
    free(ws->ring);
    free(ws->staged);
    free(ws->cols);
    free(ws->scratch);
    free(ws->acc);
    free(ws->rows);
}

/* View v's slot for image row y in the ring of 2 radius + 2 rows. */
static float *
ring_row(const workspace *ws, int v, int y, int ring_rows, int w)
{
    return ws->ring + ((size_t)v * ring_rows + y % ring_rows) * w;
}

/* Rows [y0, y1) of one depth plane. Box sums slide down the band: a row
 * is added when it enters the window and taken out when it leaves, so
 * the result depends on the band's first row, which is fixed: never on
 * threads or batches. */
static void
sweep_band(const sweep_job *job, workspace *ws, int plane, int y0, int y1)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, h = a->h, r = a->window / 2, ring_rows = 2 * r + 2;
    size_t cols_size = AP_NQ * (size_t)w;
    double depth = a->depths[a->first + plane];
    int box = a->cost != AP_COST_SSIM;
    int lo = y0 - r < 0 ? 0 : y0 - r, next = lo;
    if (box) {
        memset(ws->cols, 0, (size_t)a->n * cols_size * sizeof(double));
    }
    for (int yo = y0; yo < y1; yo++) {
        int want_lo = yo - r < 0 ? 0 : yo - r;
        int want_hi = yo + r + 1 > h ? h : yo + r + 1;
        for (; next < want_hi; next++) {
            const double *rays[6];
            ap_ray_row(job->rays, next, rays);
            int leaves = box && lo < want_lo;   /* one row in, one out */
            for (int v = 0; v < a->n; v++) {
                ws->rows[v] = ring_row(ws, v, next, ring_rows, w);
            }
            ap_project_sample(job->proj, a->n, rays, w, depth, a->srcs, h, w,
                              ws->rows);
            for (int v = 0; v < a->n; v++) {
                double *cols = ws->cols + v * cols_size;
                const float *ref = a->ref + (size_t)next * w;
                if (leaves) {
                    ap_slide_row(cols, w, a->cost, a->ref + (size_t)lo * w,
                                 ring_row(ws, v, lo, ring_rows, w), ref,
                                 ws->rows[v], 1.0);
                } else if (box) {
                    ap_add_row(cols, w, a->cost, ref, ws->rows[v], 1.0);
                }
            }
            lo += leaves;
        }
        for (; box && lo < want_lo; lo++) {     /* the bottom edge */
            for (int v = 0; v < a->n; v++) {
                ap_add_row(ws->cols + v * cols_size, w, a->cost,
                           a->ref + (size_t)lo * w,
                           ring_row(ws, v, lo, ring_rows, w), -1.0);
            }
        }
        memset(ws->acc, 0, (size_t)w * sizeof(double));
        for (int v = 0; v < a->n; v++) {
            double *cols = ws->cols + v * cols_size;
            if (!box) {   /* Gaussian: the window's rows, weighted */
                const float *refs[AP_MAX_WINDOW], *rows[AP_MAX_WINDOW];
                for (int y = want_lo; y < want_hi; y++) {
                    refs[y - want_lo] = a->ref + (size_t)y * w;
                    rows[y - want_lo] = ring_row(ws, v, y, ring_rows, w);
                }
                ap_weighted_columns(cols, w, refs, rows,
                                    job->gauss + (want_lo - yo + r),
                                    want_hi - want_lo);
            }
            ap_add_row_costs(cols, w, r, a->cost, job->gauss, ws->scratch,
                             ws->acc);
        }
        float *staged = ws->staged +
                        ((size_t)(plane % PLANE_GROUP) * AP_SWEEP_BAND +
                         (size_t)(yo - y0)) * w;
        for (int x = 0; x < w; x++) {
            staged[x] = (float)(ws->acc[x] / a->n);
        }
    }
}

/* The staged costs of planes [first, first + count) into the volume's
 * rows [y0, y1): written a pixel at a time, each pixel's planes are one
 * stretch of memory, where written a plane at a time the volume's lines
 * would each be fetched once a plane. */
static void
write_planes(const sweep_job *job, const workspace *ws, int first,
             int count, int y0, int y1)
{
    const ap_sweep_args *a = job->args;
    size_t w = (size_t)a->w, plane_size = AP_SWEEP_BAND * w;
    for (int y = y0; y < y1; y++) {
        const float *row = ws->staged + (size_t)(y - y0) * w;
        float *out = job->out + (size_t)y * w * a->d + a->first + first;
        for (size_t x = 0; x < w; x++) {
            if (count == PLANE_GROUP) {     /* a constant trip count */
                for (int k = 0; k < PLANE_GROUP; k++) {
                    out[x * a->d + k] = row[k * plane_size + x];
                }
            } else {
                for (int k = 0; k < count; k++) {
                    out[x * a->d + k] = row[k * plane_size + x];
                }
            }
        }
    }
}

static void *
sweep_worker(void *arg)
{
    sweep_job *job = arg;
    const ap_sweep_args *a = job->args;
    workspace ws;
    if (workspace_make(&ws, a) < 0) {
        atomic_store(&job->failed, 1);
        workspace_free(&ws);
        return NULL;
    }
    long long item;
    long long groups = ((long long)a->count + PLANE_GROUP - 1) /
                       PLANE_GROUP;
    while ((item = atomic_fetch_add(&job->next_item, 1)) <
           groups * job->bands && !atomic_load(&job->failed)) {
        int group = (int)(item / job->bands);
        int band = (int)(item % job->bands);
        int y0 = band * AP_SWEEP_BAND;
        int y1 = y0 + AP_SWEEP_BAND > a->h ? a->h : y0 + AP_SWEEP_BAND;
        int start = group * PLANE_GROUP;   /* below count: an int */
        int planes = a->count - start < PLANE_GROUP ? a->count - start
                                                    : PLANE_GROUP;
        for (int plane = start; plane < start + planes; plane++) {
            sweep_band(job, &ws, plane, y0, y1);
        }
        write_planes(job, &ws, start, planes, y0, y1);
    }
    workspace_free(&ws);
    return NULL;
}

void
ap_gauss_weights(int radius, double *gauss)
{
    double total = 0.0;
    for (int j = -radius; j <= radius; j++) {
        gauss[j + radius] = exp(-(double)(j * j) /
                                (2 * AP_SSIM_SIGMA * AP_SSIM_SIGMA));
        total += gauss[j + radius];
    }
    for (int j = 0; j <= 2 * radius; j++) {
        gauss[j] /= total;    /* 1-D sums to 1, so the 2-D kernel does */
    }
}

int
ap_cost_volume(const ap_sweep_args *a, float *out)
{
    if (a->parity == AP_PARITY_AQUAMVS) {
        return ap_aquamvs_cost_volume(a, out);
    }
    double gauss[AP_MAX_WINDOW];
    ap_gauss_weights(a->window / 2, gauss);
    ap_ray_table rays;
    if (ap_ray_table_make(&rays, a->ref_cam, a->h, a->w) < 0) {
        return -1;
    }
    ap_projector *proj = calloc((size_t)a->n, sizeof(*proj));
    if (proj == NULL ||
        ap_projectors_make(proj, a->src_cams, a->n, &rays, a->depths[0],
                           a->depths[a->d - 1]) < 0) {
        free(proj);
        free(rays.planes);
        return -1;
    }
    int bands = (a->h + AP_SWEEP_BAND - 1) / AP_SWEEP_BAND;
    sweep_job job = {a, &rays, proj, gauss, bands, out, 0, 0};
    long long items = ((long long)a->count + PLANE_GROUP - 1) /
                      PLANE_GROUP * bands;
    int threads = a->threads < items ? a->threads : (int)items;
    int status = ap_run_workers(sweep_worker, &job, threads, &job.failed);
    ap_projectors_free(proj, a->n);
    free(proj);
    free(rays.planes);
    if (status == 0 && atomic_load(&job.failed)) {
        status = -1;
    }
    return status;
}

/* ----------------------------------------------------------- extraction */

void
ap_extract_depth(const float *volume, int h, int w, int d,
                 const double *depths, float *depth, float *confidence)
{
    size_t n = (size_t)h * w;
    for (size_t i = 0; i < n; i++) {
        ap_extract_pixel(volume + i * d, d, depths, depth + i,
                         confidence + i);
    }
}
