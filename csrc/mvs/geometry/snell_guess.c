/* Builds a projector's guess (ap_projector_tabulate) and checks that one
 * Newton step from it lands. */
#include "snell_guess.h"

#include <math.h>
#include <stdlib.h>

#include "snell.h"

/* Enough steps for any point from the straight-line guess. */
#define TABLE_SOLVE_STEPS 40
#define TABLE_MIN 33
/* The least shrink of the guesses' error from one table to the next
 * finer that is worth a finer one. Boxes the tables serve shrink it 1.6x
 * to 16x a halving of the cells (one step from a bilinear guess, 16x at
 * best); boxes that rays grazing the water stretch tens of metres out
 * not at all. */
#define TABLE_STALL 1.25

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
    double coarser = INFINITY;
    for (int tn = TABLE_MIN;; tn = 2 * tn - 1) {
        free(p->table);
        p->table = malloc((size_t)tn * tn * sizeof(float));
        if (p->table == NULL) {
            return -1;
        }
        fill_table(p, tn, d2_max, z_min, z_max);
        p->steps = AP_NEWTON_TABLE;
        double error = table_error(p, p->steps);
        if (error <= AP_TABLE_TOLERANCE) {
            return 0;
        }
        /* where halving the cells barely shrinks the error, the cells
         * are not what holds the guesses back, and finer tables (a
         * solve a point) would not land either: their steps are tried
         * here */
        int stalled = error > coarser / TABLE_STALL;
        coarser = error;
        if (stalled || 2 * tn - 1 > AP_TABLE_MAX) {
            /* one more step until they land, AP_NEWTON_WARM at most */
            while (error > AP_TABLE_TOLERANCE && p->steps < AP_NEWTON_WARM) {
                error = table_error(p, ++p->steps);
            }
            if (error > AP_TABLE_TOLERANCE) {   /* a box too wide for it */
                free(p->table);
                p->table = NULL;
                p->per_sample = 1;
                p->steps = AP_NEWTON_TABLE;
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
