/* The guess of a refracted projection's interface point that a sweep
 * starts Newton from, per source camera over the box of points the sweep
 * reaches: a polynomial where one that lands exists, else a table of
 * solutions (see projector.h). The guess functions are here, inline, for
 * the vectorised loops of projector.c and for the checks of
 * snell_guess.c. */
#ifndef AP_SNELL_GUESS_H
#define AP_SNELL_GUESS_H

#include "projector.h"
#include "../cpu/cost_math.h"
#include "../cpu/vectorize.h"

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

/* A normalised coordinate clamped into [-1, 1] (NaN to -1). */
static inline double
poly_clamp(double x)
{
    return x > -1 ? (x < 1 ? x : 1) : -1;
}

/* The guess's polynomial of `terms` terms a side at (x, y) in [-1, 1]^2:
 * Horner in y for each power of x, then in x. Inlined where terms is a
 * constant, so that the loops unroll. */
static inline double
poly_horner(const double *restrict coef, int terms, double x, double y)
{
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

/* The polynomial at normalised (x, y), clamped into [-1, 1]^2 (a NaN
 * point lands on a corner). */
static inline double
poly_guess(const double *restrict coef, int terms, double x, double y)
{
    return poly_horner(coef, terms, poly_clamp(x), poly_clamp(y));
}

#endif
