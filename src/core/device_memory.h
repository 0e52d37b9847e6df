// Device memory as seen by the core: allocation and copies for tensors whose device is CUDA.
// Implemented by the CUDA backend (src/ops/cuda/runtime.cu) when built; otherwise every call
// throws a clear error, so a CPU-only build still links and says what is missing.
#pragma once
#include <cstddef>
#include <memory>

#include "vitrt/tensor.h"

namespace vitrt::devmem {

bool cuda_available();  // built with CUDA and a device present
// Stream-ordered allocation on the current CUDA stream; freed when the last owner goes.
std::shared_ptr<void> cuda_alloc(size_t bytes);
// Copies between host and device (or device and device); synchronous w.r.t. the host.
void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void memset_zero(void* dst, Device dev, size_t bytes);

}  // namespace vitrt::devmem
