#include "parity_costs.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity_filters.h"
#include "parity_math.h"
#include "parity_rows.h"
#include "../cpu/staged_planes.h"
#include "../cpu/workers.h"
#include "../geometry/projector.h"
#include "../geometry/sweep_rays.h"

/* What a view that sees every sample of a window shares with every other
 * such view and depth: with m = 1 the count, the reference's means and
 * its centred values depend on the reference image alone. Rows of h x w,
 * made once a call (ref_planes_make) by the same filters, in the same
 * order, as a view's rows (so they are the bits a view computing them
 * would get). */
typedef struct {
    double *ones;       /* one row: the mask of a row that sees every
                         * sample */
    double *along_1;    /* one row: ones filtered along (every row's) */
    double *along_r;    /* r filtered along */
    double *count;      /* filter(1), unclamped */
    double *mean_r;     /* filter(r) / count, count clamped */
    double *rc;         /* r - mean_r */
    double *along_rr;   /* rc^2 filtered along */
    double *srr;        /* along_rr filtered down: filter(rc^2) */
} ref_planes;

typedef struct {
    const ap_sweep_args *args;
    const ap_ray_table *rays;
    const ap_projector *proj;       /* one a source view */
    const ref_planes *ref;
    const float *pads;              /* the sources padded (ap_pad_zeros),
                                     * NULL where too big to index */
    double taps[AP_MAX_WINDOW / 2 + 1];  /* the filter's centre, then out */
    double least;                   /* the count's clamp */
    int box;                        /* NCC's box: taps all 1 */
    /* (plane group, band) pairs (plan_items): staged where a group is
     * more than 1 plane */
    ap_plane_bands items;
} parity_job;

/* A warped row in a view's ring: its values s m (the warp writes its
 * samples there) and mask m, zero-padded (radius zeros each side) so
 * that they filter along in place; s m filtered along; m, and m and r m
 * filtered along, the reference's rows (ref_planes) where the row sees
 * every sample, else its own. */
typedef struct {
    double *s_pad, *m_pad, *along_s;
    double *own_m, *own_rm;
    const double *m, *along_m, *along_rm;
    int unseen;                     /* some sample not seen */
} warped_slot;

/* A centred row in a view's ring: the count, the means and the centred
 * products filtered along; count, mean_r and rc^2 the reference's where
 * every sample of the row's windows is seen ("fast"), else its own. */
typedef struct {
    double *own_count, *own_mr, *ms, *own_rr, *along_ss, *along_rs;
    const double *count, *mr, *along_rr;
    int slow;                       /* not fast */
} centred_slot;

/* Rows centred, or costed, together: the window sums of neighbouring
 * rows share all but a few rows (ap_aquamvs_box_down_group). */
enum { GROUP = 4 };

/* A view's rings of 2 radius + GROUP slots (a group's windows' rows),
 * one slot an image row. */
typedef struct {
    warped_slot *warped;
    centred_slot *centred;
} view_rings;

/* A worker's memory: every view's rings, three zero-padded rows to
 * filter along, a group's two quantities filtered down (GROUP rows
 * each) and two rows more, a group's summed costs; one block holds every
 * row. */
typedef struct {
    view_rings *views;
    double *block, *padded, *down_a, *down_b, *down, *acc;
    float *staged;                  /* group x band_rows x w, or NULL */
} workspace;

/* n doubles rounded up to whole cache lines (64 bytes, an AVX-512
 * vector): every ring row starts on one, so that the filters down a
 * window, whose vectors lie at multiples of eight doubles from a row's
 * start, never load one straddling two lines (a split load costs two) */
static size_t
lines(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* n doubles, zeroed, from a cache line's boundary; NULL if they cannot be
 * had. free() frees them. */
static double *
zeroed_lines(size_t n)
{
    void *p = NULL;
    if (n > SIZE_MAX / sizeof(double) ||
        posix_memalign(&p, 64, (n ? n : 1) * sizeof(double)) != 0) {
        return NULL;
    }
    memset(p, 0, n * sizeof(double));
    return p;
}

static int
workspace_make(workspace *ws, const ap_sweep_args *a, size_t staged)
{
    size_t w = (size_t)a->w, r = (size_t)a->window / 2;
    size_t pw = lines(w + 2 * r), lw = lines(w);
    size_t slots = 2 * r + GROUP, n = (size_t)a->n;
    size_t per_view = slots * (2 * pw + 3 * lw) + slots * 6 * lw;
    size_t total = n * per_view + 3 * pw + (3 * GROUP + 2) * lw;
    ws->views = calloc(n, sizeof(*ws->views));
    ws->block = zeroed_lines(total);
    ws->staged = staged ? malloc(staged * sizeof(float)) : NULL;
    if (ws->views == NULL || ws->block == NULL ||
        (staged && ws->staged == NULL)) {
        return -1;
    }
    double *next = ws->block;
    for (size_t v = 0; v < n; v++) {
        view_rings *vr = &ws->views[v];
        vr->warped = calloc(slots, sizeof(*vr->warped));
        vr->centred = calloc(slots, sizeof(*vr->centred));
        if (vr->warped == NULL || vr->centred == NULL) {
            return -1;
        }
        for (size_t s = 0; s < slots; s++) {
            warped_slot *ws_ = &vr->warped[s];
            ws_->s_pad = next;
            ws_->m_pad = next + pw;
            ws_->along_s = next + 2 * pw;
            ws_->own_m = next + 2 * pw + lw;
            ws_->own_rm = next + 2 * pw + 2 * lw;
            next += 2 * pw + 3 * lw;
            centred_slot *cs = &vr->centred[s];
            cs->own_count = next;
            cs->own_mr = next + lw;
            cs->ms = next + 2 * lw;
            cs->own_rr = next + 3 * lw;
            cs->along_ss = next + 4 * lw;
            cs->along_rs = next + 5 * lw;
            next += 6 * lw;
        }
    }
    ws->padded = next;
    ws->down_a = next + 3 * pw;
    ws->down_b = ws->down_a + GROUP * lw;
    ws->down = ws->down_b + GROUP * lw;
    ws->acc = ws->down + 2 * lw;
    return 0;
}

/* Frees what workspace_make made, wherever it stopped. */
static void
workspace_free(workspace *ws, int n)
{
    for (int v = 0; ws->views != NULL && v < n; v++) {
        free(ws->views[v].warped);
        free(ws->views[v].centred);
    }
    free(ws->views);
    free(ws->block);
    free(ws->staged);
}

/* Views warped a call (their samples' placement shared); rows of
 * fewer than this many rows are not worth their overlap. */
enum { AP_WARP_VIEWS = 8, AP_PARITY_LEAST_BAND = 32 };

/* Image row y's slot in a ring. */
static size_t
slot(int y, int radius)
{
    return (size_t)(y % (2 * radius + GROUP));
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

/* The rows [*lo, *hi] of the window around row y that lie on the
 * image (zero padding: rows off it add nothing). */
static void
window_rows(const parity_job *job, int y, int *lo, int *hi)
{
    int r = job->args->window / 2, h = job->args->h;
    *lo = y - r < 0 ? 0 : y - r;
    *hi = y + r >= h ? h - 1 : y + r;
}

/* out = the rows window[k - lo] of the window around y filtered down. */
static void
filter_down(const parity_job *job, const double *const *window, int y,
            double *out)
{
    int lo, hi;
    window_rows(job, y, &lo, &hi);
    if (job->box) {
        ap_aquamvs_box_down(window, hi - lo + 1, job->args->w, out);
        return;
    }
    int r = job->args->window / 2;
    if (hi - lo == 2 * r) {
        ap_aquamvs_down_symmetric(window, r, job->taps, job->args->w, out);
        return;
    }
    double weights[AP_MAX_WINDOW];
    for (int k = lo; k <= hi; k++) {
        weights[k - lo] = job->taps[k > y ? k - y : y - k];
    }
    ap_aquamvs_down(window, weights, hi - lo + 1, job->args->w, out);
}

/* The first and last of the rows every window of image rows [q0, q0 +
 * GROUP) holds, q0 a multiple of GROUP (the group's last row at most
 * the image's last). */
static void
group_core(const parity_job *job, int q0, int *first, int *last)
{
    int end = q0 + GROUP - 1 < job->args->h ? q0 + GROUP - 1
                                            : job->args->h - 1;
    int unused;
    window_rows(job, end, first, &unused);
    window_rows(job, q0, &unused, last);
}

/* out (rows of w) = rows [q0, q0 + g) filtered down, all of one group
 * (rows [k GROUP, (k + 1) GROUP)), where window[k - lo(q0)] holds row k
 * from the first row of the first window to the last of the last. The
 * box's sums share the rows common to the whole group's windows, so a
 * row's sum has the same bits whichever of its group's rows are asked
 * for; the Gaussian's weights differ from row to row. */
static void
filter_down_group(const parity_job *job, const double *const *window,
                  int q0, int g, double *out)
{
    int w = job->args->w, lo[GROUP] = {0}, hi[GROUP] = {0}, base, first,
        last;
    window_rows(job, q0, &base, &hi[0]);
    for (int i = 0; i < g; i++) {
        window_rows(job, q0 + i, &lo[i], &hi[i]);
        lo[i] -= base;
        hi[i] -= base;
    }
    group_core(job, q0 - q0 % GROUP, &first, &last);
    if (job->box && first <= last) {
        ap_aquamvs_box_down_group(window, first - base, last - base, lo, hi,
                                  g, w, out);
        return;
    }
    int r = job->args->window / 2;
    if (!job->box && g == GROUP && hi[0] - lo[0] == 2 * r &&
        hi[GROUP - 1] - lo[GROUP - 1] == 2 * r) {
        ap_aquamvs_down_symmetric_four(window, r, job->taps, w, out);
        return;
    }
    for (int i = 0; i < g; i++) {
        filter_down(job, window + lo[i], q0 + i, out + (size_t)i * w);
    }
}

/* ------------------------------------------------- the reference's rows */

static void
ref_planes_free(ref_planes *p)
{
    free(p->ones);
    free(p->along_1);
    free(p->along_r);
    free(p->count);
    free(p->mean_r);
    free(p->rc);
    free(p->along_rr);
    free(p->srr);
}

/* A piece of ref_planes_make: rows [y0, y1) of one of its passes. Each
 * row depends on the reference and the passes before alone, so the
 * call's threads share the rows, and no bit depends on how. */
typedef struct {
    const parity_job *job;
    ref_planes *p;
} ref_rows_job;

/* A zero-padded row for filter_along, or NULL out of memory. */
static double *
padded_row(const ap_sweep_args *a)
{
    return calloc((size_t)a->w + 2 * (size_t)(a->window / 2),
                  sizeof(double));
}

/* The first pass: r filtered along each row. */
static int
ref_along_rows(void *arg, int y0, int y1)
{
    const ref_rows_job *rj = arg;
    const ap_sweep_args *a = rj->job->args;
    size_t w = (size_t)a->w, r = (size_t)a->window / 2;
    double *padded = padded_row(a);
    if (padded == NULL) {
        return -1;
    }
    for (size_t y = (size_t)y0; y < (size_t)y1; y++) {
        for (size_t x = 0; x < w; x++) {
            padded[r + x] = a->ref[y * w + x] * 1.0;
        }
        filter_along(rj->job, padded, rj->p->along_r + y * w);
    }
    free(padded);
    return 0;
}

/* The second: the count and mean of r down each window, the centred r,
 * and its square filtered along. */
static int
ref_centre_rows(void *arg, int q0, int q1)
{
    const ref_rows_job *rj = arg;
    const parity_job *job = rj->job;
    const ap_sweep_args *a = job->args;
    ref_planes *p = rj->p;
    size_t w = (size_t)a->w, r = (size_t)a->window / 2;
    const double *window[AP_MAX_WINDOW];
    double *padded = padded_row(a), *sum_r = malloc(w * sizeof(double));
    if (padded == NULL || sum_r == NULL) {
        free(padded);
        free(sum_r);
        return -1;
    }
    for (int q = q0; q < q1; q++) {
        int lo, hi;
        size_t row = (size_t)q * w;
        window_rows(job, q, &lo, &hi);
        for (int k = lo; k <= hi; k++) {
            window[k - lo] = p->along_1;
        }
        filter_down(job, window, q, p->count + row);
        for (int k = lo; k <= hi; k++) {
            window[k - lo] = p->along_r + (size_t)k * w;
        }
        filter_down(job, window, q, sum_r);
        ap_aquamvs_centre_ref(p->count + row, sum_r, (int)w, job->least,
                              a->ref + row, p->mean_r + row, p->rc + row,
                              padded + r);
        filter_along(job, padded, p->along_rr + row);
    }
    free(padded);
    free(sum_r);
    return 0;
}

/* The third: the centred r^2 down each window. */
static int
ref_srr_rows(void *arg, int y0, int y1)
{
    const ref_rows_job *rj = arg;
    const ap_sweep_args *a = rj->job->args;
    ref_planes *p = rj->p;
    size_t w = (size_t)a->w;
    const double *window[AP_MAX_WINDOW];
    for (int y = y0; y < y1; y++) {
        int lo, hi;
        window_rows(rj->job, y, &lo, &hi);
        for (int k = lo; k <= hi; k++) {
            window[k - lo] = p->along_rr + (size_t)k * w;
        }
        filter_down(rj->job, window, y, p->srr + (size_t)y * w);
    }
    return 0;
}

/* Fills p (zeroed first) for job's reference image, rows shared by the
 * call's threads. Returns 0, -1 out of memory, or -2 when a thread
 * cannot start (ref_planes_free after, either way). */
static int
ref_planes_make(ref_planes *p, const parity_job *job)
{
    const ap_sweep_args *a = job->args;
    size_t w = (size_t)a->w, h = (size_t)a->h, r = (size_t)a->window / 2;
    double *ones = padded_row(a);
    p->ones = malloc(w * sizeof(double));
    p->along_1 = malloc(w * sizeof(double));
    p->along_r = malloc(h * w * sizeof(double));
    p->count = malloc(h * w * sizeof(double));
    p->mean_r = malloc(h * w * sizeof(double));
    p->rc = malloc(h * w * sizeof(double));
    p->along_rr = malloc(h * w * sizeof(double));
    p->srr = malloc(h * w * sizeof(double));
    if (ones == NULL || p->ones == NULL || p->along_1 == NULL ||
        p->along_r == NULL || p->count == NULL || p->mean_r == NULL ||
        p->rc == NULL || p->along_rr == NULL || p->srr == NULL) {
        free(ones);
        return -1;
    }
    for (size_t x = 0; x < w; x++) {
        ones[r + x] = 1.0;
        p->ones[x] = 1.0;
    }
    filter_along(job, ones, p->along_1);
    free(ones);
    ref_rows_job rj = {job, p};
    int (*const passes[3])(void *, int, int) = {
        ref_along_rows, ref_centre_rows, ref_srr_rows};
    for (int k = 0; k < 3; k++) {
        int status = ap_run_ranges(passes[k], &rj, a->h, AP_SETUP_ROWS,
                                   a->threads);
        if (status < 0) {
            return status;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- band */

/* Splits view v's warped row y, in its slot, into values and mask, and
 * filters its quantities along the row: only s m where every sample is
 * seen, whose mask is the reference's row of ones. */
static void
warped_row(const parity_job *job, workspace *ws, int v, int y)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2;
    warped_slot *s = &ws->views[v].warped[slot(y, r)];
    const ref_planes *ref = job->ref;
    s->unseen = ap_aquamvs_unseen(s->s_pad + r, w);
    if (s->unseen) {
        ap_aquamvs_split(s->s_pad + r, w, s->m_pad + r);
        ap_aquamvs_ref_seen(a->ref + (size_t)y * w, s->m_pad + r, w,
                            ws->padded + r);
        filter_along(job, s->m_pad, s->own_m);
        filter_along(job, ws->padded, s->own_rm);
        s->m = s->m_pad + r;
        s->along_m = s->own_m;
        s->along_rm = s->own_rm;
    } else {
        s->m = ref->ones;
        s->along_m = ref->along_1;
        s->along_rm = ref->along_r + (size_t)y * w;
    }
    filter_along(job, s->s_pad, s->along_s);
}

/* Warps image row y of every view into its slot of the view's ring, and
 * splits it there: the views share the rays' placement
 * (ap_project_sample_padded). */
static void
warp_row(const parity_job *job, workspace *ws, double depth, int y)
{
    const ap_sweep_args *a = job->args;
    int r = a->window / 2;
    double *out[AP_WARP_VIEWS];
    const double *rays[6];
    ap_ray_row(job->rays, y, rays);
    for (int v0 = 0; v0 < a->n; v0 += AP_WARP_VIEWS) {
        int views = a->n - v0 < AP_WARP_VIEWS ? a->n - v0 : AP_WARP_VIEWS;
        for (int v = 0; v < views; v++) {
            out[v] = ws->views[v0 + v].warped[slot(y, r)].s_pad + r;
        }
        if (job->pads != NULL) {
            ap_project_sample_padded(
                &job->proj[v0], views, rays, a->w, depth,
                job->pads + v0 * ap_padded_size(a->h, a->w), a->h, a->w,
                out);
        } else {
            ap_project_sample_zeros(&job->proj[v0], views, rays, a->w,
                                    depth, a->srcs + (size_t)v0 * a->h * a->w,
                                    a->h, a->w, out);
        }
    }
    for (int v = 0; v < a->n; v++) {
        warped_row(job, ws, v, y);
    }
}

/* Whether any slot of rows [lo, hi] of a ring has its flag set. */
static int
warped_unseen(const warped_slot *ring, int lo, int hi, int r)
{
    int any = 0;
    for (int k = lo; k <= hi; k++) {
        any |= ring[slot(k, r)].unseen;
    }
    return any;
}

static int
centred_slow(const centred_slot *ring, int lo, int hi, int r)
{
    int any = 0;
    for (int k = lo; k <= hi; k++) {
        any |= ring[slot(k, r)].slow;
    }
    return any;
}

/* Centres view v's image row q by its windows' means and filters the
 * products along the row, given its sum of s m (ss). Fast where every
 * sample of its windows is seen. */
static void
centre_row(const parity_job *job, workspace *ws, int v, int q,
           const double *ss)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2, lo, hi;
    size_t pw = (size_t)w + 2 * r, row = (size_t)q * w;
    view_rings *vr = &ws->views[v];
    const warped_slot *ring = vr->warped, *here = &ring[slot(q, r)];
    centred_slot *c = &vr->centred[slot(q, r)];
    const ref_planes *ref = job->ref;
    const double *window[AP_MAX_WINDOW];
    double *p = ws->padded + r;
    window_rows(job, q, &lo, &hi);
    c->slow = warped_unseen(ring, lo, hi, r);
    if (!c->slow) {
        ap_aquamvs_centre_seen(ss, ref->count + row, w, job->least,
                               ref->rc + row, here->s_pad + r, c->ms,
                               p + pw, p + 2 * pw);
        c->count = ref->count + row;
        c->mr = ref->mean_r + row;
        c->along_rr = ref->along_rr + row;
    } else {
        for (int k = lo; k <= hi; k++) {
            window[k - lo] = ring[slot(k, r)].along_m;
        }
        filter_down(job, window, q, ws->down);
        for (int k = lo; k <= hi; k++) {
            window[k - lo] = ring[slot(k, r)].along_rm;
        }
        filter_down(job, window, q, ws->down + w);
        ap_aquamvs_centre(ws->down, ws->down + w, ss, w, job->least,
                          a->ref + row, here->m, here->s_pad + r,
                          c->own_count, c->own_mr, c->ms, p, p + pw,
                          p + 2 * pw);
        filter_along(job, ws->padded, c->own_rr);
        c->count = c->own_count;
        c->mr = c->own_mr;
        c->along_rr = c->own_rr;
    }
    filter_along(job, ws->padded + pw, c->along_ss);
    filter_along(job, ws->padded + 2 * pw, c->along_rs);
}

/* Centres view v's rows [q0, q0 + g), all of one group, their warped
 * rows in its ring. */
static void
centre_rows(const parity_job *job, workspace *ws, int v, int q0, int g)
{
    int r = job->args->window / 2, first, last, unused;
    const warped_slot *ring = ws->views[v].warped;
    const double *window[AP_MAX_WINDOW + GROUP] = {NULL};
    window_rows(job, q0, &first, &unused);
    window_rows(job, q0 + g - 1, &unused, &last);
    for (int k = first; k <= last; k++) {
        window[k - first] = ring[slot(k, r)].along_s;
    }
    filter_down_group(job, window, q0, g, ws->down_a);
    for (int i = 0; i < g; i++) {
        centre_row(job, ws, v, q0 + i, ws->down_a + (size_t)i * job->args->w);
    }
}

/* Adds view v's costs of output rows [y0, y0 + g), all of one group, to
 * the rows of ws->acc. */
static void
cost_rows(const parity_job *job, workspace *ws, int v, int y0, int g)
{
    const ap_sweep_args *a = job->args;
    int w = a->w, r = a->window / 2, first, last, unused;
    const centred_slot *ring = ws->views[v].centred;
    const double *window[AP_MAX_WINDOW + GROUP] = {NULL};
    window_rows(job, y0, &first, &unused);
    window_rows(job, y0 + g - 1, &unused, &last);
    for (int k = first; k <= last; k++) {
        window[k - first] = ring[slot(k, r)].along_ss;
    }
    filter_down_group(job, window, y0, g, ws->down_a);
    for (int k = first; k <= last; k++) {
        window[k - first] = ring[slot(k, r)].along_rs;
    }
    filter_down_group(job, window, y0, g, ws->down_b);
    for (int i = 0; i < g; i++) {
        int y = y0 + i, lo, hi;
        const centred_slot *here = &ring[slot(y, r)];
        const double *srr = job->ref->srr + (size_t)y * w;
        const double *sss = ws->down_a + (size_t)i * w;
        const double *srs = ws->down_b + (size_t)i * w;
        double *acc = ws->acc + (size_t)i * w;
        window_rows(job, y, &lo, &hi);
        if (centred_slow(ring, lo, hi, r)) {
            const double *rows[AP_MAX_WINDOW];
            for (int k = lo; k <= hi; k++) {
                rows[k - lo] = ring[slot(k, r)].along_rr;
            }
            filter_down(job, rows, y, ws->down);
            srr = ws->down;
        }
        if (a->cost == AP_COST_NCC) {
            double fewest = (double)(a->window * a->window / 2);
            ap_aquamvs_ncc_row(srr, sss, srs, here->count, w, fewest, acc);
        } else {
            ap_aquamvs_ssim_row(srr, sss, srs, here->count, here->mr,
                                here->ms, w, acc);
        }
    }
}

/* The rows from q to the end of its group or `last`, whichever first. */
static int
group_rows(int q, int last)
{
    int end = q - q % GROUP + GROUP - 1;
    return (end < last ? end : last) - q + 1;
}

/* Rows [y0, y1) of one plane, a group at a time. Every row is computed
 * from its own windows alone, no running sums (window sums share rows
 * within a group, never subtract them, filter_down_group), so where a
 * band starts changes no bit; and each output row adds its views' costs
 * in view order. */
static void
band(const void *job_, void *ws_, int plane, int y0, int y1, float *stage)
{
    const parity_job *job = job_;
    workspace *ws = ws_;
    const ap_sweep_args *a = job->args;
    int w = a->w, h = a->h, r = a->window / 2;
    size_t d = (size_t)a->d;
    double depth = a->depths[a->first + plane];
    int next_q = y0 - r < 0 ? 0 : y0 - r;
    int next_w = next_q - r < 0 ? 0 : next_q - r;
    for (int p = y0, g; p < y1; p += g) {
        g = group_rows(p, y1 - 1);
        int need_q = p + g - 1 + r >= h ? h - 1 : p + g - 1 + r;
        while (next_q <= need_q) {
            int gq = group_rows(next_q, need_q), last = next_q + gq - 1;
            int need_w = last + r >= h ? h - 1 : last + r;
            for (; next_w <= need_w; next_w++) {
                warp_row(job, ws, depth, next_w);
            }
            for (int v = 0; v < a->n; v++) {
                centre_rows(job, ws, v, next_q, gq);
            }
            next_q += gq;
        }
        memset(ws->acc, 0, (size_t)g * w * sizeof(double));
        for (int v = 0; v < a->n; v++) {
            cost_rows(job, ws, v, p, g);
        }
        for (int i = 0; i < g; i++) {
            const double *acc = ws->acc + (size_t)i * w;
            if (stage != NULL) {
                float *row = stage + (size_t)(p + i - y0) * w;
                for (int x = 0; x < w; x++) {
                    row[x] = (float)(acc[x] / a->n);
                }
                continue;
            }
            float *out = job->items.out + (size_t)(p + i) * w * d +
                         a->first + plane;
            for (int x = 0; x < w; x++) {
                out[(size_t)x * d] = (float)(acc[x] / a->n);
            }
        }
    }
}

static void *
parity_worker(void *arg)
{
    parity_job *job = arg;
    const ap_sweep_args *a = job->args;
    workspace ws = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t plane_size = (size_t)job->items.band_rows * a->w;
    int group = job->items.group;
    if (workspace_make(&ws, a, group > 1 ? group * plane_size : 0) < 0) {
        atomic_store(&job->items.failed, 1);
    } else {
        ap_plane_bands_work(&job->items, band, job, &ws, ws.staged);
    }
    workspace_free(&ws, a->n);
    return NULL;
}

/* A worker's staged costs at most (../cpu/staged_planes.h). */
enum { AP_PARITY_STAGE_BYTES = 8 << 20 };

/* The rows of a band: the fewest bands that share `count` planes out
 * to the threads best, a band warping and centring 2 radius rows each
 * side that its neighbours do too (its time taken as its rows plus
 * those); bands of at least AP_PARITY_LEAST_BAND rows. Where bands
 * start changes no bit of the volume (band). */
static int
band_rows(int h, int radius, int count, int threads)
{
    int most = (h + AP_PARITY_LEAST_BAND - 1) / AP_PARITY_LEAST_BAND;
    int best_rows = h;
    long long best = -1;
    for (int bands = 1; bands <= most && bands <= 4 * threads; bands++) {
        int rows = (h + bands - 1) / bands;
        long long items = (long long)count * ((h + rows - 1) / rows);
        long long time = (items + threads - 1) / threads *
                         (rows + 4LL * radius);
        if (best < 0 || time < best) {
            best = time;
            best_rows = rows;
        }
    }
    return best_rows;
}

/* The time, in planes of a band, until the last of `threads` workers is
 * done, each taking the next item as it comes free: `bands` items of
 * `group` planes for each whole group in `count`, then `bands` items of
 * the planes left over. Items all alike are done soonest that way, so
 * the last ones end at the least time by which the workers' free time
 * could hold them. */
static long long
makespan(long long count, int bands, int group, int threads)
{
    long long whole = count / group * bands, rest = count % group;
    /* most workers end the whole groups at `early`, whole % threads of
     * them a group later */
    long long early = whole / threads * group;
    long long late_workers = whole % threads;
    long long end = late_workers ? early + group : early;
    if (rest == 0) {
        return end;
    }
    long long items = bands, best = -1;     /* of the planes left over */
    /* the least end, counted in steps from either kind of worker */
    for (int pass = 0; pass < 2; pass++) {
        long long from = pass == 0 ? early : early + group;
        for (long long k = 1; k <= items; k++) {
            long long t = from + k * rest, fit = 0;
            fit += (threads - late_workers) * ((t - early) / rest);
            fit += t >= early + group
                       ? late_workers * ((t - early - group) / rest)
                       : 0;
            if (fit >= items) {
                best = best < 0 || t < best ? t : best;
                break;
            }
        }
    }
    return best > end ? best : end;
}

/* The work items: bands of band_rows through groups of planes, staged
 * where more than one (at most AP_PARITY_STAGE_BYTES a worker): the
 * most planes a group, of 16, 8, 4 and 2, whose items the threads get
 * through as soon as single planes; else single planes, unstaged. */
static void
plan_items(parity_job *job, int h, int w, int radius, int count,
           int threads)
{
    ap_plane_bands *items = &job->items;
    items->band_rows = band_rows(h, radius, count, threads);
    items->bands = (h + items->band_rows - 1) / items->band_rows;
    long long single = makespan(count, items->bands, 1, threads);
    items->group = 1;
    for (int group = AP_STAGED_PLANES; group > 1; group /= 2) {
        if ((size_t)group * items->band_rows * w * sizeof(float) <=
                AP_PARITY_STAGE_BYTES &&
            makespan(count, items->bands, group, threads) <= single) {
            items->group = group;
            return;
        }
    }
}

int
ap_aquamvs_cost_volume(const ap_sweep_args *a, float *out)
{
    int r = a->window / 2;
    parity_job *job = calloc(1, sizeof(*job));
    ap_ray_table rays = {NULL, 0, 0};
    ap_projector *proj = calloc((size_t)a->n, sizeof(*proj));
    ref_planes ref = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t pad_size = ap_padded_size(a->h, a->w);
    int padded = pad_size <= INT_MAX;
    float *pads = padded ? malloc((size_t)a->n * pad_size * sizeof(float))
                         : NULL;
    int status = -1;
    if (job == NULL || proj == NULL || (padded && pads == NULL) ||
        (status = ap_ray_table_make(&rays, a->ref_cam, a->h, a->w,
                                    a->threads)) < 0) {
        goto done;
    }
    status = ap_projectors_make(proj, a->src_cams, a->n, &rays,
                                a->depths[0], a->depths[a->d - 1],
                                a->threads);
    if (status < 0) {
        free(proj);
        proj = NULL;
        goto done;
    }
    status = -1;
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
    for (int v = 0; padded && v < a->n; v++) {
        ap_pad_zeros(a->srcs + (size_t)v * a->h * a->w, a->h, a->w,
                     pads + v * pad_size);
    }
    job->args = a;
    job->pads = pads;
    job->rays = &rays;
    job->proj = proj;
    job->ref = &ref;
    job->items.args = a;
    job->items.out = out;
    if ((status = ref_planes_make(&ref, job)) < 0) {
        ap_projectors_free(proj, a->n);
        goto done;
    }
    plan_items(job, a->h, a->w, r, a->count, a->threads);
    status = ap_plane_bands_run(&job->items, parity_worker, job);
    ap_projectors_free(proj, a->n);
done:
    ref_planes_free(&ref);
    free(pads);
    free(proj);
    free(rays.planes);
    free(job);
    return status;
}
