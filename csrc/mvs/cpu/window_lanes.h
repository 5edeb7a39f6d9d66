/* SSIM's hottest loops (textbook and AquaMVS parity), and parity NCC's
 * box sums along a row at window 11 (along_5), written once for
 * a vector of AP_LANES doubles and included at two widths: at four lanes
 * by four_lanes.h, inlined into the clones of window_costs.c and
 * ../parity/parity_filters.c, and at eight by wide_lanes.c, compiled for
 * AVX-512 alone (where the CPU lacks it, GCC splits a vector wider than
 * its registers through the stack).
 * Each lane does the same arithmetic in the same order at either width,
 * so both give the same bits; what the width changes is how many
 * instructions it takes.
 *
 * The includer defines AP_LANES, AP_LANES_VEC (a vector of AP_LANES
 * doubles), AP_LANES_MASK (of AP_LANES long longs, what comparing two
 * AP_LANES_VEC gives), AP_LANES_WIDEN(p, d) (AP_LANES floats at p into *d),
 * AP_LANES_NAME(x) (the functions' names) and AP_LANES_FN (their
 * attributes). No include guard: each inclusion makes one width. */

/* AP_LANES samples loaded: the reference values r0, weight times them
 * (r) and the warped values (s), both 0 where not seen, and the seen
 * mask. */
typedef struct {
    AP_LANES_VEC r0, r, s;
    AP_LANES_MASK seen;
} AP_LANES_NAME(samples);

static inline __attribute__((always_inline)) void
AP_LANES_NAME(load)(const float *ref, const float *warped, double weight,
                    AP_LANES_NAME(samples) *f)
{
    AP_LANES_VEC s0;
    AP_LANES_WIDEN(ref, &f->r0);
    AP_LANES_WIDEN(warped, &s0);
    f->seen = s0 == s0;
    f->r = (AP_LANES_VEC)((AP_LANES_MASK)(weight * f->r0) & f->seen);
    f->s = (AP_LANES_VEC)((AP_LANES_MASK)s0 & f->seen);
}

/* The three quantities that hold the warped values: weight times s, s^2
 * and r s, as sample_quantities (window_costs.c) makes them: each from
 * weight times s, three products where four were taken. */
static inline __attribute__((always_inline)) void
AP_LANES_NAME(warped_of)(const AP_LANES_NAME(samples) *f, double weight,
                         AP_LANES_VEC q[3])
{
    q[0] = weight * f->s;
    q[1] = q[0] * f->s;
    q[2] = q[0] * f->r0;
}

/* sample_quantities of AP_LANES samples, weighted, each lane the same
 * arithmetic, into six sums (set when first, else added). */
static inline __attribute__((always_inline)) void
AP_LANES_NAME(add_all)(const float *ref, const float *warped, double g,
                       AP_LANES_VEC sum[6], int first)
{
    AP_LANES_NAME(samples) f;
    AP_LANES_NAME(load)(ref, warped, g, &f);
    AP_LANES_VEC w3[3], weights = {0.0};
    AP_LANES_NAME(warped_of)(&f, g, w3);
    weights += g;
    AP_LANES_VEC q[6] = {(AP_LANES_VEC)((AP_LANES_MASK)weights & f.seen),
                         f.r, w3[0], f.r * f.r0, w3[1], w3[2]};
    for (int k = 0; k < 6; k++) {
        if (first) {
            sum[k] = q[k];
        } else {
            sum[k] += q[k];
        }
    }
}

/* Six sums stored at column x of out[6], one by one: a loop over them
 * went through the stack */
static inline __attribute__((always_inline)) void
AP_LANES_NAME(store_six)(double *const out[6], int x,
                         const AP_LANES_VEC sum[6])
{
    memcpy(out[0] + x, &sum[0], sizeof(sum[0]));
    memcpy(out[1] + x, &sum[1], sizeof(sum[1]));
    memcpy(out[2] + x, &sum[2], sizeof(sum[2]));
    memcpy(out[3] + x, &sum[3], sizeof(sum[3]));
    memcpy(out[4] + x, &sum[4], sizeof(sum[4]));
    memcpy(out[5] + x, &sum[5], sizeof(sum[5]));
}

/* ap_weighted_columns' rows out[6] from column x on, 2 AP_LANES columns
 * at a time (twelve chains of adds overlap) while they fit before x1,
 * then AP_LANES if they fit; returns the column it stopped at. */
AP_LANES_FN int
AP_LANES_NAME(all_columns)(double *const out[6], int x, int x1,
                           const float *const *refs,
                           const float *const *rows, const double *weights,
                           int count)
{
    for (; x + 2 * AP_LANES <= x1; x += 2 * AP_LANES) {
        AP_LANES_VEC a[6], b[6];
        AP_LANES_NAME(add_all)(refs[0] + x, rows[0] + x, weights[0], a, 1);
        AP_LANES_NAME(add_all)(refs[0] + x + AP_LANES,
                               rows[0] + x + AP_LANES, weights[0], b, 1);
        for (int j = 1; j < count; j++) {
            AP_LANES_NAME(add_all)(refs[j] + x, rows[j] + x, weights[j], a,
                                   0);
            AP_LANES_NAME(add_all)(refs[j] + x + AP_LANES,
                                   rows[j] + x + AP_LANES, weights[j], b, 0);
        }
        AP_LANES_NAME(store_six)(out, x, a);
        AP_LANES_NAME(store_six)(out, x + AP_LANES, b);
    }
    if (x + AP_LANES <= x1) {
        AP_LANES_VEC a[6];
        AP_LANES_NAME(add_all)(refs[0] + x, rows[0] + x, weights[0], a, 1);
        for (int j = 1; j < count; j++) {
            AP_LANES_NAME(add_all)(refs[j] + x, rows[j] + x, weights[j], a,
                                   0);
        }
        AP_LANES_NAME(store_six)(out, x, a);
        x += AP_LANES;
    }
    return x;
}

/* add_all's three quantities that hold the warped values (s, s^2, r s),
 * for samples all seen: the same products, so the same bits. */
static inline __attribute__((always_inline)) void
AP_LANES_NAME(add_seen)(const float *ref, const float *warped, double g,
                        AP_LANES_VEC sum[3], int first)
{
    AP_LANES_VEC r, s;
    AP_LANES_WIDEN(ref, &r);
    AP_LANES_WIDEN(warped, &s);
    AP_LANES_VEC gs = g * s;
    AP_LANES_VEC q[3] = {gs, gs * s, gs * r};
    for (int k = 0; k < 3; k++) {
        if (first) {
            sum[k] = q[k];
        } else {
            sum[k] += q[k];
        }
    }
}

/* ap_weighted_seen_columns' rows out[3] from column x on, 2 AP_LANES
 * columns at a time (six chains of adds overlap) while they fit before
 * x1, then AP_LANES if they fit; returns the column it stopped at. */
AP_LANES_FN int
AP_LANES_NAME(seen_columns)(double *const out[3], int x, int x1,
                            const float *const *refs,
                            const float *const *rows, const double *weights,
                            int count)
{
    for (; x + 2 * AP_LANES <= x1; x += 2 * AP_LANES) {
        AP_LANES_VEC a[3], b[3];
        AP_LANES_NAME(add_seen)(refs[0] + x, rows[0] + x, weights[0], a, 1);
        AP_LANES_NAME(add_seen)(refs[0] + x + AP_LANES,
                                rows[0] + x + AP_LANES, weights[0], b, 1);
        for (int j = 1; j < count; j++) {
            AP_LANES_NAME(add_seen)(refs[j] + x, rows[j] + x, weights[j], a,
                                    0);
            AP_LANES_NAME(add_seen)(refs[j] + x + AP_LANES,
                                    rows[j] + x + AP_LANES, weights[j], b,
                                    0);
        }
        /* stored one by one: a loop over the rows went through the
         * stack */
        memcpy(out[0] + x, &a[0], sizeof(a[0]));
        memcpy(out[0] + x + AP_LANES, &b[0], sizeof(b[0]));
        memcpy(out[1] + x, &a[1], sizeof(a[1]));
        memcpy(out[1] + x + AP_LANES, &b[1], sizeof(b[1]));
        memcpy(out[2] + x, &a[2], sizeof(a[2]));
        memcpy(out[2] + x + AP_LANES, &b[2], sizeof(b[2]));
    }
    /* a range's last columns, one vector */
    if (x + AP_LANES <= x1) {
        AP_LANES_VEC a[3];
        AP_LANES_NAME(add_seen)(refs[0] + x, rows[0] + x, weights[0], a, 1);
        for (int j = 1; j < count; j++) {
            AP_LANES_NAME(add_seen)(refs[j] + x, rows[j] + x, weights[j], a,
                                    0);
        }
        memcpy(out[0] + x, &a[0], sizeof(a[0]));
        memcpy(out[1] + x, &a[1], sizeof(a[1]));
        memcpy(out[2] + x, &a[2], sizeof(a[2]));
        x += AP_LANES;
    }
    return x;
}

/* s += g (*left + *right): one symmetric pair of taps */
static inline __attribute__((always_inline)) void
AP_LANES_NAME(add_taps)(AP_LANES_VEC *s, const double *left,
                        const double *right, double g)
{
    AP_LANES_VEC a, b;
    memcpy(&a, left, sizeof(a));
    memcpy(&b, right, sizeof(b));
    *s += g * (a + b);
}

/* One output of the symmetric filter of radius 5 (window 11) from its
 * inputs v[0 .. 10] (v[5] the centre), in add_taps' order, so with the
 * bits taps_along and taps_down give it. box: the taps all 1, their
 * products left out (ap_aquamvs_box_along's sums); t unread. */
static inline __attribute__((always_inline)) void
AP_LANES_NAME(sym_5)(const AP_LANES_VEC *v, const double *t, int box,
                     AP_LANES_VEC *out)
{
    AP_LANES_VEC s;
    if (box) {
        s = v[5];
        for (int j = 1; j <= 5; j++) {
            s += v[5 - j] + v[5 + j];
        }
    } else {
        s = v[5] * t[0];
        for (int j = 1; j <= 5; j++) {
            s += t[j] * (v[5 - j] + v[5 + j]);
        }
    }
    *out = s;
}

/* taps_along at radius 5 (window 11, the usual one), one vector at a
 * time, each column's vector loaded once: the vectors at x + AP_LANES
 * - 5 .. x + 5 that one output's taps read are the next output's
 * first, so a pass loads AP_LANES new ones where 11 were loaded (and
 * most of those straddle two cache lines). box: as sym_5's. */
static inline __attribute__((always_inline)) int
AP_LANES_NAME(along_5)(const double *col, const double *taps, int x,
                       int end, double *out, int box)
{
    if (x + AP_LANES > end) {
        return x;
    }
    /* a copy no store to out can alias, so the taps stay in registers */
    double t[6] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
    for (int j = 0; !box && j < 6; j++) {
        t[j] = taps[j];
    }
    AP_LANES_VEC m5, m4, m3, m2, m1, z, p1, p2, p3, p4, p5;
    memcpy(&m5, col + x - 5, sizeof(m5));
    memcpy(&m4, col + x - 4, sizeof(m4));
    memcpy(&m3, col + x - 3, sizeof(m3));
#if AP_LANES == 4
    memcpy(&m2, col + x - 2, sizeof(m2));
    memcpy(&m1, col + x - 1, sizeof(m1));
    memcpy(&z, col + x, sizeof(z));
    memcpy(&p1, col + x + 1, sizeof(p1));
#endif
    for (; x + AP_LANES <= end; x += AP_LANES) {
        const double *c = col + x;
#if AP_LANES == 8
        memcpy(&m2, c - 2, sizeof(m2));
        memcpy(&m1, c - 1, sizeof(m1));
        memcpy(&z, c, sizeof(z));
        memcpy(&p1, c + 1, sizeof(p1));
#endif
        memcpy(&p2, c + 2, sizeof(p2));
        memcpy(&p3, c + 3, sizeof(p3));
        memcpy(&p4, c + 4, sizeof(p4));
        memcpy(&p5, c + 5, sizeof(p5));
        const AP_LANES_VEC v[11] = {m5, m4, m3, m2, m1, z,
                                    p1, p2, p3, p4, p5};
        AP_LANES_VEC sum;
        AP_LANES_NAME(sym_5)(v, t, box, &sum);
        memcpy(out + x, &sum, sizeof(sum));
#if AP_LANES == 8
        m5 = p3;
        m4 = p4;
        m3 = p5;
#else
        m5 = m1;
        m4 = z;
        m3 = p1;
        m2 = p2;
        m1 = p3;
        z = p4;
        p1 = p5;
#endif
    }
    return x;
}

/* Symmetric filters' outputs from column x on, 4 AP_LANES at a time
 * (four chains of adds overlap), then one vector at a time, while they
 * end by `end`: along a row col (out[x] = taps[0] col[x] + the sum over
 * j of taps[j] (col[x - j] + col[x + j]), j = 1 .. r, which reads
 * col[x - r, end + r)), or down the rows of a window (col[x +- j] there
 * rows[r -+ j][x]); returns the column it stopped at. A pair of taps
 * takes one product. */
AP_LANES_FN int
AP_LANES_NAME(taps_along)(const double *col, int r, const double *taps,
                          int x, int end, double *out)
{
    if (r == 5) {
        return AP_LANES_NAME(along_5)(col, taps, x, end, out, 0);
    }
    for (; x + 4 * AP_LANES <= end; x += 4 * AP_LANES) {
        const double *c = col + x;
        AP_LANES_VEC s[4];
        memcpy(&s[0], c, sizeof(s[0]));
        memcpy(&s[1], c + AP_LANES, sizeof(s[1]));
        memcpy(&s[2], c + 2 * AP_LANES, sizeof(s[2]));
        memcpy(&s[3], c + 3 * AP_LANES, sizeof(s[3]));
        /* the four written out, here and below: as loops, GCC at -O2
         * keeps the sums on the stack */
        s[0] *= taps[0];
        s[1] *= taps[0];
        s[2] *= taps[0];
        s[3] *= taps[0];
        /* the taps walked by pointer: indexed by j, GCC spends as many
         * instructions on addresses as on the sums */
        const double *left = c, *right = c, *g = taps;
        for (int j = 0; j < r; j++) {
            left--;
            right++;
            g++;
            AP_LANES_NAME(add_taps)(&s[0], left, right, *g);
            AP_LANES_NAME(add_taps)(&s[1], left + AP_LANES,
                                    right + AP_LANES, *g);
            AP_LANES_NAME(add_taps)(&s[2], left + 2 * AP_LANES,
                                    right + 2 * AP_LANES, *g);
            AP_LANES_NAME(add_taps)(&s[3], left + 3 * AP_LANES,
                                    right + 3 * AP_LANES, *g);
        }
        /* stored one by one: a loop went through the stack */
        memcpy(out + x, &s[0], sizeof(s[0]));
        memcpy(out + x + AP_LANES, &s[1], sizeof(s[1]));
        memcpy(out + x + 2 * AP_LANES, &s[2], sizeof(s[2]));
        memcpy(out + x + 3 * AP_LANES, &s[3], sizeof(s[3]));
    }
    /* then one vector at a time */
    for (; x + AP_LANES <= end; x += AP_LANES) {
        AP_LANES_VEC s;
        memcpy(&s, col + x, sizeof(s));
        s *= taps[0];
        for (int j = 1; j <= r; j++) {
            AP_LANES_NAME(add_taps)(&s, col + x - j, col + x + j, taps[j]);
        }
        memcpy(out + x, &s, sizeof(s));
    }
    return x;
}

AP_LANES_FN int
AP_LANES_NAME(taps_down)(const double *const *rows, int r,
                         const double *taps, int x, int end, double *out)
{
    const double *mid = rows[r];
    for (; x + 4 * AP_LANES <= end; x += 4 * AP_LANES) {
        AP_LANES_VEC s[4];
        memcpy(&s[0], mid + x, sizeof(s[0]));
        memcpy(&s[1], mid + x + AP_LANES, sizeof(s[1]));
        memcpy(&s[2], mid + x + 2 * AP_LANES, sizeof(s[2]));
        memcpy(&s[3], mid + x + 3 * AP_LANES, sizeof(s[3]));
        s[0] *= taps[0];
        s[1] *= taps[0];
        s[2] *= taps[0];
        s[3] *= taps[0];
        /* a pair's row pointers loaded once for the four vectors */
        const double *const *up = rows + r, *const *down = up;
        const double *g = taps;
        for (int j = 0; j < r; j++) {
            up--;
            down++;
            g++;
            const double *a = *up + x, *b = *down + x;
            AP_LANES_NAME(add_taps)(&s[0], a, b, *g);
            AP_LANES_NAME(add_taps)(&s[1], a + AP_LANES, b + AP_LANES, *g);
            AP_LANES_NAME(add_taps)(&s[2], a + 2 * AP_LANES,
                                    b + 2 * AP_LANES, *g);
            AP_LANES_NAME(add_taps)(&s[3], a + 3 * AP_LANES,
                                    b + 3 * AP_LANES, *g);
        }
        memcpy(out + x, &s[0], sizeof(s[0]));
        memcpy(out + x + AP_LANES, &s[1], sizeof(s[1]));
        memcpy(out + x + 2 * AP_LANES, &s[2], sizeof(s[2]));
        memcpy(out + x + 3 * AP_LANES, &s[3], sizeof(s[3]));
    }
    for (; x + AP_LANES <= end; x += AP_LANES) {
        AP_LANES_VEC s;
        memcpy(&s, mid + x, sizeof(s));
        s *= taps[0];
        for (int j = 1; j <= r; j++) {
            AP_LANES_NAME(add_taps)(&s, rows[r - j] + x, rows[r + j] + x,
                                    taps[j]);
        }
        memcpy(out + x, &s, sizeof(s));
    }
    return x;
}

/* taps_down at radius 5 for four consecutive image rows, into out + i
 * w (i < 4), rows[k] (k < 14) their windows' rows from the first row's
 * first: each row's vector loaded once for the four, where four calls of
 * taps_down load 44 (a view's rings outgrow L1, so most come from L2);
 * the same bits. Returns the column it stopped at. */
AP_LANES_FN int
AP_LANES_NAME(down_four_5)(const double *const *rows, const double *taps,
                           int x, int end, size_t w, double *out)
{
    double t[6];    /* as along_5's */
    for (int j = 0; j < 6; j++) {
        t[j] = taps[j];
    }
    for (; x + AP_LANES <= end; x += AP_LANES) {
        AP_LANES_VEC v[14];
        for (int k = 0; k < 14; k++) {
            memcpy(&v[k], rows[k] + x, sizeof(v[k]));
        }
        for (int i = 0; i < 4; i++) {
            AP_LANES_VEC sum;
            AP_LANES_NAME(sym_5)(v + i, t, 0, &sum);
            memcpy(out + i * w + x, &sum, sizeof(sum));
        }
    }
    return x;
}

#undef AP_LANES
#undef AP_LANES_VEC
#undef AP_LANES_MASK
#undef AP_LANES_WIDEN
#undef AP_LANES_NAME
#undef AP_LANES_FN
