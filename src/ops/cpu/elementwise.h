// Element-wise kernels over contiguous float arrays. All OpenMP-parallel for large n.
#pragma once
#include <cstdint>

namespace vitrt::cpu {

// out[i] = x[i] + y[i % ny] (ny divides n: y broadcast over leading dims). out may equal x.
void add_broadcast(const float* x, const float* y, float* out, int64_t n, int64_t ny);
// x[i] *= s
void scale(float* x, int64_t n, float s);
// x[i] = max(x[i], 0)  (NaN stays NaN, like torch.relu)
void relu(float* x, int64_t n);
// x[i] = 0.5 x (1 + erf(x / sqrt 2)), exact (erf) GELU, through oneDNN's eltwise_gelu_erf so it
// matches the GELU fused into linear layers.
void gelu(float* x, int64_t n);

}  // namespace vitrt::cpu
