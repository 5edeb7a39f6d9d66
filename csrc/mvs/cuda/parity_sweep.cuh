/* The CUDA kernels of AquaMVS parity (../parity/parity_costs.h), included by
 * sweep.cu. Windows up to AP_PSTRIP_RADII take the strip kernels
 * (gpu_parity_strip.h): one launch, the samples warped once a block and
 * never written out. Wider windows, and every window where
 * $AQUAPROF_MVS_GPU_PARITY is "passes", take three launches a plane, each
 * over every pixel of the
 * launch's views, through global scratch (three (h, w) double planes a
 * view: the warped sample, NaN unseen, then the centred reference and
 * source): warp; centre each pixel by its own window's means; filter the
 * centred products and add the views' costs into the volume. Windows are
 * summed whole (no shared tiles): simple and exact, for every window up
 * to AP_MAX_WINDOW, where a fused tile would need a halo of two radii. */
#include "gpu_parity_strip.h"
#include "../parity/parity_math.h"

enum { PARITY_WARPED, PARITY_RC, PARITY_SC, PARITY_PLANES };

static __device__ double *
parity_plane(const ap_cuda_sweep &p, int view, int k)
{
    return (double *)p.scratch +
           ((size_t)view * PARITY_PLANES + k) * (size_t)p.h * p.w;
}

/* The window's weight at offsets (i, j) from its corner. */
static __device__ double
parity_weight(const ap_cuda_sweep &p, int i, int j)
{
    return p.cost == AP_COST_SSIM ? p.gauss[i] * p.gauss[j] : 1.0;
}

/* The seen weight (unclamped) of pixel (x, y)'s window and its means of
 * r m and s m (over the clamped weight), zero-padded. */
static __device__ double
parity_means(const ap_cuda_sweep &p, const double *warped, int x, int y,
             double *mr, double *ms)
{
    const float *ref = (const float *)p.ref;
    const int r = p.radius;
    double n = 0.0, sr = 0.0, ss = 0.0;
    /* count: trips=window */
    for (int i = 0; i <= 2 * r; i++) {
        int yy = y + i - r;
        /* count: trips=window */
        for (int j = 0; j <= 2 * r && yy >= 0 && yy < p.h; j++) {
            int xx = x + j - r;
            if (xx < 0 || xx >= p.w) {
                continue;
            }
            size_t k = (size_t)yy * p.w + xx;
            double s = warped[k];
            if (s == s) {
                double g = parity_weight(p, i, j);
                n += g;
                sr += g * ref[k];
                ss += g * s;
            }
        }
    }
    double least = p.cost == AP_COST_SSIM ? AP_AQUAMVS_SSIM_LEAST
                                          : AP_AQUAMVS_NCC_LEAST;
    double c = n < least ? least : n;
    *mr = sr / c;
    *ms = ss / c;
    return n;
}

extern "C" __global__ void
ap_parity_warp_kernel(ap_cuda_sweep p)
{
    /* count: kernel=ap_parity_warp_kernel; per=1 */
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = p.row0 + (int)(blockIdx.y * blockDim.y + threadIdx.y);
    int view = blockIdx.z;
    if (x >= p.w || y >= p.h) {
        return;
    }
    size_t n = (size_t)p.h * p.w, i = (size_t)y * p.w + x;
    const float *img = (const float *)p.srcs + (size_t)view * n;
    double depth = ((const double *)p.depths)[p.first], point[3], u, v;
    ap_ray_point((const double *)p.rays, i, depth, point);
    int seen = point[0] == point[0] &&
               ap_project_fast(&p.cams[view], point, &u, &v);
    parity_plane(p, view, PARITY_WARPED)[i] =
        seen ? ap_bilinear_zeros(img, p.h, p.w, u, v) : NAN;
}

extern "C" __global__ void
ap_parity_centre_kernel(ap_cuda_sweep p)
{
    /* count: kernel=ap_parity_centre_kernel; per=1 */
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = p.row0 + (int)(blockIdx.y * blockDim.y + threadIdx.y);
    int view = blockIdx.z;
    if (x >= p.w || y >= p.h) {
        return;
    }
    size_t i = (size_t)y * p.w + x;
    const double *warped = parity_plane(p, view, PARITY_WARPED);
    double mr, ms;
    parity_means(p, warped, x, y, &mr, &ms);
    double s = warped[i], m = s == s ? 1.0 : 0.0;
    parity_plane(p, view, PARITY_RC)[i] =
        (((const float *)p.ref)[i] - mr) * m;
    parity_plane(p, view, PARITY_SC)[i] = s == s ? s - ms : 0.0;
}

extern "C" __global__ void
ap_parity_cost_kernel(ap_cuda_sweep p)
{
    /* count: kernel=ap_parity_cost_kernel; per=views */
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = p.row0 + (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= p.w || y >= p.h) {
        return;
    }
    const int r = p.radius;
    const double fewest = (double)((2 * r + 1) * (2 * r + 1) / 2);
    double total = 0.0;
    /* count: trips=views */
    for (int view = 0; view < p.views; view++) {
        const double *rc = parity_plane(p, view, PARITY_RC);
        const double *sc = parity_plane(p, view, PARITY_SC);
        double mr, ms;
        double n = parity_means(p, parity_plane(p, view, PARITY_WARPED), x,
                                y, &mr, &ms);
        double srr = 0.0, sss = 0.0, srs = 0.0;
        /* count: trips=window */
        for (int i = 0; i <= 2 * r; i++) {
            int yy = y + i - r;
            /* count: trips=window */
            for (int j = 0; j <= 2 * r && yy >= 0 && yy < p.h; j++) {
                int xx = x + j - r;
                if (xx < 0 || xx >= p.w) {
                    continue;
                }
                size_t k = (size_t)yy * p.w + xx;
                double g = parity_weight(p, i, j);
                srr += g * rc[k] * rc[k];
                sss += g * sc[k] * sc[k];
                srs += g * rc[k] * sc[k];
            }
        }
        total += p.cost == AP_COST_SSIM
                     ? ap_aquamvs_ssim(n, mr, ms, srr, sss, srs)
                     : ap_aquamvs_ncc(n, srr, sss, srs, fewest);
    }
    float *out = (float *)p.out + ((size_t)y * p.w + x) * p.d + p.first;
    *out = (float)(((p.add ? *out : 0.0f) + total) * p.scale);
}

/* The strip kernels (gpu_parity_strip.h): a block of AP_PSTRIP_COLS
 * threads, one a column, down AP_PSTRIP_ROWS output rows of one plane,
 * each source in turn; the cost kind a constant. */
template <int COST>
static __device__ __forceinline__ void
parity_strip(const ap_cuda_strip &p)
{
    /* count: kernel=ap_parity_strip_*; per=views * H * W / (ceil(W /
     * (AP_PSTRIP_COLS - 4 * radius)) * ceil(H / AP_PSTRIP_ROWS) *
     * AP_PSTRIP_COLS) */
    extern __shared__ double shared[];
    const int r = p.radius, c = threadIdx.x;
    const int outputs = ap_pstrip_outputs(r);
    const ap_pstrip_shared_at at = ap_pstrip_layout(shared, COST, r);
    int column;
    const int plane = strip_place(p, &column);
    ap_pstrip_block b;
    b.ref = (const float *)p.ref;
    b.rays = (const double *)p.rays;
    b.taps = COST == AP_COST_SSIM ? p.gauss : NULL;
    b.h = p.h;
    b.w = p.w;
    b.x0 = column * outputs - 2 * r;
    b.y0 = p.row0 + (int)blockIdx.y * AP_PSTRIP_ROWS;
    b.cost = COST;
    b.r = r;
    b.depth = ((const double *)p.depths)[plane];
    /* count: trips=spread(AP_PSTRIP_ROWS * (AP_PSTRIP_COLS - 4 * radius),
     * AP_PSTRIP_COLS); step=AP_PSTRIP_COLS */
    for (int i = c; i < AP_PSTRIP_ROWS * outputs; i += AP_PSTRIP_COLS) {
        at.acc[i] = 0.0f;
    }
    const size_t n = (size_t)p.h * p.w;
    const int end = ap_pstrip_end(&b);
    /* count: trips=views; part=sums */
    for (int v = 0; v < p.views; v++) {
        b.img = (const float *)p.srcs + (size_t)v * n;
        b.frame = &p.frames[v];
        ap_pstrip_column col = ap_pstrip_column_start(r);
        /* count: trips=H / ceil(H / AP_PSTRIP_ROWS) + 4 * radius */
        for (int y = b.y0 - 2 * r; y < end; y++) {
            ap_pstrip_enter(&b, at, &col, c, y);
            if (y < b.y0) {
                continue;
            }
            __syncthreads();
            if (c >= r && c < AP_PSTRIP_COLS - r) {
                /* count: share=(H / ceil(H / AP_PSTRIP_ROWS) + 2 *
                 * radius) / (H / ceil(H / AP_PSTRIP_ROWS) + 4 * radius) */
                ap_pstrip_centre(&b, at, &col, c, y);
            }
            __syncthreads();
            if (y >= b.y0 + 2 * r && c >= 2 * r &&
                c < AP_PSTRIP_COLS - 2 * r) {
                /* count: share=(H / ceil(H / AP_PSTRIP_ROWS)) / (H /
                 * ceil(H / AP_PSTRIP_ROWS) + 4 * radius) */
                ap_pstrip_cost(&b, at, &col, c, y);
            }
        }
    }
    __syncthreads();
    /* count: trips=spread(AP_PSTRIP_ROWS * (AP_PSTRIP_COLS - 4 * radius),
     * AP_PSTRIP_COLS); step=AP_PSTRIP_COLS */
    for (int i = c; i < AP_PSTRIP_ROWS * outputs; i += AP_PSTRIP_COLS) {
        int y = b.y0 + i / outputs, x = b.x0 + 2 * r + i % outputs;
        if (x < p.w && y < p.h) {
            float *out = (float *)p.out + ((size_t)y * p.w + x) * p.d +
                         plane;
            *out = ((p.add ? *out : 0.0f) + at.acc[i]) * p.scale;
        }
    }
}

extern "C" __global__ void
__launch_bounds__(AP_PSTRIP_COLS)
ap_parity_strip_ncc_kernel(ap_cuda_strip p)
{
    parity_strip<AP_COST_NCC>(p);
}

extern "C" __global__ void
__launch_bounds__(AP_PSTRIP_COLS)
ap_parity_strip_ssim_kernel(ap_cuda_strip p)
{
    parity_strip<AP_COST_SSIM>(p);
}
