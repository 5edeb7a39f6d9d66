#include "projector.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "camera_math.h"
#include "cost_math.h"
#include "snell.h"
#include "vectorize.h"

/* Enough steps for any point from the straight-line guess. */
#define TABLE_SOLVE_STEPS 40
#define TABLE_MIN 33

/* row . [x; w] for a row of a 3x4 matrix */
static double
apply(const double *row, const double *x, double w)
{
    return ap_dot3(row, x) + w * row[3];
}

/* The interface frame: e1, e2 spanning the surface, and the pixel and
 * camera depth of foot + qx e1 + qy e2 through P (set first). */
static void
interface_frame(ap_projector *p, const ap_camera *cam)
{
    const double *n = cam->normal;
    /* e1: the world axis least aligned with n, made orthogonal to it */
    int k = fabs(n[0]) <= fabs(n[1]) ? (fabs(n[0]) <= fabs(n[2]) ? 0 : 2)
                                     : (fabs(n[1]) <= fabs(n[2]) ? 1 : 2);
    double e1[3] = {-n[k] * n[0], -n[k] * n[1], -n[k] * n[2]};
    e1[k] += 1.0;
    double len = sqrt(ap_dot3(e1, e1));
    for (int i = 0; i < 3; i++) {
        e1[i] /= len;
    }
    double e2[3] = {n[1] * e1[2] - n[2] * e1[1], n[2] * e1[0] - n[0] * e1[2],
                    n[0] * e1[1] - n[1] * e1[0]};
    for (int i = 0; i < 3; i++) {
        p->below[i] = n[i];
        p->e1[i] = e1[i];
        p->e2[i] = e2[i];
        p->A[3 * i] = apply(p->P + 4 * i, cam->foot, 1.0);
        p->A[3 * i + 1] = apply(p->P + 4 * i, e1, 0.0);
        p->A[3 * i + 2] = apply(p->P + 4 * i, e2, 0.0);
    }
    p->below[3] = cam->plane_d;
    p->e1[3] = -ap_dot3(e1, cam->foot);
    p->e2[3] = -ap_dot3(e2, cam->foot);
    p->Z[0] = apply(p->depth, cam->foot, 1.0);
    p->Z[1] = apply(p->depth, e1, 0.0);
    p->Z[2] = apply(p->depth, e2, 0.0);
}

void
ap_projector_init(ap_projector *p, const ap_camera *cam)
{
    memset(p, 0, sizeof(*p));
    p->refractive = cam->refractive;
    for (int i = 0; i < 3; i++) {       /* P = K [R | t] */
        for (int j = 0; j < 3; j++) {
            p->P[4 * i + j] = cam->K[3 * i] * cam->R[j] +
                              cam->K[3 * i + 1] * cam->R[3 + j] +
                              cam->K[3 * i + 2] * cam->R[6 + j];
        }
        p->P[4 * i + 3] = ap_dot3(cam->K + 3 * i, cam->t);
        p->depth[i] = cam->R[6 + i];
    }
    p->depth[3] = cam->t[2];
    if (cam->refractive) {
        interface_frame(p, cam);
        p->hc = cam->height;
        p->na = cam->n_air;
        p->nw = cam->n_water;
    }
}

/* Two neighbouring floats (texels, table entries) in one 8-byte load:
 * the vectorised loops load their lookups one lane at a time, and in
 * pairs that takes half the loads. */
static inline void
float_pair(const float *p, double *first, double *second)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t bits;
    memcpy(&bits, p, sizeof(bits));
    uint32_t lo = (uint32_t)bits, hi = (uint32_t)(bits >> 32);
    float a, b;
    memcpy(&a, &lo, sizeof(a));
    memcpy(&b, &hi, sizeof(b));
    *first = a;
    *second = b;
#else
    *first = p[0];
    *second = p[1];
#endif
}

/* r at (dist, z) from guess r, to convergence */
static double
solve(const ap_projector *p, double dist, double z, double r)
{
    if (!(z > 0)) {
        return dist;       /* at the surface the point is its own */
    }
    for (int k = 0; k < TABLE_SOLVE_STEPS; k++) {
        double next = ap_snell_step(r, dist, z, p->hc, p->na, p->nw);
        if (fabs(next - r) < 1e-14) {
            return next;
        }
        r = next;
    }
    return r;
}

/* The converged share t = r / dist at (dist^2, z); right under the foot,
 * its limit (paraxial Snell). */
static double
solve_share(const ap_projector *p, double dist2, double z, double guess)
{
    double dist = sqrt(dist2);
    if (dist > 0) {
        return solve(p, dist, z, guess * dist) / dist;
    }
    z = z > 0 ? z : 0.0;
    return p->nw * p->hc / (p->nw * p->hc + p->na * z);
}

/* The bilinear guess at grid coordinates (fi, fj), clamped into the
 * table (a NaN point lands on cell 0). */
static inline double
table_guess(const float *restrict table, int tn, double fi, double fj)
{
    int last = tn - 2;
    double top = last + 1.0;
    fi = fi > 0 ? (fi < top ? fi : top) : 0.0;
    fj = fj > 0 ? (fj < top ? fj : top) : 0.0;
    int ti = (int)fi, tj = (int)fj;
    ti = ti > last ? last : ti;
    tj = tj > last ? last : tj;
    int k = ti * tn + tj;
    double t00, t01, t10, t11;
    float_pair(table + k, &t00, &t01);
    float_pair(table + k + tn, &t10, &t11);
    return ap_bilinear_mix(t00, t01, t10, t11, fj - tj, fi - ti);
}

static void
fill_table(ap_projector *p, int tn, double d2_max, double z_min,
           double z_max)
{
    p->tn = tn;
    p->t_dscale = (tn - 1) / d2_max;
    p->t_z0 = z_min;
    p->t_zscale = (tn - 1) / (z_max - z_min);
    for (int i = 0; i < tn; i++) {
        double dist2 = i / p->t_dscale, t = 0.0;
        for (int j = 0; j < tn; j++) {
            double z = z_min + j / p->t_zscale;
            /* from the straight-line guess, then from the neighbour */
            t = solve_share(p, dist2, z, j ? t : p->hc / (p->hc + z));
            p->table[i * tn + j] = (float)t;
        }
    }
}

/* The guess's polynomial of `terms` terms a side at normalised (x, y),
 * clamped into [-1, 1]^2 (a NaN point lands on a corner): Horner in y
 * for each power of x, then in x. Inlined where terms is a constant, so
 * that the loops unroll. */
static inline double
poly_guess(const double *restrict coef, int terms, double x, double y)
{
    x = x > -1 ? (x < 1 ? x : 1) : -1;
    y = y > -1 ? (y < 1 ? y : 1) : -1;
    double acc = 0.0;
    for (int i = terms - 1; i >= 0; i--) {
        const double *c = coef + i * terms;
        double row = c[terms - 1];
        for (int j = terms - 2; j >= 0; j--) {
            row = row * y + c[j];
        }
        acc = acc * x + row;
    }
    return acc;
}

static double
guess_one(const ap_projector *p, double dist2, double z)
{
    if (p->terms) {
        return poly_guess(p->coef, p->terms, dist2 * p->g_x[0] + p->g_x[1],
                          z * p->g_y[0] + p->g_y[1]);
    }
    return table_guess(p->table, p->tn, dist2 * p->t_dscale,
                       (z - p->t_z0) * p->t_zscale);
}

/* The worst error (m), after `steps` steps from the guess, over the
 * n x n points (dist2_0 + i dd, z_0 + j dz). */
static double
guess_error(const ap_projector *p, int steps, int n, double dist2_0,
            double dd, double z_0, double dz)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double dist2 = dist2_0 + i * dd;
        for (int j = 0; j < n; j++) {
            double z = z_0 + j * dz;
            double t = guess_one(p, dist2, z);
            for (int k = 0; k < steps; k++) {
                t = ap_snell_step_share(t, dist2, z, p->hc, p->na, p->nw);
            }
            double error = fabs(t - solve_share(p, dist2, z, t));
            worst = fmax(worst, error * sqrt(dist2));
        }
    }
    return worst;
}

/* At the table's cell centres, where bilinear guesses are worst. */
static double
table_error(const ap_projector *p, int steps)
{
    double dd = 1.0 / p->t_dscale, dz = 1.0 / p->t_zscale;
    return guess_error(p, steps, p->tn - 1, 0.5 * dd, dd,
                       p->t_z0 + 0.5 * dz, dz);
}

/* The polynomial of N terms in each of the normalised coordinates that
 * interpolates the solutions at the box's Chebyshev nodes, as monomials;
 * then whether one step from it lands within AP_TABLE_TOLERANCE
 * everywhere on a fine grid of the box. */
static int
fit_poly(ap_projector *p, int N, double d2_max, double z_min, double z_max)
{
    enum { M = AP_GUESS_TERMS, CHECK = 65 };
    const double pi = 3.14159265358979323846;
    p->g_x[0] = 2.0 / d2_max;
    p->g_x[1] = -1.0;
    p->g_y[0] = 2.0 / (z_max - z_min);
    p->g_y[1] = -1.0 - z_min * p->g_y[0];
    double f[M][M], cheb[M][M] = {{0.0}}, mono[M][M] = {{0.0}};
    for (int k = 0; k < N; k++) {
        double dist2 = (cos(pi * (k + 0.5) / N) + 1.0) / p->g_x[0];
        for (int l = 0; l < N; l++) {
            double z = (cos(pi * (l + 0.5) / N) - p->g_y[1]) / p->g_y[0];
            f[k][l] = solve_share(p, dist2, z, p->hc / (p->hc + z));
        }
    }
    /* Chebyshev coefficients by discrete orthogonality */
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            for (int k = 0; k < N; k++) {
                for (int l = 0; l < N; l++) {
                    cheb[i][j] += f[k][l] * cos(pi * i * (k + 0.5) / N) *
                                  cos(pi * j * (l + 0.5) / N);
                }
            }
            cheb[i][j] *= (i ? 2.0 : 1.0) * (j ? 2.0 : 1.0) / (N * N);
        }
    }
    /* mono[i][m]: x^m in T_i, by T_i+1 = 2 x T_i - T_i-1 */
    mono[0][0] = 1.0;
    mono[1][1] = 1.0;
    for (int i = 1; i + 1 < N; i++) {
        for (int m = 0; m < N; m++) {
            mono[i + 1][m] = (m ? 2.0 * mono[i][m - 1] : 0.0) -
                             mono[i - 1][m];
        }
    }
    for (int m = 0; m < N; m++) {
        for (int q = 0; q < N; q++) {
            double c = 0.0;
            for (int i = 0; i < N; i++) {
                for (int j = 0; j < N; j++) {
                    c += cheb[i][j] * mono[i][m] * mono[j][q];
                }
            }
            p->coef[m * N + q] = c;
        }
    }
    p->terms = N;
    p->steps = AP_NEWTON_TABLE;
    double worst = guess_error(p, p->steps, CHECK, 0.0, d2_max / (CHECK - 1),
                               z_min, (z_max - z_min) / (CHECK - 1));
    p->terms = worst <= AP_TABLE_TOLERANCE ? N : 0;
    return p->terms;
}

int
ap_projector_tabulate(ap_projector *p, double d2_max, double z_min,
                      double z_max)
{
    /* a box that is empty or not under water still gets a valid guess */
    z_min = z_min > 0 && isfinite(z_min) ? z_min : 0.0;
    z_max = z_max > z_min && isfinite(z_max) ? z_max : z_min + 1.0;
    d2_max = d2_max > 0 && isfinite(d2_max) ? d2_max : 1.0;
    /* the cheapest guess that lands */
    for (int terms = 3; terms <= AP_GUESS_TERMS; terms++) {
        if (fit_poly(p, terms, d2_max, z_min, z_max)) {
            return 0;
        }
    }
    for (int tn = TABLE_MIN;; tn = 2 * tn - 1) {
        free(p->table);
        p->table = malloc((size_t)tn * tn * sizeof(float));
        if (p->table == NULL) {
            return -1;
        }
        fill_table(p, tn, d2_max, z_min, z_max);
        p->steps = AP_NEWTON_TABLE;
        if (table_error(p, p->steps) <= AP_TABLE_TOLERANCE) {
            return 0;
        }
        if (2 * tn - 1 > AP_TABLE_MAX) {
            while (p->steps < AP_NEWTON_WARM &&
                   table_error(p, p->steps) > AP_TABLE_TOLERANCE) {
                p->steps++;
            }
            return 0;
        }
    }
}

void
ap_projector_free(ap_projector *p)
{
    free(p->table);
    p->table = NULL;
}

/* The loops below run over chunks of a row in passes: arithmetic passes
 * that vectorise, and the table and image lookups apart. */
#define CHUNK 128

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

/* The polynomial guess, its loops unrolled for each number of terms. */
static inline void
poly_guesses(const ap_projector *restrict p, int terms, int n,
             const double *restrict under, const double *restrict dist2,
             double *restrict t)
{
    double coef[AP_GUESS_TERMS * AP_GUESS_TERMS];
    memcpy(coef, p->coef, sizeof(coef));
    double sx = p->g_x[0], ox = p->g_x[1], sy = p->g_y[0], oy = p->g_y[1];
    for (int i = 0; i < n; i++) {
        t[i] = poly_guess(coef, terms, dist2[i] * sx + ox,
                          under[i] * sy + oy);
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

void
ap_project_sample(const ap_projector *proj, int views,
                  const double *const ray[6], int n, double depth,
                  const float *imgs, int h, int w, float *const out[])
{
    double u[CHUNK], v[CHUNK], under[CHUNK], hx[CHUNK], hy[CHUNK],
        dist2[CHUNK], t[CHUNK], fa[CHUNK], fc[CHUNK], fb[CHUNK];
    size_t img_size = (size_t)h * w;
    for (int start = 0; start < n; start += CHUNK) {
        int m = n - start < CHUNK ? n - start : CHUNK;
        const double *o[3] = {ray[0] + start, ray[1] + start,
                              ray[2] + start};
        const double *d[3] = {ray[3] + start, ray[4] + start,
                              ray[5] + start};
        const ap_projector *framed = NULL;   /* whose frame fa, fc, fb are */
        for (int view = 0; view < views; view++) {
            const ap_projector *p = &proj[view];
            if (p->refractive) {
                if (framed == NULL || !same_frame(framed, p)) {
                    frame_chunk(p, o[0], o[1], o[2], d[0], d[1], d[2], m,
                                depth, fa, fc, fb);
                    framed = p;
                }
                place_chunk(p, m, fa, fc, fb, under, hx, hy, dist2);
                if (p->terms) {
                    poly_chunk(p, m, under, dist2, t);
                } else {
                    table_chunk(p, p->table, m, under, dist2, t);
                }
                /* more steps only where the table could not be made fine */
                for (int k = 1; k < p->steps; k++) {
                    for (int i = 0; i < m; i++) {
                        t[i] = ap_snell_step_share(t[i], dist2[i], under[i],
                                                   p->hc, p->na, p->nw);
                    }
                }
                refract_chunk(p, m, under, hx, hy, dist2, t, u, v);
            } else {
                pinhole_chunk(p, o[0], o[1], o[2], d[0], d[1], d[2], m,
                              depth, u, v);
            }
            sample_chunk(imgs + view * img_size, h, w, m, u, v,
                         out[view] + start);
        }
    }
}

void
ap_projector_extent(const ap_projector *p, const double *const ray[6],
                    int n, double depth, double box[3])
{
    double under[CHUNK], hx[CHUNK], hy[CHUNK], dist2[CHUNK], fa[CHUNK],
        fc[CHUNK], fb[CHUNK];
    for (int start = 0; start < n; start += CHUNK) {
        int m = n - start < CHUNK ? n - start : CHUNK;
        frame_chunk(p, ray[0] + start, ray[1] + start, ray[2] + start,
                    ray[3] + start, ray[4] + start, ray[5] + start, m, depth,
                    fa, fc, fb);
        place_chunk(p, m, fa, fc, fb, under, hx, hy, dist2);
        for (int i = 0; i < m; i++) {   /* NaN compares false: skipped */
            box[0] = dist2[i] > box[0] ? dist2[i] : box[0];
            box[1] = under[i] < box[1] ? under[i] : box[1];
            box[2] = under[i] > box[2] ? under[i] : box[2];
        }
    }
}
