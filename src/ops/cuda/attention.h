// CUDA attention: fused flash attention (online softmax, the score matrix never leaves the chip)
// with SAM's decomposed relative-position bias, for BF16 (tensor cores, mma.sync m16n8k16,
// sm_80 and sm_90; on sm_90 wgmma kernels for SAM's global blocks and 14 x 14 windows:
// attention_wgmma.cu, attention_wgmma_windowed.cu) and F32 (CUDA cores, for the fp32 fidelity mode).
//
// Two layers:
//  - vitrt::cuda::attention_launch: raw pointers and strides (AttentionArgs), one launch on a stream.
//  - vitrt::ops::cuda_impl: Tensor-level operators with exactly the semantics of ops.h
//    (attention_relpos, attention_relpos_windowed, attention) for CUDA tensors of dtype BF16 or F32.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "vitrt/tensor.h"

namespace vitrt::cuda {

// One attention problem: num_seq independent sequences x heads. For sequence s, token t, the
// q row is q + row(s, t) * ldq + head * head_dim (k, v and out likewise with their strides):
//  - dense (window == 0): row = s * nq + t for q and out, s * nk + t for k and v (q: (s / q_share)
//    * nq + t, see q_share);
//  - windowed (window > 0): the sequences are the windows (b, wy, wx) of a [B, grid_H, grid_W]
//    token grid zero-padded up to multiples of `window` (b major, then window row, then column;
//    num_seq = B * ceil(grid_H / window) * ceil(grid_W / window)), nq = nk = window^2, token
//    t = (ty, tx) is grid cell (wy*window + ty, wx*window + tx) with row (b*grid_H + y)*grid_W + x;
//    cells in the padding read pad_q / pad_k / pad_v (+ head offset) instead, and their output
//    is not written.
// Scores: scale * q.k (+ rel_h[i, key_row] + rel_w[i, key_col] when rel_h is given, with
// rel_h[i, kh] = q_i . rel_h_table[ih - kh + rel_H - 1], rel_w likewise; nq = nk = rel_H*rel_W).
struct AttentionArgs {
  bool bf16 = false;  // element type of q, k, v, pad_*, out: BF16, else F32
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* pad_q = nullptr;  // windowed only: rows for padding tokens ([head*head_dim] offsets)
  const void* pad_k = nullptr;
  const void* pad_v = nullptr;
  void* out = nullptr;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;  // row strides, in elements
  int heads = 1, head_dim = 0;
  int64_t nq = 0, nk = 0, num_seq = 0;
  // Dense only: consecutive sequences that read the same q rows (sequence s reads q sequence
  // s / q_share; q holds num_seq / q_share sequences, the output num_seq). 1: one q per sequence.
  int64_t q_share = 1;
  float scale = 1.f;
  // Relative-position tables, rows exactly 2*rel_H-1 and 2*rel_W-1, contiguous [rows, head_dim].
  // Tensor-core path (attention_uses_tensor_cores): BF16, with optional BF16 residuals *_lo
  // (table = hi + lo, for tables that were F32); CUDA-core path: F32, *_lo unused.
  bool rel_bf16 = false;  // dtype of the tables below (checked against the kernel choice)
  const void* rel_h = nullptr;
  const void* rel_w = nullptr;
  const void* rel_h_lo = nullptr;
  const void* rel_w_lo = nullptr;
  int64_t rel_H = 0, rel_W = 0;
  int64_t window = 0, grid_H = 0, grid_W = 0;
};

// Whether attention_launch runs `a` on the tensor-core (BF16 mma) kernel: BF16 data, head_dim in
// {64, 80, 128} (or {16, 32} without rel-pos), 16-byte aligned rows. The rel tables' dtype follows.
bool attention_uses_tensor_cores(const AttentionArgs& a);
// Validates the arguments (throws InvalidArgument) and launches on `stream` (async).
void attention_launch(const AttentionArgs& a, cudaStream_t stream);

// One input of an attention launch converted on the device: a rel-pos table for a grid side of
// `want` = 2*size-1 rows from a table of `rows` rows (F.interpolate(mode="linear",
// align_corners=False) when they differ, as ops::attention_relpos), or (rows = want = 1, hd = n)
// a plain conversion of n values. src [rows, hd] F32 or BF16 -> exactly one of: out_f32
// [want, hd], or out_hi (+ out_lo, may be null) BF16 [want, hd] with out_hi + out_lo ~= the F32
// value.
struct PrepJob {
  const void* src = nullptr;
  bool src_bf16 = false;
  int rows = 0, want = 0, hd = 0;
  float* out_f32 = nullptr;
  void* out_hi = nullptr;
  void* out_lo = nullptr;
};
constexpr int kMaxPrepJobs = 3;
// Up to kMaxPrepJobs jobs in one launch (an attention layer's two tables and its padding vector:
// one small kernel per layer, not three).
void prepare_inputs(const PrepJob* jobs, int n, cudaStream_t stream);

}  // namespace vitrt::cuda

namespace vitrt::ops::cuda_impl {

// ops::attention_relpos for CUDA tensors (qkv BF16 or F32; rel tables F32 or BF16, any length:
// interpolated like get_rel_pos when not 2H-1 / 2W-1 rows). Output has qkv's dtype.
Tensor attention_relpos(const Tensor& qkv, int num_heads, int64_t H, int64_t W, const Tensor* rel_pos_h,
                        const Tensor* rel_pos_w);

// ops::attention_relpos_windowed for CUDA tensors: qkv_grid [B, Hg, Wg, 3C], qkv_bias [3C]
// (any float dtype; converted to qkv's) -> [B, Hg, Wg, C].
Tensor attention_relpos_windowed(const Tensor& qkv_grid, const Tensor& qkv_bias, int num_heads, int window,
                                 const Tensor* rel_pos_h, const Tensor* rel_pos_w);

// ops::attention for CUDA tensors: q [B, Nq, D], k, v [B, Nk, D] -> [B, Nq, D].
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads);
// ops::attention_packed_kv for CUDA tensors: kv [B, Nk, 2D] read in place (row stride 2D).
Tensor attention_packed_kv(const Tensor& q, const Tensor& kv, int num_heads);

}  // namespace vitrt::ops::cuda_impl
