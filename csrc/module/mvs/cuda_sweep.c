/* CUDA entry points of aquaprof._mvs. aquaprof/mvs/_gpu.py checks the GPU
 * arrays, allocates outputs and scratch with the caller's own library
 * (torch, CuPy) and passes raw device pointers; these launch the kernels
 * on the caller's stream and return at once: nothing here synchronises
 * the device, so errors inside a kernel surface at the caller's next
 * synchronisation, as with any CUDA library. */
#include <pthread.h>
#include <stdint.h>

#include "mvs_module.h"

#include "../../kernels/cuda_sweep.h"
#include "cuda_driver.h"

#define BLOCK_X 32
#define BLOCK_Y 8
#define MAX_GRID_Z 65535
#define DEFAULT_SHARED (48 * 1024)

_Static_assert(sizeof(ap_cuda_sweep) <= 4096,
               "the cost kernel's parameters exceed 4 KiB");

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
blocks(int n, int per)
{
    return (unsigned)((n + per - 1) / per);
}

static int
launch_rays(const ap_cuda_api *api, const ap_cuda_device *d,
            unsigned long long stream, ap_camera *ref, int h, int w,
            ap_devptr rays)
{
    void *params[] = {ref, &h, &w, &rays};
    return launch(api, d, d->rays, blocks(w, BLOCK_X), blocks(h, BLOCK_Y), 1,
                  BLOCK_X, BLOCK_Y, 0, stream, params);
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
    int ordinal, h, w;
    unsigned long long stream, src, rays, out;
    PyObject *ref_params, *src_params;
    double depth;
    ap_camera ref, cam;
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iKKiiOOdKK:gpu_warp", &ordinal, &stream,
                          &src, &h, &w, &ref_params, &src_params, &depth,
                          &rays, &out) ||
        ap_mvs_camera(ref_params, &ref, "ref_cam") < 0 ||
        ap_mvs_camera(src_params, &cam, "src_cam") < 0) {
        return NULL;
    }
    if (h < 2 || w < 2 || (long long)h * w > AP_MAX_PIXELS || !src ||
        !rays || !out) {
        PyErr_SetString(PyExc_ValueError, "bad image size or null pointer");
        return NULL;
    }
    const ap_cuda_device *d = device_or_raise(ordinal, &api);
    if (d == NULL || launch_rays(api, d, stream, &ref, h, w, rays) < 0) {
        return NULL;
    }
    void *params[] = {&rays, &h, &w, &cam, &depth, &src, &out};
    if (launch(api, d, d->warp, blocks(w, BLOCK_X), blocks(h, BLOCK_Y), 1,
               BLOCK_X, BLOCK_Y, 0, stream, params) < 0) {
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
        if (ap_camera_init(&p->cams[v], row) < 0) {
            PyErr_Format(PyExc_ValueError, "src_cams[%d] is not a valid "
                         "camera", first + v);
            return -1;
        }
    }
    return 0;
}

PyObject *
ap_gpu_cost_volume(PyObject *module, PyObject *args)
{
    (void)module;
    int ordinal, n, h, w, d, first, count, cost, window;
    unsigned long long stream, ref, srcs, depths, rays, out;
    PyObject *ref_params, *src_params;
    ap_camera ref_cam;
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iKKKiiiOOKiiiiiKK:gpu_cost_volume",
                          &ordinal, &stream, &ref, &srcs, &n, &h, &w,
                          &ref_params, &src_params, &depths, &d, &first,
                          &count, &cost, &window, &rays, &out) ||
        ap_mvs_camera(ref_params, &ref_cam, "ref_cam") < 0) {
        return NULL;
    }
    if (cost < AP_COST_NCC || cost > AP_COST_SAD || window < 3 ||
        window % 2 == 0 || window > AP_MAX_WINDOW || h < 2 || w < 2 ||
        (long long)h * w > AP_MAX_PIXELS || n < 1 || d < 1 || first < 0 ||
        count < 1 || count > d - first ||
        !ref || !srcs || !depths || !rays || !out) {
        PyErr_SetString(PyExc_ValueError, "bad sizes, planes, cost, window "
                        "or null pointer");
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
        PyErr_SetString(PyExc_ValueError, "src_cams must hold n cameras");
        goto done;
    }
    dev = device_or_raise(ordinal, &api);
    if (dev == NULL ||
        launch_rays(api, dev, stream, &ref_cam, h, w, rays) < 0) {
        goto done;
    }
    *p = (ap_cuda_sweep){.ref = ref, .rays = rays, .depths = depths,
                         .out = out, .h = h, .w = w, .d = d, .cost = cost,
                         .radius = window / 2};
    ap_gauss_weights(p->radius, p->gauss);
    unsigned shared = ap_cuda_sweep_shared(p->radius);
    void *params[] = {p};
    /* views in groups that fit the parameters; planes in grid slices */
    for (int v = 0; v < n; v += AP_GPU_VIEWS) {
        p->views = n - v < AP_GPU_VIEWS ? n - v : AP_GPU_VIEWS;
        p->srcs = srcs + (ap_devptr)v * h * w * sizeof(float);
        p->add = v > 0;
        p->scale = v + p->views == n ? (float)(1.0 / n) : 1.0f;
        if (sweep_cameras(p, cams, v, p->views) < 0) {
            goto done;
        }
        for (int z = 0; z < count; z += MAX_GRID_Z) {
            int slice = count - z < MAX_GRID_Z ? count - z : MAX_GRID_Z;
            p->first = first + z;
            if (launch(api, dev, dev->cost, blocks(w, AP_GPU_TILE_X),
                       blocks(h, AP_GPU_TILE_Y), (unsigned)slice,
                       AP_GPU_TILE_X, AP_GPU_TILE_Y, shared, stream,
                       params) < 0) {
                goto done;
            }
        }
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
    int ordinal, h, w, d;
    unsigned long long stream, volume, depths, depth, confidence;
    const ap_cuda_api *api;
    if (!PyArg_ParseTuple(args, "iKKiiiKKK:gpu_extract_depth", &ordinal,
                          &stream, &volume, &h, &w, &d, &depths, &depth,
                          &confidence)) {
        return NULL;
    }
    if (h < 1 || w < 1 || d < 1 || !volume || !depths || !depth ||
        !confidence) {
        PyErr_SetString(PyExc_ValueError, "bad sizes or null pointer");
        return NULL;
    }
    const ap_cuda_device *dev = device_or_raise(ordinal, &api);
    if (dev == NULL) {
        return NULL;
    }
    void *params[] = {&volume, &h, &w, &d, &depths, &depth, &confidence};
    if (launch(api, dev, dev->extract, blocks(h * w, 256), 1, 1, 256, 1, 0,
               stream, params) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}
