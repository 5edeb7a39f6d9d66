/* What the files of aquaprof._mvs share. */
#ifndef AP_MVS_MODULE_H
#define AP_MVS_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* one NumPy C-API table for the module, imported by mvs_module.c */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL aquaprof_mvs_ARRAY_API
#ifndef AP_MVS_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "../cpu/sweep.h"
#include "../geometry/camera.h"

/* A C-contiguous, aligned NumPy array of type, ndim dims (and last
 * dimension `last` when last > 0). New reference, or NULL with ValueError
 * naming what. */
PyArrayObject *ap_mvs_array(PyObject *obj, int type, int ndim,
                            npy_intp last, const char *what);

/* ap_mvs_array of float32 images (H, W), or (N, H, W) for N views, of
 * at least 2 x 2 and at most AP_MAX_PIXELS pixels, N at most
 * AP_MAX_COUNT; ValueError naming what and the sizes otherwise. A NumPy
 * array is checked before it is converted, which could copy a huge
 * view. */
PyArrayObject *ap_mvs_images(PyObject *obj, int ndim, const char *what);

/* 0 when h x w pixels are at most AP_MAX_PIXELS (h, w >= 0); -1 with
 * ValueError naming what, the sizes and the limit. */
int ap_mvs_check_pixels(Py_ssize_t h, Py_ssize_t w, const char *what);

/* 0 when n (of `things`: "planes", "views") is at most AP_MAX_COUNT; -1
 * with ValueError naming what, n and the limit. */
int ap_mvs_check_count(Py_ssize_t n, const char *what, const char *things);

/* 0 when parity is an ap_parity that has the cost; -1 with ValueError
 * saying which is wrong. */
int ap_mvs_check_parity(int parity, int cost);

/* Fills cam from a float64 (AP_CAMERA_PARAMS,) array. 0, or -1 with
 * ValueError naming what (NULL: "not a valid camera: ...") and what is
 * wrong with it. */
int ap_mvs_camera(PyObject *obj, ap_camera *cam, const char *what);

/* ValueError for params that ap_camera_init refused with status. */
void ap_mvs_camera_error(const double *params, int status,
                         const char *what);

PyObject *ap_gpu_check(PyObject *module, PyObject *device);
PyObject *ap_gpu_warp(PyObject *module, PyObject *args);
PyObject *ap_gpu_cost_volume(PyObject *module, PyObject *args);
PyObject *ap_gpu_parity_scratch(PyObject *module, PyObject *args);
PyObject *ap_gpu_extract_depth(PyObject *module, PyObject *args);
PyObject *ap_gpu_depth_fold(PyObject *module, PyObject *args);

#define AP_GPU_METHODS                                                       \
    {"gpu_check", ap_gpu_check, METH_O,                                      \
     "gpu_check(device): None, or RuntimeError saying why the CUDA "         \
     "kernels cannot run there (device -1: on any device)."},                \
    {"gpu_warp", ap_gpu_warp, METH_VARARGS,                                  \
     "gpu_warp(device, stream, src, h, w, ref_params, src_params, depth, "   \
     "rays, out): device pointers as ints; rays: 6 h w doubles of "          \
     "scratch"},                                                             \
    {"gpu_cost_volume", ap_gpu_cost_volume, METH_VARARGS,                    \
     "gpu_cost_volume(device, stream, ref, srcs, n, h, w, ref_params, "      \
     "src_params, depths, d, first, count, cost, window, rays, out, "        \
     "parity=0, scratch=0, warped=0, room=0): parity 1 (AquaMVS) needs "     \
     "scratch where gpu_parity_scratch says so: min(n, GPU_VIEWS) 3 h w "     \
     "doubles; warped (textbook only): "                                     \
     "room min(n, GPU_VIEWS) h w floats, the sources warped room planes "    \
     "at a time before their costs"},                                        \
    {"gpu_parity_scratch", ap_gpu_parity_scratch, METH_VARARGS,              \
     "gpu_parity_scratch(device, cost, window): whether AquaMVS parity "     \
     "takes the three passes there, which need gpu_cost_volume's scratch "   \
     "(the strip kernel needs none)"},                                       \
    {"gpu_extract_depth", ap_gpu_extract_depth, METH_VARARGS,                \
     "gpu_extract_depth(device, stream, volume, h, w, d, depths, depth, "    \
     "confidence)"},                                                        \
    {"gpu_depth_fold", ap_gpu_depth_fold, METH_VARARGS,                      \
     "gpu_depth_fold(device, stream, chunk, h, w, k, first, d, depths, "     \
     "state, depth, confidence): planes [first, first + k) of d, chunk's "   \
     "float (h, w, k) costs, folded into state (4 h w doubles); the last "   \
     "chunk writes depth and confidence"},

#endif
