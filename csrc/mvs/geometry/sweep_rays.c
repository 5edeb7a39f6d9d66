#include "sweep_rays.h"

#include <math.h>
#include <stdlib.h>

#include "../cpu/workers.h"

typedef struct {
    ap_ray_table *t;
    const ap_camera *cam;
} ray_job;

static int
cast_rows(void *arg, int y0, int y1)
{
    const ray_job *job = arg;
    ap_ray_table *t = job->t;
    size_t n = (size_t)t->h * t->w;
    for (int y = y0; y < y1; y++) {
        for (int x = 0; x < t->w; x++) {
            size_t i = (size_t)y * t->w + x;
            double o[3], d[3];
            int ok = ap_camera_cast(job->cam, x, y, o, d);
            for (int k = 0; k < 3; k++) {
                t->planes[k * n + i] = ok ? o[k] : NAN;
                t->planes[(3 + k) * n + i] = ok ? d[k] : NAN;
            }
        }
    }
    return 0;
}

int
ap_ray_table_make(ap_ray_table *t, const ap_camera *cam, int h, int w,
                  int threads)
{
    size_t n = (size_t)h * w;
    t->h = h;
    t->w = w;
    t->planes = malloc(6 * n * sizeof(double));
    if (t->planes == NULL) {
        return -1;
    }
    ray_job job = {t, cam};
    int status = ap_run_ranges(cast_rows, &job, h, AP_SETUP_ROWS, threads);
    if (status < 0) {
        free(t->planes);
        t->planes = NULL;
    }
    return status;
}

void
ap_ray_row(const ap_ray_table *t, int y, const double *row[6])
{
    size_t n = (size_t)t->h * t->w;
    for (int k = 0; k < 6; k++) {
        row[k] = t->planes + k * n + (size_t)y * t->w;
    }
}

void
ap_projectors_free(ap_projector *proj, int n)
{
    for (int v = 0; v < n; v++) {
        ap_projector_free(&proj[v]);
    }
}

typedef struct {
    ap_projector *proj;
    int n;
    const ap_ray_table *rays;
    double first, last;
    double (*boxes)[3];   /* the boxes of each range, n a range */
} projector_job;

/* The boxes of the points the rays of rows [y0, y1) reach. The depth
 * below the surface is linear along a ray and the horizontal distance
 * convex, so the two end depths bound them. */
static int
extent_rows(void *arg, int y0, int y1)
{
    const projector_job *job = arg;
    double(*box)[3] = job->boxes + (size_t)(y0 / AP_SETUP_ROWS) * job->n;
    for (int v = 0; v < job->n; v++) {
        box[v][0] = 0.0;
        box[v][1] = INFINITY;
        box[v][2] = 0.0;
    }
    for (int y = y0; y < y1; y++) {
        const double *row[6];
        ap_ray_row(job->rays, y, row);
        ap_projectors_extent(job->proj, job->n, row, job->rays->w,
                             job->first, box);
        ap_projectors_extent(job->proj, job->n, row, job->rays->w,
                             job->last, box);
    }
    return 0;
}

/* The tables of views [v0, v1), each from its rows' boxes, merged (the
 * same whatever order: maxima and minima). */
static int
tabulate_views(void *arg, int v0, int v1)
{
    const projector_job *job = arg;
    int ranges = (job->rays->h + AP_SETUP_ROWS - 1) / AP_SETUP_ROWS;
    for (int v = v0; v < v1; v++) {
        if (!job->proj[v].refractive) {
            continue;
        }
        double box[3] = {0.0, INFINITY, 0.0};
        for (int k = 0; k < ranges; k++) {
            const double *b = job->boxes[(size_t)k * job->n + v];
            box[0] = b[0] > box[0] ? b[0] : box[0];
            box[1] = b[1] < box[1] ? b[1] : box[1];
            box[2] = b[2] > box[2] ? b[2] : box[2];
        }
        if (ap_projector_tabulate(&job->proj[v], box[0], box[1], box[2]) <
            0) {
            return -1;
        }
    }
    return 0;
}

int
ap_projectors_make(ap_projector *proj, const ap_camera *cams, int n,
                   const ap_ray_table *rays, double first, double last,
                   int threads)
{
    for (int v = 0; v < n; v++) {
        ap_projector_init(&proj[v], &cams[v]);
    }
    size_t ranges = ((size_t)rays->h + AP_SETUP_ROWS - 1) / AP_SETUP_ROWS;
    projector_job job = {proj, n, rays, first, last,
                         malloc(ranges * n * sizeof(*job.boxes))};
    int status = job.boxes == NULL
                     ? -1
                     : ap_run_ranges(extent_rows, &job, rays->h,
                                     AP_SETUP_ROWS, threads);
    if (status == 0) {
        status = ap_run_ranges(tabulate_views, &job, n, 1, threads);
    }
    free(job.boxes);
    if (status < 0) {
        ap_projectors_free(proj, n);
    }
    return status;
}
