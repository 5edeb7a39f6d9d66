/* AquaMVS's costs row by row (parity_costs.c): a warped row split into
 * values and mask where some sample is unseen, rows centred by their own
 * windows' means, and the costs from the filtered sums. */
#ifndef AP_PARITY_ROWS_H
#define AP_PARITY_ROWS_H

/* Whether some of a warped row's w samples is not seen (NaN). */
int ap_aquamvs_unseen(const double *sample, int w);

/* A warped row made into its values s m (0 where unseen), in place, and
 * its mask m. */
void ap_aquamvs_split(double *restrict s, int w, double *restrict m);

/* out = ref m, into a padded row. */
void ap_aquamvs_ref_seen(const float *restrict ref, const double *restrict m,
                         int w, double *restrict out);

/* Centres a row by its own windows' means: writes the count (unclamped)
 * and means, and the products of the centred values into the padded
 * rows, from the row's count, sum of r m and sum of s m. */
void ap_aquamvs_centre(const double *restrict sn, const double *restrict sr,
                       const double *restrict ss, int w, double least,
                       const float *restrict ref, const double *restrict m,
                       const double *restrict s, double *restrict count,
                       double *restrict mr, double *restrict ms,
                       double *restrict p0, double *restrict p1,
                       double *restrict p2);

/* ap_aquamvs_centre's reference half where m = 1 (ref_planes): the
 * same expressions, so the same bits. */
void ap_aquamvs_centre_ref(const double *restrict n, const double *restrict sr,
                           int w, double least, const float *restrict ref,
                           double *restrict mr, double *restrict rc,
                           double *restrict rr);

/* ap_aquamvs_centre's source half where every sample of the row's
 * windows is seen (m = 1), given the reference's count and rc. */
void ap_aquamvs_centre_seen(const double *restrict ss,
                            const double *restrict n, int w, double least,
                            const double *restrict rc,
                            const double *restrict s, double *restrict ms,
                            double *restrict p1, double *restrict p2);

void ap_aquamvs_ncc_row(const double *restrict srr, const double *restrict sss,
                        const double *restrict srs, const double *restrict n,
                        int w, double fewest, double *restrict acc);

void ap_aquamvs_ssim_row(const double *restrict srr,
                         const double *restrict sss,
                         const double *restrict srs, const double *restrict n,
                         const double *restrict mr, const double *restrict ms,
                         int w, double *restrict acc);

#endif
