/* AquaMVS's matching costs (its dense/cost.py), for users who must
 * reproduce its numbers: the source sampled with zero padding (texels
 * off the image count as 0, and such samples are seen); then, with m the
 * seen mask and every filter zero-padded at the image's borders,
 *   count = filter(m), clamped to >= 1 (NCC) or 1e-8 (SSIM),
 *   mean_r = filter(r m) / count, mean_s = filter(s m) / count, each
 *   pixel centred by its own window's means: rc = (r - mean_r) m, ...,
 *   var_r = filter(rc^2) / count, var_s, cov likewise;
 * NCC (box filter): cost = 1 - cov / (sqrt(var_r var_s) + 1e-8), 1 where
 * the window sees fewer than (s s) / 2 pixels (integer division),
 * clamped to [0, 2]; SSIM (normalised Gaussian, sigma 1.5): 1 - SSIM,
 * 1 where the seen weight is under 0.5, clamped to [0, 1].
 * Two filterings, so an output row needs warped rows two radii around
 * it: each is warped once into a ring, its quantities filtered once along
 * the row, and filtered down the window's rows where they are used.
 * Where every sample of a row's windows is seen (m = 1: zero padding
 * counts as seen, so nearly everywhere), count, mean_r, rc and
 * filter(rc^2) depend on the reference alone: they are made once a call,
 * and such rows filter s m, sc^2 and rc sc only. */
#ifndef AP_PARITY_COSTS_H
#define AP_PARITY_COSTS_H

#include "../cpu/sweep.h"

/* Newton steps added to the projectors' (AP_NEWTON_TABLE from a guess
 * within AP_TABLE_TOLERANCE) for every sample: one that straddles the
 * image's border, or the edge of a black region inside it, mixes texels
 * with zeros, and a window of such near-zero values has so little
 * variance that NCC's 1e-8 guard leaves its cost sensitive to 1e-6 px;
 * one more step converges (Newton is quadratic). */
#define AP_AQUAMVS_NEWTON_EXTRA 1
/* ap_cost_volume with AquaMVS's costs (a->cost NCC or SSIM): the same
 * contract. Bands of its own choosing, but every row is computed from
 * its own windows alone, so the result depends neither on threads nor on
 * how the planes are split between calls. Returns 0, -1 out of memory,
 * -2 when a thread cannot start, or AP_SWEEP_STOPPED. */
int ap_aquamvs_cost_volume(const ap_sweep_args *a, float *out);

#endif
