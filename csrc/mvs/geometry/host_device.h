/* Functions written once for the CPU and the GPU: host and device under
 * nvcc, plain static inline under a C compiler. */
#ifndef AP_HOST_DEVICE_H
#define AP_HOST_DEVICE_H

#ifdef __CUDACC__
#define AP_HD __host__ __device__
#else
#define AP_HD
#endif

#endif
