/* A source camera prepared for projecting many points of one sweep: the
 * pinhole folded into one 3x4 matrix, and for a refractive camera the
 * interface frame plus a table of Newton solutions over the (squared
 * horizontal distance, depth below the surface) box the sweep visits. A
 * sample takes the table's guess and one Newton step on Snell's law
 * squared (no square root; ap_snell_step_share), where a cold start needs
 * AP_NEWTON_COLD steps; and its result depends on the point alone, never
 * on which pixel or depth was solved before it. */
#ifndef AP_PROJECTOR_H
#define AP_PROJECTOR_H

#include <stddef.h>

#include "camera.h"

/* Newton steps taken from the table's guess. The table is refined until
 * that step lands within AP_TABLE_TOLERANCE (m) of the converged solution
 * at every cell centre (where bilinear guesses are worst), up to
 * AP_TABLE_MAX points a side; a table that cannot get there (points a hair
 * under the surface) is followed by as many steps as its cell centres
 * need, up to AP_NEWTON_WARM; where even those do not land (a box that
 * rays grazing the water stretch tens of metres out), no table: each
 * sample's crossing is found as the GPU finds it (ap_crossing_float_first)
 * and solved cold, as ap_camera_project solves it, where that did not
 * settle. */
#define AP_NEWTON_TABLE 1
/* Before a table, polynomial guesses are tried, of 3 and then up to
 * AP_GUESS_TERMS terms in each of dist^2 and depth (degree 2, 3),
 * interpolating the solutions at the box's Chebyshev nodes; the first
 * from which one step lands within AP_TABLE_TOLERANCE on a 65 x 65 grid
 * over the box is kept. It takes arithmetic alone where the table takes
 * lookups. */
#define AP_GUESS_TERMS 4
#define AP_TABLE_TOLERANCE 1e-8
#define AP_TABLE_MAX 257

typedef struct {
    int refractive;
    double P[12];       /* pinhole: homogeneous pixel = P [x; 1] */
    double depth[4];    /* pinhole: camera depth = depth . [x; 1] */
    /* refractive: depth below the surface z = below[3] - below . x,
     * horizontal offset from the camera's foot (hx, hy) = (e1, e2) . x +
     * (e1[3], e2[3]); the interface point foot + qx e1 + qy e2 has the
     * homogeneous pixel A[:, 0] + qx A[:, 1] + qy A[:, 2] and camera
     * depth Z[0] + qx Z[1] + qy Z[2] */
    double below[4], e1[4], e2[4], A[9], Z[3];
    double hc, na, nw;
    int steps;          /* Newton steps from the guess */
    int terms;          /* the guess: the polynomial's terms a side, or 0:
                         * the table */
    int per_sample;     /* no guess: each sample's crossing solved alone
                         * (terms 0, no table) */
    /* the polynomial's coordinates x = dist^2 g_x[0] + g_x[1] and
     * y = depth g_y[0] + g_y[1], in [-1, 1] over the box, and its
     * monomials' coefficients, [power of x * terms + power of y] */
    double g_x[2], g_y[2], coef[AP_GUESS_TERMS * AP_GUESS_TERMS];
    int tn;             /* table points a side */
    double t_dscale, t_z0, t_zscale;   /* grid index = value * scale */
    /* tn * tn shares t = r / dist of the way from the foot to the point
     * where the interface is crossed, index [i_dist^2 * tn + i_depth];
     * floats, as a guess needs no more and they load in pairs */
    float *table;
} ap_projector;

/* Prepares cam's frame; a refractive camera also needs a table. */
void ap_projector_init(ap_projector *p, const ap_camera *cam);

/* Tabulates a refractive camera's solutions for points whose squared
 * horizontal distance from its foot is at most d2_max and whose depth
 * below its surface lies in [z_min, z_max] (points outside still project
 * correctly, from a worse guess). Returns 0, or -1 out of memory. */
int ap_projector_tabulate(ap_projector *p, double d2_max, double z_min,
                          double z_max);
void ap_projector_free(ap_projector *p);

/* Points origin + depth * direction (SoA, n of them) resampled
 * bilinearly from each of `views` images imgs (views, h, w) through its
 * projector proj[view] into out[view]; NaN where the point is not seen
 * (a NaN origin marks a pixel without a ray). Cameras over the same
 * water share the point's placement in their interface frame; each
 * sample's bits are those of the camera alone. */
void ap_project_sample(const ap_projector *proj, int views,
                       const double *const ray[6], int n, double depth,
                       const float *imgs, int h, int w, float *const out[]);

/* Floats of an (h, w) image with its first row and column repeated. */
static inline size_t
ap_edges_size(int h, int w)
{
    return ((size_t)h + 1) * ((size_t)w + 1);
}

/* img (h, w) into pad (ap_edges_size floats), its first row and column
 * repeated once before it. */
void ap_pad_edges(const float *img, int h, int w, float *pad);

/* ap_project_sample from images padded by ap_pad_edges (views,
 * ap_edges_size(h, w), which must be at most INT_MAX): the same bits,
 * with half the clamps at the image's border. */
void ap_project_sample_edges(const ap_projector *proj, int views,
                             const double *const ray[6], int n, double depth,
                             const float *pads, int h, int w,
                             float *const out[]);

/* ap_project_sample as AquaMVS samples (grid_sample, bilinear, zero
 * padding, corners aligned), into double rows: texels outside the image
 * count as 0, so a point seen off the image is sampled (0 far off); NaN
 * only where the point does not project (no ray, behind the camera, not
 * under the water). */
void ap_project_sample_zeros(const ap_projector *proj, int views,
                             const double *const ray[6], int n,
                             double depth, const float *imgs, int h, int w,
                             double *const out[]);

/* Zeros a padded image holds before and after each row and column:
 * AquaMVS's sample clamps coordinates to [-2, w + 1], and the cell of
 * w + 1 reaches w + 2. */
#define AP_PAD_BEFORE 2
#define AP_PAD_AFTER 3

/* Floats of an (h, w) image padded with zeros. */
static inline size_t
ap_padded_size(int h, int w)
{
    return ((size_t)h + AP_PAD_BEFORE + AP_PAD_AFTER) *
           ((size_t)w + AP_PAD_BEFORE + AP_PAD_AFTER);
}

/* img (h, w) into pad (ap_padded_size floats) with AP_PAD_BEFORE zero
 * rows and columns before it, AP_PAD_AFTER after. */
void ap_pad_zeros(const float *img, int h, int w, float *pad);

/* ap_project_sample_zeros from images padded by ap_pad_zeros (views,
 * ap_padded_size(h, w), which must be at most INT_MAX): the same bits,
 * faster. */
void ap_project_sample_padded(const ap_projector *proj, int views,
                              const double *const ray[6], int n,
                              double depth, const float *pads, int h, int w,
                              double *const out[]);

/* Widens box[v] (largest squared horizontal distance, least and
 * greatest depth below the surface) to hold the points origin + depth *
 * direction of each refractive camera proj[v] of `views` (NaN origins
 * are skipped; pinhole cameras' boxes are left as they are). Cameras over
 * the same water share the points' placement in their frame. */
void ap_projectors_extent(const ap_projector *proj, int views,
                          const double *const ray[6], int n, double depth,
                          double (*box)[3]);

#endif
