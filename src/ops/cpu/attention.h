// Fused multi-head attention kernels. Scores are built one block of query rows at a time in a
// per-thread scratch buffer, so the full [heads, N, N] score tensor is never materialised
// (for SAM's 64x64 global attention that would be 12 x 4096 x 4096 floats = 800 MB).
#pragma once
#include <cstdint>

namespace vitrt::cpu {

// SAM image-encoder attention. qkv [B, H*W, 3*C] with the last dim laid out (3, heads, head_dim);
// out [B, H*W, C], head h in columns [h*head_dim, (h+1)*head_dim).
// out = softmax((q * scale) k^T + rel_h + rel_w) v with scale = head_dim^-0.5 and, for query
// (ih, iw) and key (kh, kw), rel_h = q . rel_pos_h[ih - kh + H - 1] (unscaled q) and
// rel_w = q . rel_pos_w[iw - kw + W - 1]. rel_pos_h [2H-1, head_dim] and rel_pos_w
// [2W-1, head_dim] are both given or both null (no relative-position bias).
void attention_relpos(const float* qkv, float* out, int64_t B, int64_t H, int64_t W, int64_t heads,
                      int64_t head_dim, const float* rel_pos_h, const float* rel_pos_w);

// Plain multi-head attention: q [B, Nq, D], k and v [B, Nk, D], D = heads * head_dim, head h in
// columns [h*head_dim, (h+1)*head_dim); out [B, Nq, D] = softmax(q k^T / sqrt(head_dim)) v per head.
void attention(const float* q, const float* k, const float* v, float* out, int64_t B, int64_t Nq,
               int64_t Nk, int64_t D, int64_t heads);

// Query rows per task, exposed for benchmarks/tests (0 = automatic choice).
void set_attention_row_block(int64_t rows);

}  // namespace vitrt::cpu
