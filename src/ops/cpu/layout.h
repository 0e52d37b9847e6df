// Data-movement kernels: window partition/unpartition, permutation, concatenation.
#pragma once
#include <cstdint>
#include <vector>

namespace vitrt::cpu {

// x [B, H, W, C] -> out [B * nh * nw, ws, ws, C], nh = ceil(H / ws), nw = ceil(W / ws); windows
// ordered (b, window row, window column); the bottom/right padding is zeros (as SAM's F.pad).
void window_partition(const float* x, float* out, int64_t B, int64_t H, int64_t W, int64_t C, int64_t ws);
// Inverse of window_partition: windows [B * nh * nw, ws, ws, C] -> out [B, H, W, C], padding dropped.
void window_unpartition(const float* windows, float* out, int64_t B, int64_t H, int64_t W, int64_t C,
                        int64_t ws);

// out = x.permute(perm).contiguous() for x of the given shape (perm is a permutation of dims).
void permute(const float* x, float* out, const std::vector<int64_t>& shape, const std::vector<int>& perm);

// Concatenate along a dimension: each input i is [outer, sizes[i] * inner] viewed as rows;
// out is [outer, sum(sizes) * inner].
void cat(const std::vector<const float*>& xs, const std::vector<int64_t>& sizes, float* out, int64_t outer,
         int64_t inner);

}  // namespace vitrt::cpu
