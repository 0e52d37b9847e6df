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
// `rows` rows of `row_bytes` each, from src (row stride src_pitch bytes) to dst (dst_pitch), both
// on `dev`; on the GPU stream-ordered (asynchronous w.r.t. the host, like kernels).
void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes, size_t rows,
               Device dev);

}  // namespace vitrt::devmem
