#include "gpu_nvtx.h"

#ifdef AP_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

void
ap_nvtx_push(const char *name)
{
    nvtxRangePushA(name);
}

void
ap_nvtx_pop(void)
{
    nvtxRangePop();
}

#else

void
ap_nvtx_push(const char *name)
{
    (void)name;
}

void
ap_nvtx_pop(void)
{
}

#endif
