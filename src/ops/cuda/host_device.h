// VITRT_HOST_DEVICE: __host__ __device__ under nvcc, nothing elsewhere, for the small numeric helpers
// (fast_erf.h) that the kernels use and the CPU unit tests check.
#pragma once

#if defined(__CUDACC__)
#define VITRT_HOST_DEVICE __host__ __device__
#else
#define VITRT_HOST_DEVICE
#endif
