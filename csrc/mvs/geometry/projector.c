#include "projector.h"

#include <math.h>
#include <string.h>

#include "camera_math.h"
#include "snell.h"
#include "snell_guess.h"
#include "../cpu/cost_math.h"
#include "../cpu/vectorize.h"
#include "../parity/parity_math.h"

void
ap_projector_init(ap_projector *p, const ap_camera *cam)
{
    memset(p, 0, sizeof(*p));
    p->refractive = cam->refractive;
    ap_camera_fold(cam, p->P, p->depth);
    if (cam->refractive) {
        ap_interface_frame(cam, p->P, p->depth, p->below, p->e1, p->e2,
                           p->A, p->Z);
        p->hc = cam->height;
        p->na = cam->n_air;
        p->nw = cam->n_water;
    }
}
/* The loops below run over chunks of a row in passes: arithmetic passes
 * that vectorise, and the table and image lookups apart. */
#define CHUNK 128

/* A chunk's bilinear cells: top-left texel index, fractions across,
 * whether seen, and the four texels (q[0] q[1] above q[2] q[3]). */
typedef struct {
    int k[CHUNK], seen[CHUNK];
    double fx[CHUNK], fy[CHUNK], q[4][CHUNK];
} texel_cells;

/* The cells' texels, from an image whose rows are pw floats apart, in
 * pairs. A pass of its own: in one loop with the cells and the mix, the
 * vector loop spends more moving each lane's index out and its texels
 * in than the loads take (apart: x0.97 on the sweep, the same bits). */
static inline __attribute__((always_inline)) void
load_cells(const float *restrict img, int pw, int n, texel_cells *c)
{
    for (int i = 0; i < n; i++) {
        const float *p = img + c->k[i];
        float_pair(p, &c->q[0][i], &c->q[1][i]);
        float_pair(p + pw, &c->q[2][i], &c->q[3][i]);
    }
}

/* ap_bilinear, the same arithmetic, its texels loaded in pairs */
AP_VECTOR_CLONES void
sample_chunk(const float *restrict img, int h, int w, int n,
             const double *restrict u, const double *restrict v,
             float *restrict out)
{
    for (int i = 0; i < n; i++) {
        int k;
        double fx, fy, q00, q01, q10, q11;
        int inside = ap_bilinear_cell(h, w, u[i], v[i], &k, &fx, &fy);
        float_pair(img + k, &q00, &q01);
        float_pair(img + k + w, &q10, &q11);
        float value = (float)ap_bilinear_mix(q00, q01, q10, q11, fx, fy);
        out[i] = inside ? value : NAN;
    }
}

/* sample_chunk from the image with its first row and column repeated
 * once before it (ap_pad_edges): the same cells and fractions, so the
 * same bits, with two clamps of four. A sample in the slack before the
 * first texel takes the cell from its copy, which mixes the texel with
 * itself, where sample_chunk's clamped cell mixes it with nothing (a
 * fraction of 0); past the last texel the cell is clamped as there,
 * since a texel's copy mixed with a fraction of 1 need not give its
 * bits. */
AP_VECTOR_CLONES void
sample_edges_chunk(const float *restrict pad, int h, int w, int n,
                   const double *restrict u, const double *restrict v,
                   float *restrict out)
{
    int pw = w + 1;
    double right = w - 1, bottom = h - 1, last_x = w - 2, last_y = h - 2;
    texel_cells cells;
    for (int i = 0; i < n; i++) {
        int inside = ap_bilinear_inside(h, w, u[i], v[i]);
        double x = inside ? u[i] : 0.0, y = inside ? v[i] : 0.0;
        x = x > right ? right : x;
        y = y > bottom ? bottom : y;
        double left = floor(x), top = floor(y);
        left = left > last_x ? last_x : left;
        top = top > last_y ? last_y : top;
        cells.k[i] = ((int)top + 1) * pw + (int)left + 1;
        cells.fx[i] = x - left;
        cells.fy[i] = y - top;
        cells.seen[i] = inside;
    }
    load_cells(pad, pw, n, &cells);
    for (int i = 0; i < n; i++) {
        float value = (float)ap_bilinear_mix(cells.q[0][i], cells.q[1][i],
                                             cells.q[2][i], cells.q[3][i],
                                             cells.fx[i], cells.fy[i]);
        out[i] = cells.seen[i] ? value : NAN;
    }
}

void
ap_pad_edges(const float *img, int h, int w, float *pad)
{
    size_t pw = (size_t)w + 1;
    for (size_t y = 0; y < (size_t)h + 1; y++) {
        const float *row = img + (y == 0 ? 0 : y - 1) * (size_t)w;
        float *to = pad + y * pw;
        to[0] = row[0];
        memcpy(to + 1, row, (size_t)w * sizeof(float));
    }
}

AP_VECTOR_CLONES void
pinhole_chunk(const ap_projector *restrict p, const double *restrict ox,
              const double *restrict oy, const double *restrict oz,
              const double *restrict dx, const double *restrict dy,
              const double *restrict dz, int n, double depth,
              double *restrict u, double *restrict v)
{
    const double *P = p->P, *c = p->depth;
    for (int i = 0; i < n; i++) {
        double x = ox[i] + depth * dx[i];
        double y = oy[i] + depth * dy[i];
        double z = oz[i] + depth * dz[i];
        double hu = P[0] * x + P[1] * y + P[2] * z + P[3];
        double hv = P[4] * x + P[5] * y + P[6] * z + P[7];
        double hw = P[8] * x + P[9] * y + P[10] * z + P[11];
        double zc = c[0] * x + c[1] * y + c[2] * z + c[3];
        double inv = 1.0 / hw;
        u[i] = zc > 0 ? hu * inv : NAN;
        v[i] = hv * inv;
    }
}

/* The point of each ray on the interface frame's axes, before the
 * offsets of a camera's foot and surface: the part that cameras over the
 * same water (the same frame) share. */
AP_VECTOR_CLONES void
frame_chunk(const ap_projector *restrict p, const double *restrict ox,
            const double *restrict oy, const double *restrict oz,
            const double *restrict dx, const double *restrict dy,
            const double *restrict dz, int n, double depth,
            double *restrict fa, double *restrict fc, double *restrict fb)
{
    const double *b = p->below, *e1 = p->e1, *e2 = p->e2;
    for (int i = 0; i < n; i++) {
        double x = ox[i] + depth * dx[i];
        double y = oy[i] + depth * dy[i];
        double z = oz[i] + depth * dz[i];
        fa[i] = e1[0] * x + e1[1] * y + e1[2] * z;
        fc[i] = e2[0] * x + e2[1] * y + e2[2] * z;
        fb[i] = b[0] * x + b[1] * y + b[2] * z;
    }
}

/* The points against one camera: depth below its surface, horizontal
 * offset from its foot, and that offset's squared length. */
AP_VECTOR_CLONES void
place_chunk(const ap_projector *restrict p, int n,
            const double *restrict fa, const double *restrict fc,
            const double *restrict fb, double *restrict under,
            double *restrict hx, double *restrict hy,
            double *restrict dist2)
{
    double a0 = p->e1[3], c0 = p->e2[3], b0 = p->below[3];
    for (int i = 0; i < n; i++) {
        double a = fa[i] + a0, c = fc[i] + c0;
        under[i] = b0 - fb[i];
        hx[i] = a;
        hy[i] = c;
        dist2[i] = a * a + c * c;
    }
}

/* Whether two refractive cameras look through the same water, so that
 * frame_chunk's result for one holds for the other. */
static int
same_frame(const ap_projector *a, const ap_projector *b)
{
    return memcmp(a->below, b->below, 3 * sizeof(double)) == 0 &&
           memcmp(a->e1, b->e1, 3 * sizeof(double)) == 0 &&
           memcmp(a->e2, b->e2, 3 * sizeof(double)) == 0;
}

/* The table is a parameter, so that restrict tells GCC that its pair
 * loads do not alias the guesses written. */
AP_VECTOR_CLONES void
table_chunk(const ap_projector *restrict p, const float *restrict table,
            int n, const double *restrict under,
            const double *restrict dist2, double *restrict t)
{
    int tn = p->tn;
    double dscale = p->t_dscale, z0 = p->t_z0, zscale = p->t_zscale;
    for (int i = 0; i < n; i++) {
        t[i] = table_guess(table, tn, dist2[i] * dscale,
                           (under[i] - z0) * zscale);
    }
}

/* The polynomial guess (poly_guess), its loops unrolled for each number
 * of terms (n <= CHUNK). The clamped coordinates are made in a pass of
 * their own, so that the clamps stay two comparisons each: in one loop
 * with the polynomial, GCC makes each a select among the products.
 * Inlined into poly_chunk's clones, which a call would leave for the
 * default one's code. */
static inline __attribute__((always_inline)) void
poly_guesses(const ap_projector *restrict p, int terms, int n,
             const double *restrict under, const double *restrict dist2,
             double *restrict t)
{
    double coef[AP_GUESS_TERMS * AP_GUESS_TERMS], x[CHUNK], y[CHUNK];
    memcpy(coef, p->coef, sizeof(coef));
    double sx = p->g_x[0], ox = p->g_x[1], sy = p->g_y[0], oy = p->g_y[1];
    for (int i = 0; i < n; i++) {
        x[i] = poly_clamp(dist2[i] * sx + ox);
        y[i] = poly_clamp(under[i] * sy + oy);
    }
    for (int i = 0; i < n; i++) {
        t[i] = poly_horner(coef, terms, x[i], y[i]);
    }
}

AP_VECTOR_CLONES void
poly_chunk(const ap_projector *restrict p, int n,
           const double *restrict under, const double *restrict dist2,
           double *restrict t)
{
    if (p->terms == 3) {
        poly_guesses(p, 3, n, under, dist2, t);
    } else {
        poly_guesses(p, 4, n, under, dist2, t);
    }
}

/* Newton from the guesses, then the interface point through the pinhole. */
AP_VECTOR_CLONES void
refract_chunk(const ap_projector *restrict p, int n,
              const double *restrict under, const double *restrict hx,
              const double *restrict hy, const double *restrict dist2,
              const double *restrict guess, double *restrict u,
              double *restrict v)
{
    const double *A = p->A, *Z = p->Z;
    double hc = p->hc, na = p->na, nw = p->nw;
    for (int i = 0; i < n; i++) {
        /* the interface point is foot + t (hx, hy) */
        double t = ap_snell_step_share(guess[i], dist2[i], under[i], hc, na,
                                       nw);
        double qx = t * hx[i], qy = t * hy[i];
        double hu = A[0] + qx * A[1] + qy * A[2];
        double hv = A[3] + qx * A[4] + qy * A[5];
        double hw = A[6] + qx * A[7] + qy * A[8];
        double zc = Z[0] + qx * Z[1] + qy * Z[2];
        double inv = 1.0 / hw;
        u[i] = (under[i] > 0) & (zc > 0) ? hu * inv : NAN;
        v[i] = hv * inv;
    }
}

/* AquaMVS's sample (ap_bilinear_zeros), seen wherever u is not NaN */
AP_VECTOR_CLONES void
sample_zeros_chunk(const float *restrict img, int h, int w, int n,
                   const double *restrict u, const double *restrict v,
                   double *restrict out)
{
    for (int i = 0; i < n; i++) {
        int seen = u[i] == u[i];
        double value = ap_bilinear_zeros(img, h, w, seen ? u[i] : -2.0,
                                         seen ? v[i] : -2.0);
        out[i] = seen ? value : NAN;
    }
}

/* sample_zeros_chunk from the image padded with zeros
 * (ap_pad_zeros): the same texels, and so the same bits, without the
 * masks and clamps of the border, and loaded in pairs. Int indices
 * (ap_padded_size at most INT_MAX), which vectorise. */
AP_VECTOR_CLONES void
sample_padded_chunk(const float *restrict pad, int h, int w, int n,
                    const double *restrict u, const double *restrict v,
                    double *restrict out)
{
    int pw = w + AP_PAD_BEFORE + AP_PAD_AFTER;
    texel_cells cells;
    for (int i = 0; i < n; i++) {
        int seen = u[i] == u[i];
        double uu = seen ? u[i] : -2.0, vv = seen ? v[i] : -2.0;
        double x = uu < -2.0 ? -2.0 : (uu > w + 1.0 ? w + 1.0 : uu);
        double y = vv < -2.0 ? -2.0 : (vv > h + 1.0 ? h + 1.0 : vv);
        double left = floor(x), top = floor(y);
        cells.k[i] = ((int)top + AP_PAD_BEFORE) * pw + (int)left +
                     AP_PAD_BEFORE;
        cells.fx[i] = x - left;
        cells.fy[i] = y - top;
        cells.seen[i] = seen;
    }
    load_cells(pad, pw, n, &cells);
    for (int i = 0; i < n; i++) {
        double value = ap_bilinear_mix(cells.q[0][i], cells.q[1][i],
                                       cells.q[2][i], cells.q[3][i],
                                       cells.fx[i], cells.fy[i]);
        out[i] = cells.seen[i] ? value : NAN;
    }
}

void
ap_pad_zeros(const float *img, int h, int w, float *pad)
{
    size_t pw = (size_t)w + AP_PAD_BEFORE + AP_PAD_AFTER;
    size_t ph = (size_t)h + AP_PAD_BEFORE + AP_PAD_AFTER;
    memset(pad, 0, ph * pw * sizeof(float));
    for (size_t y = 0; y < (size_t)h; y++) {
        memcpy(pad + (y + AP_PAD_BEFORE) * pw + AP_PAD_BEFORE,
               img + y * (size_t)w, (size_t)w * sizeof(float));
    }
}

/* One more Newton step from the shares t. */
AP_VECTOR_CLONES void
newton_chunk(const ap_projector *restrict p, int n,
             const double *restrict under, const double *restrict dist2,
             double *restrict t)
{
    double hc = p->hc, na = p->na, nw = p->nw;
    for (int i = 0; i < n; i++) {
        t[i] = ap_snell_step_share(t[i], dist2[i], under[i], hc, na, nw);
    }
}

/* The shares as the GPU finds them (ap_crossing_float_first: float
 * steps from the paraxial guess, then two float64 steps), and whether
 * each settled. */
AP_VECTOR_CLONES void
fast_chunk(const ap_projector *restrict p, int n,
           const double *restrict under, const double *restrict dist2,
           double *restrict t, int *restrict settled)
{
    double hc = p->hc, na = p->na, nw = p->nw;
    for (int i = 0; i < n; i++) {
        double dist = sqrt(dist2[i]), z = under[i] > 0 ? under[i] : 0.0, r;
        settled[i] = ap_crossing_float_first(dist, z, hc, na, nw, &r);
        t[i] = dist > 0 ? r / dist : nw * hc / (nw * hc + na * z);
    }
}

/* For a box too wide for the table's steps to land everywhere: each
 * share found alone, as the GPU finds it, and solved from the straight
 * line, as ap_camera_project solves it, where that did not settle. */
static void
settle_chunk(const ap_projector *p, int n, const double *under,
             const double *dist2, double *t)
{
    int settled[CHUNK];
    fast_chunk(p, n, under, dist2, t, settled);
    for (int i = 0; i < n; i++) {
        if (!settled[i] && under[i] > 0 && dist2[i] > 0) {
            double dist = sqrt(dist2[i]);
            t[i] = ap_crossing_cold(dist, under[i], p->hc, p->na, p->nw) /
                   dist;
        }
    }
}

/* A chunk's m points o + depth d against refractive camera p
 * (place_chunk). fa, fc, fb hold the points in the interface frame of
 * *framed (NULL: none yet), which p reuses when it shares it. */
static void
framed_place(const ap_projector *p, const double *const o[3],
             const double *const d[3], int m, double depth,
             const ap_projector **framed, double *fa, double *fc,
             double *fb, double *under, double *hx, double *hy,
             double *dist2)
{
    if (*framed == NULL || !same_frame(*framed, p)) {
        frame_chunk(p, o[0], o[1], o[2], d[0], d[1], d[2], m, depth, fa, fc,
                    fb);
        *framed = p;
    }
    place_chunk(p, m, fa, fc, fb, under, hx, hy, dist2);
}

/* The pixels (u, v) of a chunk's m points in camera p; u NaN where the
 * point is not seen. fa, fc, fb and framed: as framed_place's. */
static void
chunk_pixels(const ap_projector *p, const double *const o[3],
             const double *const d[3], int m, double depth,
             const ap_projector **framed, double *fa, double *fc,
             double *fb, double *u, double *v)
{
    double under[CHUNK], hx[CHUNK], hy[CHUNK], dist2[CHUNK], t[CHUNK];
    if (!p->refractive) {
        pinhole_chunk(p, o[0], o[1], o[2], d[0], d[1], d[2], m, depth, u,
                      v);
        return;
    }
    framed_place(p, o, d, m, depth, framed, fa, fc, fb, under, hx, hy,
                 dist2);
    if (p->per_sample) {
        settle_chunk(p, m, under, dist2, t);
    } else if (p->terms) {
        poly_chunk(p, m, under, dist2, t);
    } else {
        table_chunk(p, p->table, m, under, dist2, t);
    }
    /* more steps only where the table could not be made fine, or for
     * AquaMVS parity */
    for (int k = 1; k < p->steps; k++) {
        newton_chunk(p, m, under, dist2, t);
    }
    refract_chunk(p, m, under, hx, hy, dist2, t, u, v);
}

/* How project_sample samples its images. */
typedef enum {
    AS_IS,      /* into float rows (out) */
    EDGES,      /* the same, from images padded by ap_pad_edges */
    ZEROS,      /* with zero padding, into double rows (zeros_out) */
    PADDED      /* the same, from images padded by ap_pad_zeros */
} sampling;

/* ap_project_sample and its variants (sampling) */
static void
project_sample(const ap_projector *proj, int views,
               const double *const ray[6], int n, double depth,
               const float *imgs, int h, int w, float *const out[],
               double *const zeros_out[], sampling how)
{
    double u[CHUNK], v[CHUNK], fa[CHUNK], fc[CHUNK], fb[CHUNK];
    size_t img_size = how == PADDED  ? ap_padded_size(h, w)
                      : how == EDGES ? ap_edges_size(h, w)
                                     : (size_t)h * w;
    for (int start = 0; start < n; start += CHUNK) {
        int m = n - start < CHUNK ? n - start : CHUNK;
        const double *o[3] = {ray[0] + start, ray[1] + start,
                              ray[2] + start};
        const double *d[3] = {ray[3] + start, ray[4] + start,
                              ray[5] + start};
        const ap_projector *framed = NULL;   /* whose frame fa, fc, fb are */
        for (int view = 0; view < views; view++) {
            chunk_pixels(&proj[view], o, d, m, depth, &framed, fa, fc, fb,
                         u, v);
            const float *img = imgs + view * img_size;
            if (how == PADDED) {
                sample_padded_chunk(img, h, w, m, u, v,
                                    zeros_out[view] + start);
            } else if (how == ZEROS) {
                sample_zeros_chunk(img, h, w, m, u, v,
                                   zeros_out[view] + start);
            } else if (how == EDGES) {
                sample_edges_chunk(img, h, w, m, u, v, out[view] + start);
            } else {
                sample_chunk(img, h, w, m, u, v, out[view] + start);
            }
        }
    }
}

void
ap_project_sample(const ap_projector *proj, int views,
                  const double *const ray[6], int n, double depth,
                  const float *imgs, int h, int w, float *const out[])
{
    project_sample(proj, views, ray, n, depth, imgs, h, w, out, NULL, AS_IS);
}

void
ap_project_sample_edges(const ap_projector *proj, int views,
                        const double *const ray[6], int n, double depth,
                        const float *pads, int h, int w, float *const out[])
{
    project_sample(proj, views, ray, n, depth, pads, h, w, out, NULL, EDGES);
}

void
ap_project_sample_zeros(const ap_projector *proj, int views,
                        const double *const ray[6], int n, double depth,
                        const float *imgs, int h, int w,
                        double *const out[])
{
    project_sample(proj, views, ray, n, depth, imgs, h, w, NULL, out, ZEROS);
}

void
ap_project_sample_padded(const ap_projector *proj, int views,
                         const double *const ray[6], int n, double depth,
                         const float *pads, int h, int w,
                         double *const out[])
{
    project_sample(proj, views, ray, n, depth, pads, h, w, NULL, out,
                   PADDED);
}

void
ap_projectors_extent(const ap_projector *proj, int views,
                     const double *const ray[6], int n, double depth,
                     double (*box)[3])
{
    double under[CHUNK], hx[CHUNK], hy[CHUNK], dist2[CHUNK], fa[CHUNK],
        fc[CHUNK], fb[CHUNK];
    for (int start = 0; start < n; start += CHUNK) {
        int m = n - start < CHUNK ? n - start : CHUNK;
        const double *o[3] = {ray[0] + start, ray[1] + start,
                              ray[2] + start};
        const double *d[3] = {ray[3] + start, ray[4] + start,
                              ray[5] + start};
        const ap_projector *framed = NULL;
        for (int v = 0; v < views; v++) {
            if (!proj[v].refractive) {
                continue;
            }
            framed_place(&proj[v], o, d, m, depth, &framed, fa, fc, fb,
                         under, hx, hy, dist2);
            double *b = box[v];
            for (int i = 0; i < m; i++) {   /* NaN compares false: skipped */
                b[0] = dist2[i] > b[0] ? dist2[i] : b[0];
                b[1] = under[i] < b[1] ? under[i] : b[1];
                b[2] = under[i] > b[2] ? under[i] : b[2];
            }
        }
    }
}
