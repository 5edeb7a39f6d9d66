/* Camera models of the plane-sweep kit: pinhole, and pinhole behind a flat
 * refractive interface (camera in air looking into water). Double
 * precision throughout: geometry errors of 1e-6 m matter at 1 m. */
#ifndef AP_CAMERA_H
#define AP_CAMERA_H

#include <stddef.h>
#include <stdint.h>

/* Packed parameters as the binding passes them: K (9, row-major), R (9),
 * t (3), refractive (0, 1 or AP_CAST_AQUAMVS), water_z, normal (3,
 * towards air), n_air, n_water. */
#define AP_CAMERA_PARAMS 28

/* Newton iterations for the interface point of a refracted projection
 * from the straight-line guess (converged to < 1e-6 m; the tests hold it
 * to 1e-6 px), and from a guess already within a few millimetres. */
#define AP_NEWTON_COLD 10
#define AP_NEWTON_WARM 3
/* The GPU's crossing (ap_crossing_fast): float steps from the paraxial
 * guess, and the last double step's change in the share of the way
 * under which it counts as converged: the step squares the error, so
 * 1e-9 leaves it far under 1e-11 of the distance. With these, no ray
 * under 60 degrees from the vertical in air takes the cold steps
 * (tests/mvs/kernels/test_crossing.c). */
#define AP_NEWTON_FLOAT 6
#define AP_SHARE_SETTLED 1e-9
/* Double share steps at most for a walking thread's crossing
 * (ap_crossing_walk): from the line through the two planes before's,
 * crossings settle in two or three (tests/mvs/kernels/test_crossing.c). */
#define AP_SHARE_WALK 4

/* The refractive flag of a camera that casts rays as AquaMVS's
 * RefractiveProjectionModel does, for the drop-in's parity: every ray
 * meets the level plane z = water_z (from behind the camera where the ray
 * points up) and is bent there about the normal as given (any length);
 * points project through the level surface, whatever the normal. */
#define AP_CAST_AQUAMVS 2

typedef struct {
    double K[9], Kinv[9], R[9], t[3];
    double center[3];           /* camera centre in world: -R^T t */
    int refractive;
    double normal[3];           /* unit, pointing from water into air */
    double plane_d;             /* interface: normal . x = plane_d */
    double n_air, n_water;
    double height;              /* camera centre above the interface */
    double foot[3];             /* centre projected onto the interface */
    int aquamvs_cast;           /* AP_CAST_AQUAMVS: normal is level and */
    double bend[3];             /* the normal given bends the cast rays */
} ap_camera;

/* Why packed parameters make no camera: ap_camera_init's result, checked
 * in this order. */
enum {
    AP_CAMERA_OK = 0,
    AP_CAMERA_NOT_FINITE = -1,      /* a parameter is NaN or infinite */
    AP_CAMERA_NOT_A_FLAG = -2,      /* refractive is not 0, 1 or
                                     * AP_CAST_AQUAMVS */
    AP_CAMERA_K_LAST_ROW = -3,      /* K's last row is not (0, 0, 1) */
    AP_CAMERA_K_SINGULAR = -4,
    AP_CAMERA_R_NOT_ORTHONORMAL = -5,   /* R R^T off I by more than 1e-6 */
    AP_CAMERA_R_REFLECTION = -6,    /* det R = -1 */
    AP_CAMERA_NORMAL_ZERO = -7,     /* refractive only, as are the rest */
    AP_CAMERA_N_AIR = -8,           /* not > 0 */
    AP_CAMERA_N_WATER = -9,
    AP_CAMERA_NOT_ABOVE_WATER = -10,
};

/* Fills cam from packed params. Returns AP_CAMERA_OK (0), or the first
 * AP_CAMERA_* problem found (< 0). */
int ap_camera_init(ap_camera *cam, const double *params);

/* A sentence saying what is wrong with params, given ap_camera_init's
 * status: which parameter, its value, and what it must be. Always
 * NUL-terminated (truncated to size). */
void ap_camera_explain(const double *params, int status, char *buf,
                       size_t size);

/* The ray of pixel (u, v) (pixel centres at integers): origin and unit
 * direction, in water for a refractive camera. Returns 0 when there is
 * none: u or v not finite, or for a refractive camera a ray that does not
 * reach the water or that the surface reflects whole (past the critical
 * angle, where n_water < n_air); for AP_CAST_AQUAMVS, only a ray parallel
 * to the surface or a bent direction of no length. */
int ap_camera_cast(const ap_camera *cam, double u, double v, double *origin,
                   double *direction);

/* Pixel of world point x. Returns 0 when x is behind the camera, or for a
 * refractive camera when x is not under the water, or when the pixel is
 * not finite (x is not). */
int ap_camera_project(const ap_camera *cam, const double *x, double *u,
                      double *v);

#endif
