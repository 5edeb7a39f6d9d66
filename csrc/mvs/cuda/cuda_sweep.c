/* CUDA entry points of aquaprof._mvs. aquaprof/mvs/_cuda.py checks the GPU
 * arrays, allocates outputs and scratch with the caller's own library
 * (torch, CuPy) and passes raw device pointers; these launch the kernels
 * on the caller's stream and return at once: nothing here synchronises
 * the device, so errors inside a kernel surface at the caller's next
 * synchronisation, as with any CUDA library. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../binding/mvs_module.h"

#include "cuda_sweep.h"
#include "cuda_driver.h"
#include "gpu_depth.h"
#include "gpu_parity_strip.h"
#include "gpu_ssim_strip.h"
#include "gpu_strip.h"

_Static_assert(AP_CUDA_STRIP_RADII == AP_STRIP_RADII,
               "the driver loads a strip NCC kernel for every radius");

#define BLOCK_X 32
#define BLOCK_Y 8
/* A grid holds at most 65535 blocks down and deep: taller images and
 * more planes take more launches. */
#define MAX_GRID_Y 65535
#define MAX_GRID_Z 65535
#define DEFAULT_SHARED (48 * 1024)

_Static_assert(sizeof(ap_cuda_sweep) <= 4096,
               "the cost kernel's parameters exceed 4 KiB");
_Static_assert(sizeof(ap_cuda_strip) <= 4096,
               "the strip kernels' parameters exceed 4 KiB");

/* The driver's state is the process's: one caller at a time loads it. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static const ap_cuda_device *
device_or_raise(int ordinal, const ap_cuda_api **api)
{
    char error[320];
    pthread_mutex_lock(&load_lock);
    const ap_cuda_device *d = ap_cuda_device_get(ordinal, api, error,
                                                 sizeof(error));
    pthread_mutex_unlock(&load_lock);
    if (d == NULL) {
        PyErr_Format(PyExc_RuntimeError, "the CUDA plane sweep cannot run: "
                     "%s", error);
    }
    return d;
}

/* Launches f in the device's context. 0, or -1 with RuntimeError. */
static int
launch(const ap_cuda_api *api, const ap_cuda_device *d, CUfunction f,
       unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
       unsigned shared, unsigned long long stream, void **params)
{
    char error[320];
    const char *call = "cuCtxPushCurrent";
    CUresult rc = api->CtxPushCurrent(d->ctx);
    if (rc == AP_CUDA_SUCCESS) {
        call = "cuFuncSetAttribute";
        if (shared > DEFAULT_SHARED) {
            rc = api->FuncSetAttribute(
                f, AP_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                (int)shared);
        }
        if (rc == AP_CUDA_SUCCESS) {
            call = "cuLaunchKernel";
            rc = api->LaunchKernel(f, gx, gy, gz, bx, by, 1, shared,
                                   (CUstream)(uintptr_t)stream, params,
                                   NULL);
        }
        CUcontext popped;
        api->CtxPopCurrent(&popped);
    }
    if (rc != AP_CUDA_SUCCESS) {
        ap_cuda_error(api, call, rc, error, sizeof(error));
        PyErr_Format(PyExc_RuntimeError, "the CUDA plane sweep failed: %s",
                     error);
        return -1;
    }
    return 0;
}

static unsigned
blocks(long long n, int per)
{
    return (unsigned)((n + per - 1) / per);
}

/* The rows, from row0, of one launch of blocks `per` rows high. */
static int
slice_rows(int h, int row0, int per)
{
    long long most = (long long)MAX_GRID_Y * per;
    return h - row0 < most ? h - row0 : (int)most;
}

/* f over every pixel of an h x w image, `deep` blocks deep, in grid
 * slices of rows: *row0, one of params, is each slice's first row. 0, or
 * -1 with RuntimeError. */
static int
launch_rows(const ap_cuda_api *api, const ap_cuda_device *d, CUfunction f,
            int h, int w, unsigned deep, unsigned long long stream,
            void **params, int *row0)
{
    for (*row0 = 0; *row0 < h; *row0 += MAX_GRID_Y * BLOCK_Y) {
        if (launch(api, d, f, blocks(w, BLOCK_X),
                   blocks(slice_rows(h, *row0, BLOCK_Y), BLOCK_Y), deep,
                   BLOCK_X, BLOCK_Y, 0, stream, params) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
launch_rays(const ap_cuda_api *api, const ap_cuda_device *d,
            unsigned long long stream, ap_camera *ref, int h, int w,
            ap_devptr rays)
{
    int row0;
    void *params[] = {ref, &h, &w, &row0, &rays};
    return launch_rows(api, d, d->rays, h, w, 1, stream, params, &row0);
}

/* h x w images of at least `least` pixels a side, at most AP_MAX_PIXELS
 * in all: 0, or -1 with ValueError naming what. */
static int
image_size(Py_ssize_t h, Py_ssize_t w, Py_ssize_t least, const char *what)
{
    if (h < least || w < least) {
        PyErr_Format(PyExc_ValueError, "%s must be at least %zd x %zd "
                     "pixels, got %zd x %zd", what, least, least, h, w);
        return -1;
    }
    return ap_mvs_check_pixels(h, w, what);
}

/* A device pointer argument and the size of its elements, which it must
 * be aligned to. */
typedef struct {
    const char *name;
    unsigned long long ptr;
    unsigned align;
} buffer;

/* 0 when no pointer is NULL or misaligned, else -1 with ValueError
 * naming the first that is: arithmetic alone, before the driver is
 * opened. */
static int
buffers_shaped(const buffer *b, int n)
{
    for (int i = 0; i < n; i++) {
        if (b[i].ptr == 0) {
            PyErr_Format(PyExc_ValueError, "%s is a null device pointer",
                         b[i].name);
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (b[i].ptr % b[i].align != 0) {
            char error[128];   /* PyErr_Format has no %llx */
            snprintf(error, sizeof(error), "%s (0x%llx) is not aligned to "
                     "its %u-byte elements", b[i].name, b[i].ptr,
                     b[i].align);
            PyErr_SetString(PyExc_ValueError, error);
            return -1;
        }
    }
    return 0;
}

/* 0 when the driver knows every buffer as device memory, else -1 with
 * ValueError naming the first that is not (RuntimeError when the context
 * cannot be made current). */
static int
buffers_on_device(const ap_cuda_api *api, const ap_cuda_device *d,
                  const buffer *b, int n)
{
    char error[512];
    CUresult rc = api->CtxPushCurrent(d->ctx);
    if (rc != AP_CUDA_SUCCESS) {
        ap_cuda_error(api, "cuCtxPushCurrent", rc, error, sizeof(error));
        PyErr_Format(PyExc_RuntimeError, "the CUDA plane sweep failed: %s",
                     error);
        return -1;
    }
    int status = 0;
    for (int i = 0; status == 0 && i < n; i++) {
        status = ap_cuda_check_buffer(api, b[i].ptr, b[i].name, error,
                                      sizeof(error));
    }
    CUcontext popped;
    api->CtxPopCurrent(&popped);
    if (status < 0) {
        PyErr_SetString(PyExc_ValueError, error);
    }
    return status;
}

PyObject *
ap_gpu_check(PyObject *module, PyObject *device)
{
    (void)module;
    const ap_cuda_api *api;
    long ordinal = PyLong_AsLong(device);
    if (ordinal == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (ordinal > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "device out of range");
        return NULL;
    }
    if (ordinal >= 0) {
        if (device_or_raise((int)ordinal, &api) == NULL) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    char error[320];
    int count;
    pthread_mutex_lock(&load_lock);
    int rc = ap_cuda_device_count(&count, error, sizeof(error));
    pthread_mutex_unlock(&load_lock);
    if (rc < 0) {
        PyErr_Format(PyExc_RuntimeError, "the CUDA plane sweep cannot run: "
                     "%s", error);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *
ap_gpu_warp(PyObject *module, PyObject *args)
{
    (void)module;
    int ordinal;
    Py_ssize_t h_size, w_size;
    unsigned long long stream, ptrs[3];
    PyObject *ref_params, *src_params;
    double depth;
    ap_camera ref, cam;
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iKKnnOOdKK:gpu_warp", &ordinal, &stream,
                          &ptrs[0], &h_size, &w_size, &ref_params,
                          &src_params, &depth, &ptrs[1], &ptrs[2]) ||
        ap_mvs_camera(ref_params, &ref, "ref_cam") < 0 ||
        ap_mvs_camera(src_params, &cam, "src_cam") < 0 ||
        image_size(h_size, w_size, 2, "src") < 0) {
        return NULL;
    }
    const buffer b[] = {{"src", ptrs[0], 4},
                        {"rays", ptrs[1], 8},
                        {"out", ptrs[2], 4}};
    if (buffers_shaped(b, 3) < 0) {
        return NULL;
    }
    int h = (int)h_size, w = (int)w_size;
    const ap_cuda_device *d = device_or_raise(ordinal, &api);
    if (d == NULL || buffers_on_device(api, d, b, 3) < 0 ||
        launch_rays(api, d, stream, &ref, h, w, ptrs[1]) < 0) {
        return NULL;
    }
    int row0;
    void *params[] = {&ptrs[1], &h, &w, &row0, &cam, &depth, &ptrs[0],
                      &ptrs[2]};
    if (launch_rows(api, d, d->warp, h, w, 1, stream, params, &row0) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Fills p's cameras from rows [first, first + views) of cams. */
static int
sweep_cameras(ap_cuda_sweep *p, PyArrayObject *cams, int first, int views)
{
    for (int v = 0; v < views; v++) {
        const double *row = (const double *)PyArray_DATA(cams) +
                            (size_t)(first + v) * AP_CAMERA_PARAMS;
        int rc = ap_camera_init(&p->cams[v], row);
        if (rc != AP_CAMERA_OK) {
            char what[32];
            snprintf(what, sizeof(what), "src_cams[%d]", first + v);
            ap_mvs_camera_error(row, rc, what);
            return -1;
        }
    }
    return 0;
}

/* Sets p up for the launches of views [v, v + AP_GPU_VIEWS) of n (srcs:
 * all n): their images and cameras, whether they add to the volume the
 * earlier groups left, and the mean's scale on the last group. */
static int
view_group(ap_cuda_sweep *p, PyArrayObject *cams, int n, int v,
           ap_devptr srcs)
{
    p->views = n - v < AP_GPU_VIEWS ? n - v : AP_GPU_VIEWS;
    p->srcs = srcs + (ap_devptr)v * p->h * p->w * sizeof(float);
    p->add = v > 0;
    p->scale = v + p->views == n ? (float)(1.0 / n) : 1.0f;
    return sweep_cameras(p, cams, v, p->views);
}

/* The launch's sizes: 0, or -1 with ValueError saying which is wrong. */
static int
sweep_sizes(Py_ssize_t n, Py_ssize_t h, Py_ssize_t w, Py_ssize_t d,
            Py_ssize_t first, Py_ssize_t count, int cost, int window)
{
    if (image_size(h, w, 2, "ref") < 0 ||
        ap_mvs_check_count(n, "srcs", "views") < 0 ||
        ap_mvs_check_count(d, "depths", "entries") < 0) {
        return -1;
    }
    if (n < 1 || d < 1) {
        PyErr_Format(PyExc_ValueError, "a sweep needs a source view and a "
                     "depth, got %zd views and %zd depths", n, d);
        return -1;
    }
    if (first < 0 || count < 1 || count > d - first) {
        PyErr_Format(PyExc_ValueError, "planes %zd to %zd are not among "
                     "the %zd depths", first, first + count - 1, d);
        return -1;
    }
    if (cost < AP_COST_NCC || cost > AP_COST_SAD) {
        PyErr_Format(PyExc_ValueError, "cost must be 0 (ncc), 1 (ssim) or "
                     "2 (sad), got %d", cost);
        return -1;
    }
    if (window < 3 || window % 2 == 0 || window > AP_MAX_WINDOW) {
        PyErr_Format(PyExc_ValueError, "window must be odd, from 3 to %d, "
                     "got %d", AP_MAX_WINDOW, window);
        return -1;
    }
    return 0;
}

/* Whether $AQUAPROF_MVS_GPU_WARP asks for the tile cost kernel, which
 * warps its tiles and their halos itself, where the strip kernel would
 * run: kept to time one against the other. */
static int
tile_asked(void)
{
    const char *how = getenv("AQUAPROF_MVS_GPU_WARP");
    return how != NULL && strcmp(how, "tile") == 0;
}

/* The strip cost kernels' shared memory: SSIM's sums its window afresh
 * (gpu_ssim_strip.h), the box windows slide theirs (gpu_strip.h). */
static unsigned
strip_shared(const ap_cuda_sweep *p)
{
    return p->cost == AP_COST_SSIM ? ap_sstrip_shared(p->radius)
                                   : ap_strip_shared(p->cost, p->radius);
}

/* The strip cost kernel for p's cost and window, or NULL: the tile
 * kernel's (the sources warped first, asked for, or a device whose
 * blocks cannot hold the strip's shared memory, as a variant of two
 * sources a thread may ask at wide windows). */
static CUfunction
strip_kernel(const ap_cuda_device *dev, const ap_cuda_sweep *p)
{
    if (p->warped || tile_asked() ||
        strip_shared(p) > (unsigned)dev->shared_optin) {
        return NULL;
    }
    if (p->cost == AP_COST_SSIM) {
        return dev->strip_ssim;
    }
    if (p->cost == AP_COST_SAD) {
        return dev->strip_sad;
    }
    return dev->strip_ncc[p->radius <= AP_STRIP_RADII ? p->radius : 0];
}

/* Whether $AQUAPROF_MVS_GPU_ORDER asks for the strip kernels' blocks a
 * plane at a time ("tiles", kept to time against; gpu_strip.h says why
 * planes go first). */
static int
tiles_first_asked(void)
{
    const char *how = getenv("AQUAPROF_MVS_GPU_ORDER");
    return how != NULL && strcmp(how, "tiles") == 0;
}

/* The strip kernels' parameters for p's launches: its buffers and
 * sizes, its views' frames, made here once a group of views, and the
 * order of the blocks. */
static void
strip_params(ap_cuda_strip *s, const ap_cuda_sweep *p)
{
    *s = (ap_cuda_strip){.ref = p->ref, .srcs = p->srcs, .rays = p->rays,
                         .depths = p->depths, .out = p->out, .h = p->h,
                         .w = p->w, .d = p->d, .views = p->views,
                         .add = p->add, .scale = p->scale,
                         .radius = p->radius,
                         .tiles_first = tiles_first_asked()};
    memcpy(s->gauss, p->gauss, sizeof(s->gauss));
    for (int v = 0; v < p->views; v++) {
        ap_gpu_frame_init(&s->frames[v], &p->cams[v]);
    }
}

/* A strip kernel f of `threads` threads a block over planes [first,
 * first + count) of p's views, its blocks `outputs` x `rows` outputs, in
 * launches of the planes a grid holds (ap_strip_launch_planes) and slices
 * of rows. 0, or -1 with RuntimeError. */
static int
launch_strips(const ap_cuda_api *api, const ap_cuda_device *dev,
              unsigned long long stream, CUfunction f,
              const ap_cuda_sweep *p, int first, int count, int outputs,
              int rows, unsigned threads, unsigned shared)
{
    ap_cuda_strip s;
    void *params[] = {&s};
    strip_params(&s, p);
    int columns = (int)blocks(p->w, outputs);
    for (int done = 0; done < count; done += s.planes) {
        s.planes = ap_strip_launch_planes(count - done, columns,
                                          s.tiles_first);
        s.first = first + done;
        unsigned gx, gz;
        ap_strip_grid(s.planes, columns, s.tiles_first, &gx, &gz);
        for (s.row0 = 0; s.row0 < p->h; s.row0 += MAX_GRID_Y * rows) {
            if (launch(api, dev, f, gx,
                       blocks(slice_rows(p->h, s.row0, rows), rows), gz,
                       threads, 1, shared, stream, params) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* The cost kernel over planes [first, first + count) of p's views (the
 * strip kernel where it takes them, the one that reads p->warped where
 * given), in grid slices of planes and of rows. 0, or -1 with an
 * exception. */
static int
launch_costs(const ap_cuda_api *api, const ap_cuda_device *dev,
             unsigned long long stream, ap_cuda_sweep *p, int first,
             int count)
{
    CUfunction f = strip_kernel(dev, p);
    if (f != NULL) {
        return launch_strips(api, dev, stream, f, p, first, count,
                             ap_strip_outputs(p->radius), AP_STRIP_ROWS,
                             AP_STRIP_COLS, strip_shared(p));
    }
    void *params[] = {p};
    f = p->warped ? dev->cost_planes : dev->cost;
    unsigned shared = ap_cuda_sweep_shared(p->radius);
    for (int z = 0; z < count; z += MAX_GRID_Z) {
        int slice = count - z < MAX_GRID_Z ? count - z : MAX_GRID_Z;
        p->first = first + z;
        for (p->row0 = 0; p->row0 < p->h;
             p->row0 += MAX_GRID_Y * AP_GPU_TILE_Y) {
            int rows = slice_rows(p->h, p->row0, AP_GPU_TILE_Y);
            if (launch(api, dev, f, blocks(p->w, AP_GPU_TILE_X),
                       blocks(rows, AP_GPU_TILE_Y), (unsigned)slice,
                       AP_GPU_TILE_X, AP_GPU_TILE_Y, shared, stream,
                       params) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* The textbook sweep over planes [first, first + count), for views in
 * groups that fit the parameters: the cost kernel alone, or where
 * p->warped holds `room` planes of a group, the warp of that many planes
 * and then their costs, in turn. 0, or -1 with an exception. */
static int
launch_sweep(const ap_cuda_api *api, const ap_cuda_device *dev,
             unsigned long long stream, ap_cuda_sweep *p,
             PyArrayObject *cams, int n, ap_devptr srcs, int first,
             int count, int room)
{
    void *params[] = {p};
    for (int v = 0; v < n; v += AP_GPU_VIEWS) {
        if (view_group(p, cams, n, v, srcs) < 0) {
            return -1;
        }
        int step = p->warped && room < count ? room : count;
        for (int c = first; c < first + count; c += step) {
            p->warp_first = c;
            p->planes = first + count - c < step ? first + count - c : step;
            /* p's views at these planes into p->warped */
            if ((p->warped &&
                 launch_rows(api, dev, dev->warp_planes, p->h, p->w,
                             (unsigned)p->views, stream, params,
                             &p->row0) < 0) ||
                launch_costs(api, dev, stream, p, c, p->planes) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* The AquaMVS parity strip kernel for p's cost and window, or NULL: the
 * three passes' (a window wider than the strip's, a device whose blocks
 * cannot hold its shared memory, or $AQUAPROF_MVS_GPU_PARITY "passes",
 * kept to time one against the other). */
static CUfunction
parity_strip_kernel(const ap_cuda_device *dev, int cost, int radius)
{
    const char *how = getenv("AQUAPROF_MVS_GPU_PARITY");
    if (radius > AP_PSTRIP_RADII ||
        ap_pstrip_shared(cost, radius) > (unsigned)dev->shared_optin ||
        (how != NULL && strcmp(how, "passes") == 0)) {
        return NULL;
    }
    return cost == AP_COST_SSIM ? dev->parity_strip_ssim
                                : dev->parity_strip_ncc;
}

/* ValueError where AquaMVS parity takes the three passes on dev and has
 * no scratch for them (the strip kernel needs none): -1, else 0. */
static int
parity_scratch_missing(const ap_cuda_device *dev, int cost, int window,
                       ap_devptr scratch)
{
    if (scratch != 0 || parity_strip_kernel(dev, cost, window / 2)) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "scratch is a null device pointer: "
                 "AquaMVS parity at window %d takes the three passes here, "
                 "which need it", window);
    return -1;
}

PyObject *
ap_gpu_parity_scratch(PyObject *module, PyObject *args)
{
    (void)module;
    int ordinal, cost, window;
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iii:gpu_parity_scratch", &ordinal, &cost,
                          &window) ||
        sweep_sizes(1, 2, 2, 1, 0, 1, cost, window) < 0 ||
        ap_mvs_check_parity(AP_PARITY_AQUAMVS, cost) < 0) {
        return NULL;
    }
    const ap_cuda_device *dev = device_or_raise(ordinal, &api);
    if (dev == NULL) {
        return NULL;
    }
    return PyBool_FromLong(parity_strip_kernel(dev, cost, window / 2) ==
                           NULL);
}

/* AquaMVS parity over planes [first, first + count): per group of views,
 * the strip kernel where it takes the window, else per plane the three
 * passes of parity_sweep.cuh, each over every row before the next (a
 * window reaches across row slices). p holds the rest, scratch
 * included. 0, or -1 with an exception. */
static int
launch_parity(const ap_cuda_api *api, const ap_cuda_device *dev,
              unsigned long long stream, ap_cuda_sweep *p,
              PyArrayObject *cams, int n, ap_devptr srcs, int first,
              int count)
{
    void *params[] = {p};
    CUfunction strip = parity_strip_kernel(dev, p->cost, p->radius);
    for (int v = 0; v < n; v += AP_GPU_VIEWS) {
        if (view_group(p, cams, n, v, srcs) < 0) {
            return -1;
        }
        if (strip != NULL) {
            if (launch_strips(api, dev, stream, strip, p, first, count,
                              ap_pstrip_outputs(p->radius), AP_PSTRIP_ROWS,
                              AP_PSTRIP_COLS,
                              ap_pstrip_shared(p->cost, p->radius)) < 0) {
                return -1;
            }
            continue;
        }
        for (p->first = first; p->first < first + count; p->first++) {
            const CUfunction passes[] = {dev->parity_warp,
                                         dev->parity_centre,
                                         dev->parity_cost};
            for (int k = 0; k < 3; k++) {
                unsigned depth = k < 2 ? (unsigned)p->views : 1;
                if (launch_rows(api, dev, passes[k], p->h, p->w, depth,
                                stream, params, &p->row0) < 0) {
                    return -1;
                }
            }
        }
    }
    return 0;
}

PyObject *
ap_gpu_cost_volume(PyObject *module, PyObject *args)
{
    (void)module;
    int ordinal, cost, window, parity = AP_PARITY_TEXTBOOK;
    Py_ssize_t n, h, w, d, first, count, room = 0;
    unsigned long long stream, ptrs[7] = {0};
    PyObject *ref_params, *src_params;
    ap_camera ref_cam;
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iKKKnnnOOKnnniiKK|iKKn:gpu_cost_volume",
                          &ordinal, &stream, &ptrs[0], &ptrs[1], &n, &h, &w,
                          &ref_params, &src_params, &ptrs[2], &d, &first,
                          &count, &cost, &window, &ptrs[3], &ptrs[4],
                          &parity, &ptrs[5], &ptrs[6], &room) ||
        ap_mvs_camera(ref_params, &ref_cam, "ref_cam") < 0 ||
        sweep_sizes(n, h, w, d, first, count, cost, window) < 0 ||
        ap_mvs_check_parity(parity, cost) < 0) {
        return NULL;
    }
    if (ptrs[6] != 0 && (parity != AP_PARITY_TEXTBOOK || room < 1 ||
                         room > INT32_MAX)) {
        PyErr_Format(PyExc_ValueError, "warped planes are for the textbook "
                     "sweep, with room for 1 plane or more, got parity %d "
                     "and room for %zd", parity, room);
        return NULL;
    }
    /* the sizes' limits keep every product under 2^64; parity's scratch
     * (double (min(n, AP_GPU_VIEWS), 3, h, w)) is checked only where
     * given (once the device is known, where the passes need it), the
     * warped planes (float (room, min(n, AP_GPU_VIEWS), h, w)) only where
     * given */
    buffer b[] = {{"ref", ptrs[0], 4},
                  {"srcs", ptrs[1], 4},
                  {"depths", ptrs[2], 8},
                  {"rays", ptrs[3], 8},
                  {"out", ptrs[4], 4},
                  {"scratch", ptrs[5], 8}};
    int buffers = parity == AP_PARITY_AQUAMVS && ptrs[5] != 0 ? 6 : 5;
    if (ptrs[6] != 0) {
        b[5] = (buffer){"warped", ptrs[6], 4};
        buffers = 6;
    }
    if (buffers_shaped(b, buffers) < 0) {
        return NULL;
    }
    PyArrayObject *cams = ap_mvs_array(src_params, NPY_DOUBLE, 2,
                                       AP_CAMERA_PARAMS, "src_cams");
    if (cams == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    ap_cuda_sweep *p = PyMem_Calloc(1, sizeof(*p));
    const ap_cuda_device *dev = NULL;
    if (p == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (PyArray_DIM(cams, 0) != n) {
        PyErr_Format(PyExc_ValueError, "src_cams must hold n cameras "
                     "(%zd), got %zd", n, (Py_ssize_t)PyArray_DIM(cams, 0));
        goto done;
    }
    dev = device_or_raise(ordinal, &api);
    if (dev == NULL ||
        (parity == AP_PARITY_AQUAMVS &&
         parity_scratch_missing(dev, cost, window, ptrs[5]) < 0) ||
        buffers_on_device(api, dev, b, buffers) < 0 ||
        launch_rays(api, dev, stream, &ref_cam, (int)h, (int)w, ptrs[3]) <
            0) {
        goto done;
    }
    *p = (ap_cuda_sweep){.ref = ptrs[0], .rays = ptrs[3],
                         .depths = ptrs[2], .out = ptrs[4], .h = (int)h,
                         .w = (int)w, .d = (int)d, .cost = cost,
                         .radius = window / 2, .scratch = ptrs[5],
                         .warped = ptrs[6]};
    ap_gauss_weights(p->radius, p->gauss);
    if (parity == AP_PARITY_AQUAMVS
        ? launch_parity(api, dev, stream, p, cams, (int)n, ptrs[1],
                        (int)first, (int)count) < 0
        : launch_sweep(api, dev, stream, p, cams, (int)n, ptrs[1],
                       (int)first, (int)count, (int)room) < 0) {
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_Free(p);
    Py_DECREF(cams);
    return result;
}

PyObject *
ap_gpu_extract_depth(PyObject *module, PyObject *args)
{
    (void)module;
    int ordinal;
    Py_ssize_t h_size, w_size, d_size;
    unsigned long long stream, ptrs[4];
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iKKnnnKKK:gpu_extract_depth", &ordinal,
                          &stream, &ptrs[0], &h_size, &w_size, &d_size,
                          &ptrs[1], &ptrs[2], &ptrs[3]) ||
        image_size(h_size, w_size, 1, "cost_volume") < 0 ||
        ap_mvs_check_count(d_size, "cost_volume", "planes") < 0) {
        return NULL;
    }
    if (d_size < 1) {
        PyErr_Format(PyExc_ValueError, "cost_volume must have a plane or "
                     "more, got %zd", d_size);
        return NULL;
    }
    const buffer b[] = {
        {"cost_volume", ptrs[0], 4},
        {"depths", ptrs[1], 8},
        {"depth", ptrs[2], 4},
        {"confidence", ptrs[3], 4}};
    if (buffers_shaped(b, 4) < 0) {
        return NULL;
    }
    int h = (int)h_size, w = (int)w_size, d = (int)d_size;
    const ap_cuda_device *dev = device_or_raise(ordinal, &api);
    if (dev == NULL || buffers_on_device(api, dev, b, 4) < 0) {
        return NULL;
    }
    void *params[] = {&ptrs[0], &h, &w, &d, &ptrs[1], &ptrs[2], &ptrs[3]};
    if (launch(api, dev, dev->extract, blocks((long long)h * w, 256), 1, 1,
               256, 1, 0, stream, params) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *
ap_gpu_depth_fold(PyObject *module, PyObject *args)
{
    (void)module;
    int ordinal;
    Py_ssize_t h_size, w_size, k, first, d;
    unsigned long long stream, ptrs[5];
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iKKnnnnnKKKK:gpu_depth_fold", &ordinal,
                          &stream, &ptrs[0], &h_size, &w_size, &k, &first,
                          &d, &ptrs[1], &ptrs[2], &ptrs[3], &ptrs[4]) ||
        image_size(h_size, w_size, 1, "chunk") < 0 ||
        ap_mvs_check_count(d, "depths", "entries") < 0) {
        return NULL;
    }
    if (first < 0 || k < 1 || k > d - first) {
        PyErr_Format(PyExc_ValueError, "planes %zd to %zd are not among "
                     "the %zd depths", first, first + k - 1, d);
        return NULL;
    }
    const buffer b[] = {{"chunk", ptrs[0], 4},
                        {"depths", ptrs[1], 8},
                        {"state", ptrs[2], 8},
                        {"depth", ptrs[3], 4},
                        {"confidence", ptrs[4], 4}};
    if (buffers_shaped(b, 5) < 0) {
        return NULL;
    }
    int h = (int)h_size, w = (int)w_size, planes = (int)k;
    int from = (int)first, all = (int)d;
    const ap_cuda_device *dev = device_or_raise(ordinal, &api);
    if (dev == NULL || buffers_on_device(api, dev, b, 5) < 0) {
        return NULL;
    }
    void *params[] = {&ptrs[0], &h, &w, &planes, &from, &all, &ptrs[1],
                      &ptrs[2], &ptrs[3], &ptrs[4]};
    if (launch(api, dev, dev->depth_fold, blocks((long long)h * w, 256), 1,
               1, 256, 1, 0, stream, params) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}
