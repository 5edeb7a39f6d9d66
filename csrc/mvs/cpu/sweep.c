#include "sweep.h"
#include "extract_math.h"
#include "staged_planes.h"
#include "window_costs.h"
#include "workers.h"
#include "../geometry/projector.h"
#include "../geometry/sweep_rays.h"
#include "../parity/parity_costs.h"

#include <limits.h>
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
    if (ap_ray_table_make(&t, ref, h, w, 1) < 0) {
        return -1;
    }
    if (ap_projectors_make(&proj, src_cam, 1, &t, depth, depth, 1) < 0) {
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

/* A work item is one band through this many consecutive planes, its
 * costs staged (staged_planes.h). */
#define PLANE_GROUP AP_STAGED_PLANES

typedef struct {
    const ap_sweep_args *args;
    const ap_ray_table *rays;
    const ap_projector *proj;   /* one a source view */
    const double *gauss;        /* 2 * radius + 1, 2-D weights sum to 1 */
    /* the window sums of the count, r and r^2 where every sample is
     * seen (ref_seen_sums), 3 planes of h x w: always for NCC; for SSIM,
     * NULL where not made */
    const double *ref_sums;
    /* the sources with their first row and column repeated
     * (ap_pad_edges), or NULL: sampled as they are */
    const float *pads;
    /* (plane group, band) pairs of PLANE_GROUP planes and AP_SWEEP_BAND
     * rows */
    ap_plane_bands items;
} sweep_job;

/* A worker's memory: per view a ring of warped rows (2 radius + 2: the
 * window's and the one entering it), the span of columns where each has
 * samples not seen (kept where the reference sums are made), and
 * AP_NQ column sums (NCC: the warped ones, then the unseen samples');
 * window sums and a cost row shared by the views; the views' rows being
 * warped; and the costs of the work item's planes,
 * plane by plane, until they are written out pixel by pixel. */
typedef struct {
    float *ring, *staged, **rows;
    int *unseen;                /* first, last column; first > last: none */
    double *cols, *scratch, *acc;
} workspace;

static int
workspace_make(workspace *ws, const ap_sweep_args *a)
{
    size_t w = (size_t)a->w, rows = (size_t)(a->window | 1) + 1;
    ws->ring = malloc((size_t)a->n * rows * w * sizeof(float));
    ws->unseen = malloc((size_t)a->n * rows * 2 * sizeof(int));
    ws->staged = malloc(PLANE_GROUP * AP_SWEEP_BAND * w * sizeof(float));
    ws->cols = malloc((size_t)a->n * AP_NQ * w * sizeof(double));
    ws->scratch = malloc(2 * AP_NQ * (w + 1) * sizeof(double));
    ws->acc = malloc(w * sizeof(double));
    ws->rows = malloc((size_t)a->n * sizeof(*ws->rows));
    return ws->ring && ws->unseen && ws->staged && ws->cols &&
                   ws->scratch && ws->acc && ws->rows
               ? 0
               : -1;
}

static void
workspace_free(workspace *ws)
{
    free(ws->ring);
    free(ws->unseen);
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

/* The first and last column where image row y, in view v's ring, has a
 * sample not seen (first > last: none). */
static int *
ring_span(const workspace *ws, int v, int y, int ring_rows)
{
    return ws->unseen + 2 * ((size_t)v * ring_rows + y % ring_rows);
}

/* The first and last column where view v's window rows [lo, hi) have a
 * sample not seen; first > last where none. */
static void
window_unseen(const workspace *ws, int v, int lo, int hi, int ring_rows,
              int w, int *first, int *last)
{
    *first = w;
    *last = -1;
    for (int y = lo; y < hi; y++) {
        const int *span = ring_span(ws, v, y, ring_rows);
        *first = span[0] < *first ? span[0] : *first;
        *last = span[1] > *last ? span[1] : *last;
    }
}

/* Adds weight times the unseen samples' quantities of ring row y of view
 * v to its unseen column sums, over the row's span of them. */
static void
slide_unseen(const ap_sweep_args *a, workspace *ws, int v, int y,
             int ring_rows, double weight)
{
    int w = a->w;
    const int *span = ring_span(ws, v, y, ring_rows);
    if (span[0] <= span[1]) {
        ap_slide_unseen(ws->cols + ((size_t)v * AP_NQ + AP_NW) * w, w,
                        span[0], span[1] + 1, a->ref + (size_t)y * w,
                        ring_row(ws, v, y, ring_rows, w), weight);
    }
}

/* NCC's cost of view v's output row yo, its window rows [lo, hi) in the
 * ring, added to the workspace's cost row: the warped sums slid down the
 * band, the others the reference's (job->ref_sums) less the unseen
 * samples' near them. */
static void
ncc_row(const sweep_job *job, workspace *ws, int v, int yo, int lo, int hi,
        int ring_rows)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2;
    const double *cols = ws->cols + (size_t)v * AP_NQ * w;
    size_t plane = (size_t)a->h * w, stride = (size_t)w + 1;
    const double *row = job->ref_sums + (size_t)yo * w;
    const double *seen[AP_NW] = {row, row + plane, row + 2 * plane};
    double *fixed[AP_NW] = {ws->scratch + AP_NW * stride,
                            ws->scratch + (AP_NW + 1) * stride,
                            ws->scratch + (AP_NW + 2) * stride};
    int first, last, p0, p1;
    window_unseen(ws, v, lo, hi, ring_rows, w, &first, &last);
    ap_unseen_pixels(first, last, r, w, &p0, &p1);
    if (p1 > p0) {
        ap_unseen_fix(cols + (size_t)AP_NW * w, w, r, p0, p1, seen,
                      ws->scratch, fixed);
    }
    double full = (double)(2 * r + 1) * (2 * r + 1);
    ap_ncc_table_costs(cols, w, r, full, seen, p0, p1,
                       (const double *const *)fixed, ws->scratch, ws->acc);
}

/* SSIM's cost of view v's output row yo, its window rows [lo, hi) in the
 * ring, added to the workspace's cost row. Where a pixel's window sees
 * every sample (nearly everywhere), its count, r and r^2 sums are the
 * reference's (job->ref_sums): only the three sums that hold the warped
 * values are made there, and the other three only for the pixels near
 * unseen samples and the columns their windows read. */
static void
ssim_row(const sweep_job *job, workspace *ws, int v, int yo, int lo,
         int hi, int ring_rows)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2, count = hi - lo;
    double *cols = ws->cols + (size_t)v * AP_NQ * w;
    const double *weights = job->gauss + (lo - yo + r);
    const float *refs[AP_MAX_WINDOW], *rows[AP_MAX_WINDOW];
    for (int y = lo; y < hi; y++) {
        refs[y - lo] = a->ref + (size_t)y * w;
        rows[y - lo] = ring_row(ws, v, y, ring_rows, w);
    }
    if (job->ref_sums == NULL) {
        ap_weighted_columns(cols, w, 0, w, refs, rows, weights, count);
        ap_add_row_costs(cols, w, r, a->cost, job->gauss, ws->scratch,
                         ws->acc);
        return;
    }
    int first, last, p0, p1, c0 = 0, c1 = 0;
    window_unseen(ws, v, lo, hi, ring_rows, w, &first, &last);
    /* pixels [p0, p1) have unseen samples in their windows, which read
     * columns [c0, c1) */
    ap_unseen_pixels(first, last, r, w, &p0, &p1);
    if (p1 > p0) {
        c0 = p0 - r > 0 ? p0 - r : 0;
        c1 = p1 + r < w ? p1 + r : w;
    }
    ap_weighted_seen_columns(cols, w, 0, c0, refs, rows, weights, count);
    ap_weighted_columns(cols, w, c0, c1, refs, rows, weights, count);
    ap_weighted_seen_columns(cols, w, c1, w, refs, rows, weights, count);
    size_t stride = (size_t)w + 1;
    double *q[AP_NQ];
    for (int k = 0; k < AP_NQ; k++) {
        q[k] = ws->scratch + k * stride;
        if (k == AP_Q_S || k == AP_Q_SS || k == AP_Q_RS) {
            ap_gauss_sums(cols + (size_t)k * w, w, r, job->gauss, q[k]);
        } else {
            ap_gauss_sums_range(cols + (size_t)k * w, w, r, job->gauss, p0,
                                p1, q[k]);
        }
    }
    size_t plane = (size_t)a->h * w, at = (size_t)yo * w;
    const double *n = job->ref_sums + at, *sr = n + plane,
                 *srr = n + 2 * plane;
    ap_ssim_costs(p0, n, sr, q[AP_Q_S], srr, q[AP_Q_SS], q[AP_Q_RS],
                  ws->acc);
    ap_ssim_costs(p1 - p0, q[AP_Q_COUNT] + p0, q[AP_Q_R] + p0,
                  q[AP_Q_S] + p0, q[AP_Q_RR] + p0, q[AP_Q_SS] + p0,
                  q[AP_Q_RS] + p0, ws->acc + p0);
    ap_ssim_costs(w - p1, n + p1, sr + p1, q[AP_Q_S] + p1, srr + p1,
                  q[AP_Q_SS] + p1, q[AP_Q_RS] + p1, ws->acc + p1);
}

/* Rows [y0, y1) of one depth plane, their costs into stage
 * (ap_band_costs). Box sums slide down the band: a row
 * is added when it enters the window and taken out when it leaves, so
 * the result depends on the band's first row, which is fixed: never on
 * threads or batches. */
static void
sweep_band(const void *job_, void *ws_, int plane, int y0, int y1,
           float *stage)
{
    const sweep_job *job = job_;
    workspace *ws = ws_;
    const ap_sweep_args *a = job->args;
    int w = a->w, h = a->h, r = a->window / 2, ring_rows = 2 * r + 2;
    size_t cols_size = AP_NQ * (size_t)w;
    double depth = a->depths[a->first + plane];
    int box = a->cost != AP_COST_SSIM, ncc = a->cost == AP_COST_NCC;
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
            if (job->pads != NULL) {
                ap_project_sample_edges(job->proj, a->n, rays, w, depth,
                                        job->pads, h, w, ws->rows);
            } else {
                ap_project_sample(job->proj, a->n, rays, w, depth, a->srcs,
                                  h, w, ws->rows);
            }
            for (int v = 0; job->ref_sums != NULL && v < a->n; v++) {
                ap_unseen_span(ws->rows[v], w,
                               ring_span(ws, v, next, ring_rows));
            }
            for (int v = 0; v < a->n; v++) {
                double *cols = ws->cols + v * cols_size;
                const float *ref = a->ref + (size_t)next * w;
                const float *ref_out = leaves ? a->ref + (size_t)lo * w
                                              : NULL;
                const float *out = leaves ? ring_row(ws, v, lo, ring_rows, w)
                                          : NULL;
                if (ncc) {
                    ap_slide_warped(cols, w, ref_out, out, ref, ws->rows[v],
                                    1.0);
                    if (leaves) {
                        slide_unseen(a, ws, v, lo, ring_rows, -1.0);
                    }
                    slide_unseen(a, ws, v, next, ring_rows, 1.0);
                } else if (box) {   /* SAD */
                    ap_slide_differences(cols, w, ref_out, out, ref,
                                         ws->rows[v], 1.0);
                }
            }
            lo += leaves;
        }
        for (; box && lo < want_lo; lo++) {     /* the bottom edge */
            for (int v = 0; v < a->n; v++) {
                const float *ref = a->ref + (size_t)lo * w;
                const float *out = ring_row(ws, v, lo, ring_rows, w);
                if (ncc) {
                    ap_slide_warped(ws->cols + v * cols_size, w, NULL, NULL,
                                    ref, out, -1.0);
                    slide_unseen(a, ws, v, lo, ring_rows, -1.0);
                } else {
                    ap_slide_differences(ws->cols + v * cols_size, w, NULL,
                                         NULL, ref, out, -1.0);
                }
            }
        }
        memset(ws->acc, 0, (size_t)w * sizeof(double));
        for (int v = 0; v < a->n; v++) {
            if (ncc) {
                ncc_row(job, ws, v, yo, want_lo, want_hi, ring_rows);
            } else if (box) {
                ap_add_row_costs(ws->cols + v * cols_size, w, r, a->cost,
                                 job->gauss, ws->scratch, ws->acc);
            } else {    /* Gaussian: the window's rows, weighted */
                ssim_row(job, ws, v, yo, want_lo, want_hi, ring_rows);
            }
        }
        float *staged = stage + (size_t)(yo - y0) * w;
        for (int x = 0; x < w; x++) {
            staged[x] = (float)(ws->acc[x] / a->n);
        }
    }
}

static void *
sweep_worker(void *arg)
{
    sweep_job *job = arg;
    workspace ws;
    if (workspace_make(&ws, job->args) < 0) {
        atomic_store(&job->items.failed, 1);
    } else {
        ap_plane_bands_work(&job->items, sweep_band, job, &ws, ws.staged);
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

/* The window sums of the count, r and r^2 at every pixel where every
 * sample is seen: the reference's alone, made once a call. SSIM's are
 * made by the functions its rows with unseen samples use, so the same
 * bits; NCC's are box sums. 3 planes of h x w (24 bytes a pixel). */
typedef struct {
    const ap_sweep_args *args;
    const double *gauss;
    double *sums;
} ref_sums_job;

/* Rows [y0, y1) of the reference's sums. Returns 0, or -1 out of
 * memory. */
static int
ref_sums_rows(void *arg, int y0, int y1)
{
    const ref_sums_job *job = arg;
    const ap_sweep_args *a = job->args;
    int w = a->w, h = a->h, r = a->window / 2;
    int box = a->cost == AP_COST_NCC;
    size_t plane = (size_t)h * w, stride = (size_t)w + 1;
    double *cols = malloc(AP_NQ * (size_t)w * sizeof(double));
    double *scratch = malloc(2 * AP_NQ * stride * sizeof(double));
    float *seen = calloc((size_t)w, sizeof(float));   /* any value: seen */
    if (cols == NULL || scratch == NULL || seen == NULL) {
        free(cols);
        free(scratch);
        free(seen);
        return -1;
    }
    double ones[AP_MAX_WINDOW];
    for (int j = 0; j < AP_MAX_WINDOW; j++) {
        ones[j] = 1.0;
    }
    const double *weights = box ? ones : job->gauss;
    static const int quantity[3] = {AP_Q_COUNT, AP_Q_R, AP_Q_RR};
    for (int y = y0; y < y1; y++) {
        int lo = y - r < 0 ? 0 : y - r, hi = y + r + 1 > h ? h : y + r + 1;
        const float *refs[AP_MAX_WINDOW], *rows[AP_MAX_WINDOW];
        for (int j = lo; j < hi; j++) {
            refs[j - lo] = a->ref + (size_t)j * w;
            rows[j - lo] = seen;
        }
        ap_weighted_columns(cols, w, 0, w, refs, rows,
                            weights + (lo - y + r), hi - lo);
        if (box) {
            double *boxed = scratch + AP_NQ * stride;
            ap_box_sums(cols, AP_NQ, w, r, scratch, boxed);
            for (int k = 0; k < 3; k++) {
                memcpy(job->sums + k * plane + (size_t)y * w,
                       boxed + quantity[k] * stride, w * sizeof(double));
            }
            continue;
        }
        for (int k = 0; k < 3; k++) {
            ap_gauss_sums(cols + (size_t)quantity[k] * w, w, r, job->gauss,
                          job->sums + k * plane + (size_t)y * w);
        }
    }
    free(cols);
    free(scratch);
    free(seen);
    return 0;
}

/* The reference's sums, rows shared by the call's threads; NULL with
 * *status -1 out of memory, or -2 when a thread cannot start. */
static double *
ref_seen_sums(const ap_sweep_args *a, const double *gauss, int *status)
{
    ref_sums_job job = {a, gauss,
                        malloc(3 * (size_t)a->h * a->w * sizeof(double))};
    *status = job.sums == NULL ? -1
                               : ap_run_ranges(ref_sums_rows, &job, a->h,
                                               AP_SETUP_ROWS, a->threads);
    if (*status < 0) {
        free(job.sums);
        job.sums = NULL;
    }
    return job.sums;
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
    int status = ap_ray_table_make(&rays, a->ref_cam, a->h, a->w,
                                   a->threads);
    if (status < 0) {
        return status;
    }
    ap_projector *proj = calloc((size_t)a->n, sizeof(*proj));
    status = proj == NULL ? -1
                          : ap_projectors_make(proj, a->src_cams, a->n,
                                               &rays, a->depths[0],
                                               a->depths[a->d - 1],
                                               a->threads);
    if (status < 0) {
        free(proj);
        free(rays.planes);
        return status;
    }
    /* made once a call, they cost about one view's plane and save about
     * a third of each SSIM one: worth it from four plane-views a thread;
     * where memory or threads are short, every SSIM window makes its
     * own. NCC's windows slide only the warped sums and need them:
     * without them the call fails. */
    double *ref_sums = NULL;
    if (a->cost == AP_COST_NCC ||
        (a->cost == AP_COST_SSIM &&
         (long long)a->count * a->n >= 4LL * a->threads)) {
        ref_sums = ref_seen_sums(a, gauss, &status);
    }
    if (a->cost == AP_COST_NCC && ref_sums == NULL) {   /* NCC needs them */
        ap_projectors_free(proj, a->n);
        free(proj);
        free(rays.planes);
        return status;
    }
    /* sampling with half the clamps, where the copies fit (else the
     * sources as they are) */
    size_t pad_size = ap_edges_size(a->h, a->w);
    float *pads = pad_size <= INT_MAX
                      ? malloc((size_t)a->n * pad_size * sizeof(float))
                      : NULL;
    for (int v = 0; pads != NULL && v < a->n; v++) {
        ap_pad_edges(a->srcs + (size_t)v * a->h * a->w, a->h, a->w,
                     pads + v * pad_size);
    }
    int bands = (a->h + AP_SWEEP_BAND - 1) / AP_SWEEP_BAND;
    sweep_job job = {.args = a,
                     .rays = &rays,
                     .proj = proj,
                     .gauss = gauss,
                     .ref_sums = ref_sums,
                     .pads = pads,
                     .items = {.args = a,
                               .band_rows = AP_SWEEP_BAND,
                               .bands = bands,
                               .group = PLANE_GROUP,
                               .out = out}};
    status = ap_plane_bands_run(&job.items, sweep_worker, &job);
    free(pads);
    free(ref_sums);
    ap_projectors_free(proj, a->n);
    free(proj);
    free(rays.planes);
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
