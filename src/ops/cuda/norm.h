// Row-wise reductions on the GPU: LayerNorm and softmax over the last dimension, float32 or
// bfloat16 storage with fp32 math (LayerNorm's mean and variance accumulate in fp64, two passes,
// like the CPU kernel). One warp per row (several for short rows). Launched on cuda::current_stream().
#pragma once
#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias over rows of C elements;
// x has dtype xdt, weight and bias wdt, y ydt (each F32 or BF16, math in fp32/fp64 whatever the
// storage: e.g. a float32 residual stream in, its bfloat16 normalised copy out, in one pass).
// y may equal x when xdt == ydt. gelu: y = the erf GELU of that (LayerNorm2d + GELU in one pass;
// for a bf16 y with the erf of fast_erf.h, within 2e-6).
void layer_norm(DType xdt, const void* x, DType wdt, const void* weight, const void* bias, DType ydt, void* y,
                int64_t rows, int64_t C, float eps, bool gelu = false);
// All of x, weight, bias and y of dtype dt.
inline void layer_norm(DType dt, const void* x, const void* weight, const void* bias, void* y, int64_t rows,
                       int64_t C, float eps) {
  layer_norm(dt, x, dt, weight, bias, dt, y, rows, C, eps);
}
// In place: x[r, :] = exp(x[r, :] - max) / sum.
void softmax_lastdim(DType dt, void* x, int64_t rows, int64_t n);

}  // namespace vitrt::cuda
