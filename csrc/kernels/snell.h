/* One Newton step for the interface point of a refracted projection, in
 * the vertical plane through the camera centre and the point: the point
 * at horizontal distance r from the camera's foot solves
 *   f(r) = na r / |(r, hc)| - nw (dist - r) / |(dist - r, depth)| = 0,
 * f increasing on [0, dist], so Newton converges from the straight-line
 * guess dist hc / (hc + depth). Kept in [0, dist]. */
#ifndef AP_SNELL_H
#define AP_SNELL_H

#include <math.h>

#include "hd.h"

static inline AP_HD double
ap_snell_step(double r, double dist, double depth, double hc, double na,
              double nw)
{
    double a2 = r * r + hc * hc, a = sqrt(a2);
    double w = dist - r, b2 = w * w + depth * depth, b = sqrt(b2);
    /* one division for both 1/a and 1/b */
    double inv_ab = 1.0 / (a * b), inv_a = b * inv_ab, inv_b = a * inv_ab;
    double f = na * r * inv_a - nw * w * inv_b;
    double df = na * hc * hc * inv_a * inv_a * inv_a +
                nw * depth * depth * inv_b * inv_b * inv_b;
    r -= f / df;
    r = r < 0 ? 0 : r;
    return r > dist ? dist : r;
}

#endif
