// Normalisations over the last (contiguous) dimension.
#pragma once
#include <cstdint>

namespace vitrt::cpu {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias for each of `rows` rows of C
// floats (biased variance, like torch.nn.LayerNorm and SAM's LayerNorm2d). Mean and variance
// are accumulated in double (two passes), so results match PyTorch to ~1e-6. y may equal x.
void layer_norm(const float* x, const float* weight, const float* bias, float* y, int64_t rows,
                int64_t C, float eps);

// In-place softmax of each of `rows` rows of n floats (max-subtracted, like torch.softmax).
void softmax_rows(float* x, int64_t rows, int64_t n);

}  // namespace vitrt::cpu
