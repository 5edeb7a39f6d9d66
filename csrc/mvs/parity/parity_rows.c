#include "parity_rows.h"

#include <math.h>

#include "parity_math.h"
#include "../cpu/cost_math.h"
#include "../cpu/vectorize.h"

AP_VECTOR_CLONES int
ap_aquamvs_unseen(const double *sample, int w)
{
    int unseen = 0;
    for (int x = 0; x < w; x++) {
        unseen |= sample[x] != sample[x];
    }
    return unseen;
}

AP_VECTOR_CLONES void
ap_aquamvs_split(double *restrict s, int w, double *restrict m)
{
    for (int x = 0; x < w; x++) {
        int seen = s[x] == s[x];
        m[x] = seen;
        s[x] = seen ? s[x] : 0.0;
    }
}

/* out = ref m, into a padded row. */
AP_VECTOR_CLONES void
ap_aquamvs_ref_seen(const float *restrict ref, const double *restrict m,
                    int w, double *restrict out)
{
    for (int x = 0; x < w; x++) {
        out[x] = ref[x] * m[x];
    }
}

/* Centres a row by its own windows' means: writes the count (unclamped)
 * and means, and the products of the centred values into the padded
 * rows, from the row's count, sum of r m and sum of s m. */
AP_VECTOR_CLONES void
ap_aquamvs_centre(const double *restrict sn, const double *restrict sr,
                  const double *restrict ss, int w, double least,
                  const float *restrict ref, const double *restrict m,
                  const double *restrict s, double *restrict count,
                  double *restrict mr, double *restrict ms,
                  double *restrict p0, double *restrict p1,
                  double *restrict p2)
{
    for (int x = 0; x < w; x++) {
        double n = sn[x];
        double c = n < least ? least : n;
        double mean_r = sr[x] / c, mean_s = ss[x] / c;
        double rc = (ref[x] - mean_r) * m[x], sc = (s[x] - mean_s) * m[x];
        count[x] = n;
        mr[x] = mean_r;
        ms[x] = mean_s;
        p0[x] = rc * rc;
        p1[x] = sc * sc;
        p2[x] = rc * sc;
    }
}

/* ap_aquamvs_centre's reference half where m = 1 (ref_planes): the
 * same expressions, so the same bits. */
AP_VECTOR_CLONES void
ap_aquamvs_centre_ref(const double *restrict n, const double *restrict sr,
                      int w, double least, const float *restrict ref,
                      double *restrict mr, double *restrict rc,
                      double *restrict rr)
{
    for (int x = 0; x < w; x++) {
        double c = n[x] < least ? least : n[x];
        double mean_r = sr[x] / c;
        double d = (ref[x] - mean_r) * 1.0;
        mr[x] = mean_r;
        rc[x] = d;
        rr[x] = d * d;
    }
}

/* ap_aquamvs_centre's source half where every sample of the row's
 * windows is seen (m = 1), given the reference's count and rc. */
AP_VECTOR_CLONES void
ap_aquamvs_centre_seen(const double *restrict ss, const double *restrict n,
                       int w, double least, const double *restrict rc,
                       const double *restrict s, double *restrict ms,
                       double *restrict p1, double *restrict p2)
{
    for (int x = 0; x < w; x++) {
        double c = n[x] < least ? least : n[x];
        double mean_s = ss[x] / c;
        double sc = (s[x] - mean_s) * 1.0;
        ms[x] = mean_s;
        p1[x] = sc * sc;
        p2[x] = rc[x] * sc;
    }
}

/* ap_aquamvs_ncc and ap_aquamvs_ssim with their variances and
 * covariance left as sums: numerator and denominator times the count,
 *   NCC = srs / (sqrt(srr sss) + 1e-8 c),
 *   SSIM = (2 mr ms + C1) (2 srs + C2 c) /
 *          ((mr^2 + ms^2 + C1) (srr + sss + C2 c)),
 * one division where they take four: the same costs to a few units in
 * the last place (the GPU's take the four). */
static inline double
ncc_from_sums(double n, double srr, double sss, double srs, double fewest)
{
    double c = n < AP_AQUAMVS_NCC_LEAST ? AP_AQUAMVS_NCC_LEAST : n;
    double cost = 1.0 - srs / (sqrt(srr * sss) + AP_AQUAMVS_NCC_EPS * c);
    cost = n < fewest ? 1.0 : cost;
    return cost < 0.0 ? 0.0 : (cost > 2.0 ? 2.0 : cost);
}

static inline double
ssim_from_sums(double n, double mr, double ms, double srr, double sss,
               double srs)
{
    double c = n < AP_AQUAMVS_SSIM_LEAST ? AP_AQUAMVS_SSIM_LEAST : n;
    double ssim = ((2 * mr * ms + AP_SSIM_C1) * (2 * srs + AP_SSIM_C2 * c)) /
                  ((mr * mr + ms * ms + AP_SSIM_C1) *
                   (srr + sss + AP_SSIM_C2 * c));
    double cost = c < 0.5 ? 1.0 : 1.0 - ssim;
    return cost < 0.0 ? 0.0 : (cost > 1.0 ? 1.0 : cost);
}

AP_VECTOR_CLONES void
ap_aquamvs_ncc_row(const double *restrict srr, const double *restrict sss,
                   const double *restrict srs, const double *restrict n,
                   int w, double fewest, double *restrict acc)
{
    for (int x = 0; x < w; x++) {
        acc[x] += ncc_from_sums(n[x], srr[x], sss[x], srs[x], fewest);
    }
}

AP_VECTOR_CLONES void
ap_aquamvs_ssim_row(const double *restrict srr, const double *restrict sss,
                    const double *restrict srs, const double *restrict n,
                    const double *restrict mr, const double *restrict ms,
                    int w, double *restrict acc)
{
    for (int x = 0; x < w; x++) {
        acc[x] += ssim_from_sums(n[x], mr[x], ms[x], srr[x], sss[x],
                                 srs[x]);
    }
}
