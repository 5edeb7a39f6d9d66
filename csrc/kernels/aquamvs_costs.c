#include "aquamvs_costs.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "aquamvs_math.h"
#include "projector.h"
#include "sweep_rays.h"
#include "vectorize.h"
#include "workers.h"

typedef struct {
    const ap_sweep_args *args;
    const ap_ray_table *rays;
    const ap_projector *proj;       /* one a source view */
    double taps[AP_MAX_WINDOW / 2 + 1];  /* the filter's centre, then out */
    double least;                   /* the count's clamp */
    int box;                        /* NCC's box: taps all 1 */
    int bands;
    float *out;
    atomic_llong next_item;         /* (plane, band) pairs */
    atomic_int failed;
} parity_job;

/* The rows of a ring's slot, one slot an image row; a ring holds
 * 2 radius + 2 slots: a window's rows and the one entering it. */
enum { WARPED_M, WARPED_S, ALONG_M, ALONG_RM, ALONG_SM, WARPED_ROWS };
enum { CENTRED_COUNT, CENTRED_MR, CENTRED_MS, ALONG_RR, ALONG_SS, ALONG_RS,
       CENTRED_ROWS };

/* A worker's memory: per ring slot, a warped row's mask and values and
 * their quantities filtered along the row; a centred row's count, means
 * and products filtered along the row; three zero-padded rows to filter;
 * three sums down a window; the warp's row; the band's summed costs. */
typedef struct {
    double *warped, *centred, *padded, *down, *sample, *acc;
} workspace;

static int
workspace_make(workspace *ws, const ap_sweep_args *a)
{
    size_t w = (size_t)a->w, r = (size_t)a->window / 2, slots = 2 * r + 2;
    ws->warped = malloc(slots * WARPED_ROWS * w * sizeof(double));
    ws->centred = malloc(slots * CENTRED_ROWS * w * sizeof(double));
    ws->padded = calloc(3 * (w + 2 * r), sizeof(double));
    ws->down = malloc(3 * w * sizeof(double));
    ws->sample = malloc(w * sizeof(double));
    ws->acc = malloc(AP_SWEEP_BAND * w * sizeof(double));
    return ws->warped && ws->centred && ws->padded && ws->down &&
                   ws->sample && ws->acc
               ? 0
               : -1;
}

static void
workspace_free(workspace *ws)
{
    free(ws->warped);
    free(ws->centred);
    free(ws->padded);
    free(ws->down);
    free(ws->sample);
    free(ws->acc);
}

/* Row `row` of image row y's slot in a ring of `rows` rows a slot. */
static double *
slot(double *ring, int rows, int y, int radius, int w, int row)
{
    size_t s = (size_t)(y % (2 * radius + 2));
    return ring + (s * rows + row) * (size_t)w;
}

/* ------------------------------------------------------------ filters */

/* Filters sum every window's terms afresh, never a running sum less
 * what leaves it: near the image's borders zero padding leaves windows of
 * values 1e-6 of their neighbours', whose variance a running sum's
 * rounding would swamp. Each pass over a row takes two taps (along) or
 * four rows (down), contiguous loads that vectorise. */

/* out = the symmetric filter taps (centre first) along a row held in
 * padded[radius .. radius + w), with radius zeros each side. */
AP_VECTOR_CLONES void
ap_aquamvs_along(const double *restrict padded, int w, int radius,
                 const double *restrict taps, double *restrict out)
{
    const double *in = padded + radius;
    double g0 = taps[0];
    for (int x = 0; x < w; x++) {
        out[x] = g0 * in[x];
    }
    int j = 1;
    for (; j + 1 <= radius; j += 2) {
        /* shifted rows, not in[x - j]: GCC loads those lane by lane */
        const double *restrict a = in - j, *restrict b = in + j;
        const double *restrict c = in - j - 1, *restrict d = in + j + 1;
        double g1 = taps[j], g2 = taps[j + 1];
        for (int x = 0; x < w; x++) {
            out[x] += g1 * (a[x] + b[x]) + g2 * (c[x] + d[x]);
        }
    }
    for (; j <= radius; j++) {
        const double *restrict a = in - j, *restrict b = in + j;
        double g = taps[j];
        for (int x = 0; x < w; x++) {
            out[x] += g * (a[x] + b[x]);
        }
    }
}

/* out = the sum of rows[k] weighted by weights[k], k < count. */
AP_VECTOR_CLONES void
ap_aquamvs_down(const double *const *restrict rows,
                const double *restrict weights, int count, int w,
                double *restrict out)
{
    for (int x = 0; x < w; x++) {
        out[x] = 0.0;
    }
    int k = 0;
    for (; k + 4 <= count; k += 4) {
        const double *restrict a = rows[k], *restrict b = rows[k + 1];
        const double *restrict c = rows[k + 2], *restrict d = rows[k + 3];
        double ga = weights[k], gb = weights[k + 1], gc = weights[k + 2],
               gd = weights[k + 3];
        for (int x = 0; x < w; x++) {
            out[x] += (ga * a[x] + gb * b[x]) + (gc * c[x] + gd * d[x]);
        }
    }
    for (; k < count; k++) {
        const double *restrict a = rows[k];
        double ga = weights[k];
        for (int x = 0; x < w; x++) {
            out[x] += ga * a[x];
        }
    }
}

/* The box filter's two: ap_aquamvs_along and ap_aquamvs_down with
 * weights 1, spared their multiplications. */
AP_VECTOR_CLONES void
ap_aquamvs_box_along(const double *restrict padded, int w, int radius,
                     double *restrict out)
{
    const double *in = padded + radius;
    for (int x = 0; x < w; x++) {
        out[x] = in[x];
    }
    int j = 1;
    for (; j + 1 <= radius; j += 2) {
        const double *restrict a = in - j, *restrict b = in + j;
        const double *restrict c = in - j - 1, *restrict d = in + j + 1;
        for (int x = 0; x < w; x++) {
            out[x] += (a[x] + b[x]) + (c[x] + d[x]);
        }
    }
    for (; j <= radius; j++) {
        const double *restrict a = in - j, *restrict b = in + j;
        for (int x = 0; x < w; x++) {
            out[x] += a[x] + b[x];
        }
    }
}

AP_VECTOR_CLONES void
ap_aquamvs_box_down(const double *const *restrict rows, int count, int w,
                    double *restrict out)
{
    for (int x = 0; x < w; x++) {
        out[x] = 0.0;
    }
    int k = 0;
    for (; k + 4 <= count; k += 4) {
        const double *restrict a = rows[k], *restrict b = rows[k + 1];
        const double *restrict c = rows[k + 2], *restrict d = rows[k + 3];
        for (int x = 0; x < w; x++) {
            out[x] += (a[x] + b[x]) + (c[x] + d[x]);
        }
    }
    for (; k < count; k++) {
        const double *restrict a = rows[k];
        for (int x = 0; x < w; x++) {
            out[x] += a[x];
        }
    }
}

/* A row held in padded (ap_aquamvs_along) filtered along into out. */
static void
filter_along(const parity_job *job, const double *padded, double *out)
{
    int w = job->args->w, r = job->args->window / 2;
    if (job->box) {
        ap_aquamvs_box_along(padded, w, r, out);
    } else {
        ap_aquamvs_along(padded, w, r, job->taps, out);
    }
}

/* out[q] = the three rows `first`.. of each slot, filtered down the
 * window of rows around y (zero padding: rows off the image add
 * nothing). */
static void
filter_down(const parity_job *job, double *ring, int rows, int first,
            int y, double *out)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2;
    int lo = y - r < 0 ? 0 : y - r, hi = y + r >= a->h ? a->h - 1 : y + r;
    const double *window[AP_MAX_WINDOW];
    double weights[AP_MAX_WINDOW];
    for (int k = lo; k <= hi; k++) {
        weights[k - lo] = job->taps[k > y ? k - y : y - k];
    }
    for (int q = 0; q < 3; q++) {
        for (int k = lo; k <= hi; k++) {
            window[k - lo] = slot(ring, rows, k, r, w, first + q);
        }
        if (job->box) {
            ap_aquamvs_box_down(window, hi - lo + 1, w, out + (size_t)q * w);
        } else {
            ap_aquamvs_down(window, weights, hi - lo + 1, w,
                            out + (size_t)q * w);
        }
    }
}

/* -------------------------------------------------------------- rows */

/* The three quantities of a warped row (mask, r m, s m), or of a centred
 * row (rc^2, sc^2, rc sc), into the padded rows. */
AP_VECTOR_CLONES void
ap_aquamvs_warped_quantities(const double *restrict sample, int w,
                             const float *restrict ref, double *restrict m,
                             double *restrict s, double *restrict p0,
                             double *restrict p1, double *restrict p2)
{
    for (int x = 0; x < w; x++) {
        double seen = sample[x] == sample[x];
        double value = seen != 0.0 ? sample[x] : 0.0;
        m[x] = seen;
        s[x] = value;
        p0[x] = seen;
        p1[x] = ref[x] * seen;
        p2[x] = value;
    }
}

/* Centres a row by its own windows' means: writes the count (unclamped)
 * and means, and the products of the centred values into the padded
 * rows. */
AP_VECTOR_CLONES void
ap_aquamvs_centre(const double *restrict down, int w, double least,
                  const float *restrict ref, const double *restrict m,
                  const double *restrict s, double *restrict count,
                  double *restrict mr, double *restrict ms,
                  double *restrict p0, double *restrict p1,
                  double *restrict p2)
{
    for (int x = 0; x < w; x++) {
        double n = down[x];
        double c = n < least ? least : n;
        double mean_r = down[w + x] / c, mean_s = down[2 * w + x] / c;
        double rc = (ref[x] - mean_r) * m[x], sc = (s[x] - mean_s) * m[x];
        count[x] = n;
        mr[x] = mean_r;
        ms[x] = mean_s;
        p0[x] = rc * rc;
        p1[x] = sc * sc;
        p2[x] = rc * sc;
    }
}

AP_VECTOR_CLONES void
ap_aquamvs_ncc_row(const double *restrict down, const double *restrict n,
                   int w, double fewest, double *restrict acc)
{
    for (int x = 0; x < w; x++) {
        acc[x] += ap_aquamvs_ncc(n[x], down[x], down[w + x],
                                 down[2 * w + x], fewest);
    }
}

AP_VECTOR_CLONES void
ap_aquamvs_ssim_row(const double *restrict down, const double *restrict n,
                    const double *restrict mr, const double *restrict ms,
                    int w, double *restrict acc)
{
    for (int x = 0; x < w; x++) {
        acc[x] += ap_aquamvs_ssim(n[x], mr[x], ms[x], down[x], down[w + x],
                                  down[2 * w + x]);
    }
}

/* ---------------------------------------------------------------- band */

/* Warps image row y of view v into its slot and filters its quantities
 * along the row. */
static void
warp_row(const parity_job *job, workspace *ws, int v, double depth, int y)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2;
    size_t pw = (size_t)w + 2 * r;
    const double *rays[6];
    ap_ray_row(job->rays, y, rays);
    ap_project_sample_zeros(&job->proj[v], 1, rays, w, depth,
                            a->srcs + (size_t)v * a->h * w, a->h, w,
                            &ws->sample);
    double *p = ws->padded + r;
    ap_aquamvs_warped_quantities(
        ws->sample, w, a->ref + (size_t)y * w,
        slot(ws->warped, WARPED_ROWS, y, r, w, WARPED_M),
        slot(ws->warped, WARPED_ROWS, y, r, w, WARPED_S), p, p + pw,
        p + 2 * pw);
    for (int q = 0; q < 3; q++) {
        filter_along(job, ws->padded + q * pw,
                     slot(ws->warped, WARPED_ROWS, y, r, w, ALONG_M + q));
    }
}

/* Centres image row q by its windows' means and filters the products
 * along the row. */
static void
centre_row(const parity_job *job, workspace *ws, int q)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2;
    size_t pw = (size_t)w + 2 * r;
    filter_down(job, ws->warped, WARPED_ROWS, ALONG_M, q, ws->down);
    double *p = ws->padded + r;
    ap_aquamvs_centre(
        ws->down, w, job->least, a->ref + (size_t)q * w,
        slot(ws->warped, WARPED_ROWS, q, r, w, WARPED_M),
        slot(ws->warped, WARPED_ROWS, q, r, w, WARPED_S),
        slot(ws->centred, CENTRED_ROWS, q, r, w, CENTRED_COUNT),
        slot(ws->centred, CENTRED_ROWS, q, r, w, CENTRED_MR),
        slot(ws->centred, CENTRED_ROWS, q, r, w, CENTRED_MS), p, p + pw,
        p + 2 * pw);
    for (int k = 0; k < 3; k++) {
        filter_along(job, ws->padded + k * pw,
                     slot(ws->centred, CENTRED_ROWS, q, r, w, ALONG_RR + k));
    }
}

/* Adds view v's costs of rows [y0, y1) of one plane to ws->acc. Every
 * row is computed from its own windows alone: no running sums, so the
 * band's first row changes no bit. */
static void
band_view(const parity_job *job, workspace *ws, int v, double depth,
          int y0, int y1)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, h = a->h, r = a->window / 2;
    int next_q = y0 - r < 0 ? 0 : y0 - r;
    int next_w = next_q - r < 0 ? 0 : next_q - r;
    double fewest = (double)(a->window * a->window / 2);
    for (int p = y0; p < y1; p++) {
        int need_q = p + r >= h ? h - 1 : p + r;
        for (; next_q <= need_q; next_q++) {
            int need_w = next_q + r >= h ? h - 1 : next_q + r;
            for (; next_w <= need_w; next_w++) {
                warp_row(job, ws, v, depth, next_w);
            }
            centre_row(job, ws, next_q);
        }
        filter_down(job, ws->centred, CENTRED_ROWS, ALONG_RR, p, ws->down);
        const double *n = slot(ws->centred, CENTRED_ROWS, p, r, w,
                               CENTRED_COUNT);
        double *acc = ws->acc + (size_t)(p - y0) * w;
        if (a->cost == AP_COST_NCC) {
            ap_aquamvs_ncc_row(ws->down, n, w, fewest, acc);
        } else {
            ap_aquamvs_ssim_row(
                ws->down, n,
                slot(ws->centred, CENTRED_ROWS, p, r, w, CENTRED_MR),
                slot(ws->centred, CENTRED_ROWS, p, r, w, CENTRED_MS), w,
                acc);
        }
    }
}

static void
band(const parity_job *job, workspace *ws, int plane, int y0, int y1)
{
    const ap_sweep_args *a = job->args;
    size_t w = (size_t)a->w, d = (size_t)a->d;
    double depth = a->depths[a->first + plane];
    memset(ws->acc, 0, (size_t)(y1 - y0) * w * sizeof(double));
    for (int v = 0; v < a->n; v++) {
        band_view(job, ws, v, depth, y0, y1);
    }
    for (int y = y0; y < y1; y++) {
        const double *acc = ws->acc + (size_t)(y - y0) * w;
        float *out = job->out + (size_t)y * w * d + a->first + plane;
        for (size_t x = 0; x < w; x++) {
            out[x * d] = (float)(acc[x] / a->n);
        }
    }
}

static void *
parity_worker(void *arg)
{
    parity_job *job = arg;
    const ap_sweep_args *a = job->args;
    workspace ws;
    if (workspace_make(&ws, a) < 0) {
        atomic_store(&job->failed, 1);
        workspace_free(&ws);
        return NULL;
    }
    long long item;
    while ((item = atomic_fetch_add(&job->next_item, 1)) <
               (long long)a->count * job->bands &&
           !atomic_load(&job->failed)) {
        int plane = (int)(item / job->bands);
        int y0 = (int)(item % job->bands) * AP_SWEEP_BAND;
        int y1 = y0 + AP_SWEEP_BAND > a->h ? a->h : y0 + AP_SWEEP_BAND;
        band(job, &ws, plane, y0, y1);
    }
    workspace_free(&ws);
    return NULL;
}

int
ap_aquamvs_cost_volume(const ap_sweep_args *a, float *out)
{
    int r = a->window / 2;
    parity_job *job = calloc(1, sizeof(*job));
    ap_ray_table rays = {NULL, 0, 0};
    ap_projector *proj = calloc((size_t)a->n, sizeof(*proj));
    int status = -1;
    if (job == NULL || proj == NULL ||
        ap_ray_table_make(&rays, a->ref_cam, a->h, a->w) < 0) {
        goto done;
    }
    if (ap_projectors_make(proj, a->src_cams, a->n, &rays, a->depths[0],
                           a->depths[a->d - 1]) < 0) {
        free(proj);
        proj = NULL;
        goto done;
    }
    for (int v = 0; v < a->n; v++) {
        proj[v].steps += AP_AQUAMVS_NEWTON_EXTRA;
    }
    if (a->cost == AP_COST_SSIM) {
        double gauss[AP_MAX_WINDOW];
        ap_gauss_weights(r, gauss);
        memcpy(job->taps, gauss + r, (size_t)(r + 1) * sizeof(double));
        job->least = AP_AQUAMVS_SSIM_LEAST;
    } else {
        for (int j = 0; j <= r; j++) {
            job->taps[j] = 1.0;
        }
        job->least = AP_AQUAMVS_NCC_LEAST;
        job->box = 1;
    }
    job->args = a;
    job->rays = &rays;
    job->proj = proj;
    job->out = out;
    job->bands = (a->h + AP_SWEEP_BAND - 1) / AP_SWEEP_BAND;
    long long items = (long long)a->count * job->bands;
    int threads = a->threads < items ? a->threads : (int)items;
    status = ap_run_workers(parity_worker, job, threads, &job->failed);
    if (status == 0 && atomic_load(&job->failed)) {
        status = -1;
    }
    ap_projectors_free(proj, a->n);
done:
    free(proj);
    free(rays.planes);
    free(job);
    return status;
}
