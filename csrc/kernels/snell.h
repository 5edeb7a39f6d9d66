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
    double a = sqrt(r * r + hc * hc);
    double w = dist - r, b = sqrt(w * w + depth * depth);
    /* f = na r / a - nw w / b and f' = na hc^2 / a^3 + nw depth^2 / b^3,
     * both scaled by a^3 b^3 so that f / f' takes one division */
    double f = a * a * b * b * (na * r * b - nw * w * a);
    double df = na * hc * hc * b * b * b + nw * depth * depth * a * a * a;
    r -= f / df;
    r = r < 0 ? 0 : r;
    return r > dist ? dist : r;
}

#endif
