/* NVTX ranges around stages, for a tool that injected itself (Nsight):
 * nothing in a build without NVTX's headers. Internal to csrc/gpu. */
#ifndef AP_GPU_NVTX_H
#define AP_GPU_NVTX_H

void ap_nvtx_push(const char *name);
void ap_nvtx_pop(void);

#endif
