#include "sweep.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ sampling */

static float
sample(const float *img, int h, int w, double u, double v)
{
    if (!(u >= 0 && v >= 0 && u <= w - 1 && v <= h - 1)) {
        return NAN;
    }
    int x0 = (int)u, y0 = (int)v;
    x0 = x0 > w - 2 ? w - 2 : x0;
    y0 = y0 > h - 2 ? h - 2 : y0;
    double fx = u - x0, fy = v - y0;
    const float *p = img + (size_t)y0 * w + x0;
    double top = p[0] + fx * (p[1] - p[0]);
    double bottom = p[w] + fx * (p[w + 1] - p[w]);
    return (float)(top + fy * (bottom - top));
}

/* Rays of every reference pixel: origin, direction; valid flag apart. */
typedef struct {
    double *rays;      /* (h * w, 6) */
    uint8_t *valid;    /* h * w */
} ray_table;

static int
ray_table_make(ray_table *t, const ap_camera *cam, int h, int w)
{
    size_t n = (size_t)h * w;
    t->rays = malloc(n * 6 * sizeof(double));
    t->valid = malloc(n);
    if (!t->rays || !t->valid) {
        free(t->rays);
        free(t->valid);
        return -1;
    }
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            t->valid[i] = (uint8_t)ap_camera_cast(cam, x, y, t->rays + 6 * i,
                                                  t->rays + 6 * i + 3);
        }
    }
    return 0;
}

static void
ray_table_free(ray_table *t)
{
    free(t->rays);
    free(t->valid);
}

/* Warm-starts each pixel's Newton solve from its left neighbour's. */
static void
warp_plane(const ray_table *t, const float *src, int h, int w,
           const ap_camera *src_cam, double depth, float *out)
{
    for (int y = 0; y < h; y++) {
        double guess = -1.0;
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            const double *o = t->rays + 6 * i, *d = o + 3;
            double p[3] = {o[0] + depth * d[0], o[1] + depth * d[1],
                           o[2] + depth * d[2]};
            double u, v;
            if (t->valid[i] && ap_camera_project(src_cam, p, &u, &v, &guess)) {
                out[i] = sample(src, h, w, u, v);
            } else {
                out[i] = NAN;
                guess = -1.0;
            }
        }
    }
}

int
ap_warp(const float *src, int h, int w, const ap_camera *ref,
        const ap_camera *src_cam, double depth, float *out)
{
    ray_table t;
    if (ray_table_make(&t, ref, h, w) < 0) {
        return -1;
    }
    warp_plane(&t, src, h, w, src_cam, depth, out);
    ray_table_free(&t);
    return 0;
}

/* ------------------------------------------------------ window sums */

enum { Q_COUNT, Q_R, Q_S, Q_RR, Q_SS, Q_RS, NQ };

typedef struct {
    int h, w, radius;
    ap_cost cost;
    const double *gauss; /* 2 * radius + 1 weights, 2-D sum 1 (SSIM) */
    /* box costs: one summed-area table of all quantities, interleaved,
     * (h + 1) * (w + 1) * NQ; SSIM: one quantity, a pass, the sums */
    double *sat;
    double *q;          /* h * w */
    double *tmp;        /* h * w */
    double *sums[NQ];   /* h * w each */
} window_work;

/* Separable Gaussian-weighted sums; outside the image weighs nothing. */
static void
gauss_sums(window_work *k, double *out)
{
    int h = k->h, w = k->w, r = k->radius;
    const double *g = k->gauss + r;  /* g[-r .. r] */
    for (int y = 0; y < h; y++) {
        const double *q = k->q + (size_t)y * w;
        double *t = k->tmp + (size_t)y * w;
        for (int x = 0; x < w; x++) {
            double s = 0.0;
            int lo = x - r < 0 ? -x : -r, hi = x + r >= w ? w - 1 - x : r;
            for (int j = lo; j <= hi; j++) {
                s += g[j] * q[x + j];
            }
            t[x] = s;
        }
    }
    for (int y = 0; y < h; y++) {
        int lo = y - r < 0 ? -y : -r, hi = y + r >= h ? h - 1 - y : r;
        for (int x = 0; x < w; x++) {
            double s = 0.0;
            for (int j = lo; j <= hi; j++) {
                s += g[j] * k->tmp[(size_t)(y + j) * w + x];
            }
            out[(size_t)y * w + x] = s;
        }
    }
}

/* What window sum `which` adds up at a pixel seen by the source. SAD
 * needs two: the count and the absolute difference (in the Q_R slot). */
static inline double
quantity(ap_cost cost, int which, double r, double s)
{
    if (which == Q_COUNT) {
        return 1.0;
    }
    if (cost == AP_COST_SAD) {
        return fabs(r - s);
    }
    switch (which) {
    case Q_R: return r;
    case Q_S: return s;
    case Q_RR: return r * r;
    case Q_SS: return s * s;
    default: return r * s;
    }
}

/* Cost of one pixel from its window sums (sums[Q_R] holds the absolute
 * difference for SAD). */
static double
window_cost(const window_work *k, const double *sums)
{
    double full = (double)(2 * k->radius + 1) * (2 * k->radius + 1);
    double n = sums[Q_COUNT];
    if (k->cost == AP_COST_SAD) {
        return n < full / 2 ? 1.0 : sums[Q_R] / n;
    }
    if (k->cost == AP_COST_SSIM ? n < 0.5 : n < full / 2) {
        return 1.0;
    }
    double mr = sums[Q_R] / n, ms = sums[Q_S] / n;
    double vr = sums[Q_RR] / n - mr * mr;
    double vs = sums[Q_SS] / n - ms * ms;
    double cov = sums[Q_RS] / n - mr * ms;
    if (k->cost == AP_COST_SSIM) {
        double ssim = ((2 * mr * ms + AP_SSIM_C1) * (2 * cov + AP_SSIM_C2)) /
                      ((mr * mr + ms * ms + AP_SSIM_C1) *
                       (vr + vs + AP_SSIM_C2));
        double c = 1.0 - ssim;
        return c < 0 ? 0 : (c > 1 ? 1 : c);
    }
    if (vr < AP_NCC_MIN_VARIANCE || vs < AP_NCC_MIN_VARIANCE) {
        return 1.0;
    }
    double ncc = cov / sqrt(vr * vs);
    ncc = ncc > 1 ? 1 : (ncc < -1 ? -1 : ncc);
    return 1.0 - ncc;
}

/* Box costs in two passes: one summed-area table holding every quantity,
 * then the costs from its corners, O(1) a pixel whatever the window. */
static void
add_box_costs(window_work *k, const float *ref, const float *s, double *acc)
{
    int h = k->h, w = k->w, r = k->radius;
    int nq = k->cost == AP_COST_SAD ? 2 : NQ;
    size_t stride = (size_t)(w + 1) * NQ;
    double *sat = k->sat;
    memset(sat, 0, stride * sizeof(double));
    for (int y = 0; y < h; y++) {
        double row[NQ] = {0};
        const double *above = sat + (size_t)y * stride;
        double *here = sat + (size_t)(y + 1) * stride;
        memset(here, 0, NQ * sizeof(double));
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            if (!isnan(s[i])) {
                for (int q = 0; q < nq; q++) {
                    row[q] += quantity(k->cost, q, ref[i], s[i]);
                }
            }
            for (int q = 0; q < nq; q++) {
                here[(x + 1) * NQ + q] = above[(x + 1) * NQ + q] + row[q];
            }
        }
    }
    for (int y = 0; y < h; y++) {
        int y1 = y - r < 0 ? 0 : y - r, y2 = y + r + 1 > h ? h : y + r + 1;
        const double *top = sat + (size_t)y1 * stride;
        const double *bottom = sat + (size_t)y2 * stride;
        for (int x = 0; x < w; x++) {
            int x1 = x - r < 0 ? 0 : x - r, x2 = x + r + 1 > w ? w : x + r + 1;
            double sums[NQ];
            for (int q = 0; q < nq; q++) {
                sums[q] = bottom[x2 * NQ + q] - bottom[x1 * NQ + q] -
                          top[x2 * NQ + q] + top[x1 * NQ + q];
            }
            acc[(size_t)y * w + x] += window_cost(k, sums);
        }
    }
}

/* SSIM: Gaussian-weighted sums, one quantity at a time. */
static void
add_gauss_costs(window_work *k, const float *ref, const float *s,
                double *acc)
{
    size_t n = (size_t)k->h * k->w;
    for (int which = 0; which < NQ; which++) {
        for (size_t i = 0; i < n; i++) {
            k->q[i] = isnan(s[i]) ? 0.0
                                  : quantity(k->cost, which, ref[i], s[i]);
        }
        gauss_sums(k, k->sums[which]);
    }
    for (size_t i = 0; i < n; i++) {
        double sums[NQ];
        for (int q = 0; q < NQ; q++) {
            sums[q] = k->sums[q][i];
        }
        acc[i] += window_cost(k, sums);
    }
}

/* ------------------------------------------------------------ workers */

typedef struct {
    const ap_sweep_args *args;
    const ray_table *rays;
    const double *gauss;
    float *out;
    atomic_int next_plane;
    atomic_int failed;
} sweep_job;

static void
work_free(window_work *k, float *warped, double *acc)
{
    free(k->sat);
    free(k->q);
    free(k->tmp);
    for (int i = 0; i < NQ; i++) {
        free(k->sums[i]);
    }
    free(warped);
    free(acc);
}

static void *
sweep_worker(void *arg)
{
    sweep_job *job = arg;
    const ap_sweep_args *a = job->args;
    size_t n = (size_t)a->h * a->w;
    window_work k = {a->h, a->w, a->window / 2, a->cost,
                     job->gauss, NULL, NULL, NULL, {NULL}};
    int ok = 1;
    if (a->cost == AP_COST_SSIM) {
        ok = (k.q = malloc(n * sizeof(double))) &&
             (k.tmp = malloc(n * sizeof(double)));
        for (int i = 0; i < NQ; i++) {
            ok = ok && (k.sums[i] = malloc(n * sizeof(double)));
        }
    } else {
        k.sat = malloc((size_t)(a->h + 1) * (a->w + 1) * NQ *
                       sizeof(double));
        ok = k.sat != NULL;
    }
    float *warped = malloc(n * sizeof(float));
    double *acc = malloc(n * sizeof(double));
    if (!ok || !warped || !acc) {
        atomic_store(&job->failed, 1);
        work_free(&k, warped, acc);
        return NULL;
    }
    int plane;
    while ((plane = atomic_fetch_add(&job->next_plane, 1)) < a->d &&
           !atomic_load(&job->failed)) {
        memset(acc, 0, n * sizeof(double));
        for (int v = 0; v < a->n; v++) {
            warp_plane(job->rays, a->srcs + (size_t)v * n, a->h, a->w,
                       &a->src_cams[v], a->depths[plane], warped);
            if (a->cost == AP_COST_SSIM) {
                add_gauss_costs(&k, a->ref, warped, acc);
            } else {
                add_box_costs(&k, a->ref, warped, acc);
            }
        }
        for (size_t i = 0; i < n; i++) {
            job->out[i * a->d + plane] = (float)(acc[i] / a->n);
        }
    }
    work_free(&k, warped, acc);
    return NULL;
}

int
ap_cost_volume(const ap_sweep_args *a, float *out)
{
    int r = a->window / 2;
    double gauss[AP_MAX_WINDOW], total = 0.0;
    for (int j = -r; j <= r; j++) {
        gauss[j + r] = exp(-(double)(j * j) /
                           (2 * AP_SSIM_SIGMA * AP_SSIM_SIGMA));
        total += gauss[j + r];
    }
    for (int j = 0; j <= 2 * r; j++) {
        gauss[j] /= total;    /* 1-D sums to 1, so the 2-D kernel does */
    }
    ray_table rays;
    if (ray_table_make(&rays, a->ref_cam, a->h, a->w) < 0) {
        return -1;
    }
    sweep_job job = {a, &rays, gauss, out, 0, 0};
    int threads = a->threads < a->d ? a->threads : a->d;
    pthread_t *ids = malloc((size_t)(threads > 1 ? threads : 1) *
                            sizeof(*ids));
    if (!ids) {
        ray_table_free(&rays);
        return -1;
    }
    int started = 0, status = 0;
    for (; started < threads - 1; started++) {
        if (pthread_create(&ids[started], NULL, sweep_worker, &job) != 0) {
            status = -2;
            atomic_store(&job.failed, 1);
            break;
        }
    }
    sweep_worker(&job);   /* the calling thread works too */
    for (int i = 0; i < started; i++) {
        pthread_join(ids[i], NULL);
    }
    free(ids);
    ray_table_free(&rays);
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
        const float *c = volume + i * d;
        int best = 0;
        double sum = 0.0;
        for (int k = 0; k < d; k++) {
            sum += c[k];
            if (c[k] < c[best]) {
                best = k;
            }
        }
        if (best == 0 || best == d - 1) {
            depth[i] = NAN;
            confidence[i] = 0.0f;
            continue;
        }
        double lo = c[best - 1], mid = c[best], hi = c[best + 1];
        double curve = lo - 2 * mid + hi;
        double offset = curve > 0 ? 0.5 * (lo - hi) / curve : 0.0;
        offset = offset > 0.5 ? 0.5 : (offset < -0.5 ? -0.5 : offset);
        double step = offset >= 0 ? depths[best + 1] - depths[best]
                                  : depths[best] - depths[best - 1];
        depth[i] = (float)(depths[best] + offset * step);
        double mean = sum / d;
        double a = 1.0 - (mid < 0 ? 0 : (mid > 1 ? 1 : mid));
        double b = mean > 0 ? 1.0 - mid / mean : 0.0;
        b = b < 0 ? 0 : (b > 1 ? 1 : b);
        confidence[i] = (float)sqrt(a * b);
    }
}
