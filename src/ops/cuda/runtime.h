// CUDA backend, first brick: device discovery and error translation. The kernels of the CUDA
// engine (issue 3) build on this; compiled whenever nvcc is present.
#pragma once
#include <string>

namespace vitrt::cuda {

// Number of usable CUDA devices (0 when there is no driver or no GPU; never throws).
int device_count();
// "NVIDIA H200, sm_90, 139 GiB" for device `index`; throws vitrt::Error on failure.
std::string device_description(int index);
// Adds two float vectors on the GPU (used by the gpu test to prove the toolchain end to end).
void vector_add(const float* a, const float* b, float* out, int n);

}  // namespace vitrt::cuda
