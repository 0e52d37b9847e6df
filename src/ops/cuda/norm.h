// Row-wise reductions on the GPU: LayerNorm and softmax over the last dimension, float32 or
// bfloat16 storage with fp32 math (LayerNorm's mean and variance accumulate in fp64, two passes,
// like the CPU kernel). One warp per row. Launched on cuda::current_stream().
#pragma once
#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias over rows of C elements;
// x, weight, bias and y share dtype dt. y may equal x.
void layer_norm(DType dt, const void* x, const void* weight, const void* bias, void* y, int64_t rows, int64_t C,
                float eps);
// In place: x[r, :] = exp(x[r, :] - max) / sum.
void softmax_lastdim(DType dt, void* x, int64_t rows, int64_t n);

}  // namespace vitrt::cuda
