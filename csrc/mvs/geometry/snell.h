/* One Newton step for the interface point of a refracted projection, in
 * the vertical plane through the camera centre and the point: the point
 * at horizontal distance r from the camera's foot solves
 *   f(r) = na r / |(r, hc)| - nw (dist - r) / |(dist - r, depth)| = 0,
 * f increasing on [0, dist], so Newton converges from the straight-line
 * guess dist hc / (hc + depth). Kept in [0, dist]. */
#ifndef AP_SNELL_H
#define AP_SNELL_H

#include <math.h>

#include "host_device.h"

/* f = na r / a - nw w / b and f' = na hc^2 / a^3 + nw depth^2 / b^3, both
 * scaled by a^3 b^3 so that f / f' takes one division. Written once for
 * two precisions: ap_snell_step in double, ap_snell_step_float for a
 * first guess on a GPU, where a float square root or division costs a
 * fraction of a double's. */
#define AP_SNELL_STEP(name, T, SQRT)                                       \
    static inline AP_HD T                                                  \
    name(T r, T dist, T depth, T hc, T na, T nw)                           \
    {                                                                      \
        T a = SQRT(r * r + hc * hc);                                       \
        T w = dist - r, b = SQRT(w * w + depth * depth);                   \
        T f = a * a * b * b * (na * r * b - nw * w * a);                   \
        T df = na * hc * hc * b * b * b + nw * depth * depth * a * a * a;  \
        r -= f / df;                                                       \
        r = r < 0 ? 0 : r;                                                 \
        return r > dist ? dist : r;                                        \
    }

AP_SNELL_STEP(ap_snell_step, double, sqrt)
AP_SNELL_STEP(ap_snell_step_float, float, sqrtf)

/* The same crossing as the share t = r / dist of the way to the point,
 * for the sweep's hot loop: Snell's law squared,
 *   g(t) = (na^2 - nw^2) dist^2 t^2 s^2 + na^2 depth^2 t^2
 *          - nw^2 hc^2 s^2 = 0,   s = 1 - t,
 * (na r b)^2 = (nw w a)^2 over dist^2) has its one root in [0, 1] where f
 * has its, needs dist^2 alone, and takes no square root. g' > 0 at the
 * root, so Newton converges from a close guess (not from afar: the cold
 * solves use ap_snell_step). Kept in [0, 1]. */
static inline AP_HD double
ap_snell_step_share(double t, double dist2, double depth, double hc,
                    double na, double nw)
{
    double s = 1.0 - t, k = (na * na - nw * nw) * dist2;
    double A = na * na * depth * depth, B = nw * nw * hc * hc;
    double g = t * t * (k * s * s + A) - B * s * s;
    double dg = 2.0 * (k * t * s * (s - t) + A * t + B * s);
    t -= g / dg;
    t = t < 0 ? 0 : t;
    return t > 1 ? 1 : t;
}

#endif
