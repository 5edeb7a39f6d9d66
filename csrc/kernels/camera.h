/* Camera models of the plane-sweep kit: pinhole, and pinhole behind a flat
 * refractive interface (camera in air looking into water). Double
 * precision throughout: geometry errors of 1e-6 m matter at 1 m. */
#ifndef AP_CAMERA_H
#define AP_CAMERA_H

#include <stdint.h>

/* Packed parameters as the binding passes them: K (9, row-major), R (9),
 * t (3), refractive (0/1), water_z, normal (3, towards air), n_air,
 * n_water. */
#define AP_CAMERA_PARAMS 28

/* Newton iterations for the interface point of a refracted projection
 * from the straight-line guess (converged to < 1e-6 m; the tests hold it
 * to 1e-6 px), and from a guess already within a few millimetres. */
#define AP_NEWTON_COLD 10
#define AP_NEWTON_WARM 3

typedef struct {
    double K[9], Kinv[9], R[9], t[3];
    double center[3];           /* camera centre in world: -R^T t */
    int refractive;
    double normal[3];           /* unit, pointing from water into air */
    double plane_d;             /* interface: normal . x = plane_d */
    double n_air, n_water;
    double height;              /* camera centre above the interface */
    double foot[3];             /* centre projected onto the interface */
} ap_camera;

/* Fills cam from packed params. Returns 0, or -1 when K is singular, R is
 * not a rotation (1e-6), the normal is zero, indices are not positive, or
 * a refractive camera is not above its interface. */
int ap_camera_init(ap_camera *cam, const double *params);

/* The ray of pixel (u, v) (pixel centres at integers): origin and unit
 * direction, in water for a refractive camera. Returns 0 when the ray
 * does not reach the water (refractive only). */
int ap_camera_cast(const ap_camera *cam, double u, double v, double *origin,
                   double *direction);

/* Pixel of world point x. Returns 0 when x is behind the camera, or for a
 * refractive camera when x is not under the water. */
int ap_camera_project(const ap_camera *cam, const double *x, double *u,
                      double *v);

#endif
