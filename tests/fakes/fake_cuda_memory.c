/* The fake driver's memory calls (see fake_cuda.c for the rest), and the
 * module and launch calls the plane sweep makes around them, so that its
 * pointer checks can be tested where there is no GPU.
 *
 * Allocations are address ranges only: nothing ever reads or writes
 * them, so no host memory backs them. cuPointerGetAttribute answers for
 * them alone, with the codes the real driver documents. Launches are
 * counted and named, not run; their grids are kept, and the plane sweep's
 * strip kernels' parameters read. */
#include <stddef.h>
#include <string.h>

#include "../../csrc/mvs/cuda/cuda_sweep.h"

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define MEMORY_TYPE 2           /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
#define RANGE_START_ADDR 11     /* CU_POINTER_ATTRIBUTE_RANGE_START_ADDR */
#define RANGE_SIZE 12           /* CU_POINTER_ATTRIBUTE_RANGE_SIZE */
#define MAX_ALLOCATIONS 256
/* where the fake address space starts; allocations are 256-aligned, as
 * cuMemAlloc's are */
#define FIRST_ADDRESS 0x7f0000000000ULL

typedef struct {
    unsigned long long start, size;
    unsigned type;
} allocation;

static allocation allocations[MAX_ALLOCATIONS];
static int allocated;
static unsigned long long next_address = FIRST_ADDRESS;
static int launches;
/* the kernels launched, by name (cuModuleGetFunction's handle is the
 * name), the first MAX_NAMED of them */
#define MAX_NAMED 4096
static const char *launched[MAX_NAMED];
/* and their grids, and for the strip kernels the first plane, the
 * planes and the order of the blocks their parameters give (-1 for the
 * others) */
static unsigned grids[MAX_NAMED][3];
static int strip_params[MAX_NAMED][3];
static int module;              /* its address is the module's handle */

/* A range of `bytes` that the driver reports as memory of `type` (a
 * CUmemorytype: 1 host, 2 device, 4 unified); 0 when the table is full.
 * A 256-byte gap follows it, so that no two ranges touch. */
unsigned long long fake_cuda_alloc(unsigned long long bytes, unsigned type)
{
    if (allocated == MAX_ALLOCATIONS) {
        return 0;
    }
    allocation *a = &allocations[allocated++];
    a->start = next_address;
    a->size = bytes;
    a->type = type;
    next_address += (bytes + 511) / 256 * 256;
    return a->start;
}

int fake_cuda_launches(void) { return launches; }

/* The name of launch k (from 0), or "" past those kept. */
const char *fake_cuda_launched(int k)
{
    return k >= 0 && k < launches && k < MAX_NAMED ? launched[k] : "";
}

/* Launch k's grid into grid[3] and, for a strip kernel, its first
 * plane, its planes and whether its blocks run a plane at a time into
 * at[3] (-1 for other kernels); 0, or -1 past those kept. */
int fake_cuda_launch_grid(int k, unsigned *grid, int *at)
{
    if (k < 0 || k >= launches || k >= MAX_NAMED) {
        return -1;
    }
    memcpy(grid, grids[k], sizeof(grids[k]));
    memcpy(at, strip_params[k], sizeof(strip_params[k]));
    return 0;
}

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr)
{
    for (int i = 0; i < allocated; i++) {
        const allocation *a = &allocations[i];
        if (ptr < a->start || ptr - a->start >= a->size) {
            continue;
        }
        switch (attribute) {
        case MEMORY_TYPE:
            memcpy(data, &a->type, sizeof(a->type));
            return CUDA_SUCCESS;
        case RANGE_START_ADDR:
            memcpy(data, &a->start, sizeof(a->start));
            return CUDA_SUCCESS;
        case RANGE_SIZE: {
            size_t size = (size_t)a->size;
            memcpy(data, &size, sizeof(size));
            return CUDA_SUCCESS;
        }
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;    /* a pointer the driver never gave */
}

int cuGetErrorString(int error, const char **text)
{
    *text = error == CUDA_ERROR_INVALID_VALUE ? "invalid argument"
                                              : "unknown error";
    return CUDA_SUCCESS;
}

int cuModuleLoadData(void **mod, const void *image)
{
    (void)image;
    *mod = &module;
    return CUDA_SUCCESS;
}

int cuModuleUnload(void *mod)
{
    (void)mod;
    return CUDA_SUCCESS;
}

int cuModuleGetFunction(void **f, void *mod, const char *name)
{
    (void)mod;
    *f = (void *)name;
    return CUDA_SUCCESS;
}

int cuFuncSetAttribute(void *f, int attribute, int value)
{
    (void)f;
    (void)attribute;
    (void)value;
    return CUDA_SUCCESS;
}

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   void *stream, void **params, void **extra)
{
    (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)extra;
    if (launches < MAX_NAMED) {
        const char *name = f;
        launched[launches] = name;
        grids[launches][0] = gx;
        grids[launches][1] = gy;
        grids[launches][2] = gz;
        int *at = strip_params[launches];
        at[0] = at[1] = at[2] = -1;
        if (strncmp(name, "ap_strip_", 9) == 0 ||
            strncmp(name, "ap_parity_strip_", 16) == 0) {
            const ap_cuda_strip *p = params[0];
            at[0] = p->first;
            at[1] = p->planes;
            at[2] = p->tiles_first;
        }
    }
    launches++;
    return CUDA_SUCCESS;
}
