// Tensor-level operators used by the model code. Each checks shapes (InvalidArgument on mismatch),
// allocates its output and dispatches on the tensor's device to a kernel in ops/cpu (or, later,
// ops/cuda). The model code calls only these; the kernels know nothing of models.
//
// Conventions: float32, contiguous, row-major. Images and feature maps are NHWC (channels last),
// as the SAM image encoder keeps them; PyTorch weight layouts are taken as they are stored.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "vitrt/tensor.h"

namespace vitrt::ops {

enum class Activation { None, GELU /* exact erf */, ReLU };

// y[..., N] = act(x[..., K] @ w[N, K]^T + bias[N]) + residual[..., N]
// (PyTorch nn.Linear weight layout; bias and residual may be null; the activation is applied
// before the residual is added).
// out_dtype: y's dtype, by default x's. CPU: float32 only. CUDA: x's dtype, or float32 for a
// bfloat16 x (w bf16; bf16 products accumulated in fp32 and never rounded to bf16 -- a float32
// residual stream fed by bf16 activations); then residual must be float32 and bias may be
// bfloat16 (widened to fp32, exactly) or float32.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias = nullptr,
              Activation act = Activation::None, const Tensor* residual = nullptr,
              std::optional<DType> out_dtype = std::nullopt);

// y[b, t, :] = x[b, t, :] @ w[N, K]^T + c[t, :]: x [B, T, K], c [T, N] of y's dtype (x's), added
// to every one of the B products by the GEMM itself (no [B, T, N] broadcast pass). For a
// projection of (x + e) with e shared by the batch: linear(x + e, w, b) = linear_broadcast_add(x, w,
// linear(e, w, b)), without ever forming x + e.
Tensor linear_broadcast_add(const Tensor& x, const Tensor& w, const Tensor& c);

// y += x[..., K] @ w[N, K]^T + bias[N], in place: the residual add of a block without a second
// residual-sized buffer. y may be a view (e.g. slice0 of a token range). y's dtype as linear's
// out_dtype (CUDA: x's, or float32 for a bfloat16 x; CPU: float32).
void linear_add_(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias = nullptr);

// Batched c[b] = a[b] @ b[b]: a [B, M, K], b [B, K, N] -> [B, M, N]. 2-D inputs are batch 1.
// If transpose_b, b is [B, N, K].
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_b = false);
// The problem matmul(a, b, transpose_b) describes: a [batch, M, K] (or [M, K]) times b [K, N] (b^T:
// [N, K]), b 2-D or batched like a; out is [batch, M, N] (or [M, N]). Throws InvalidArgument for
// ranks or sizes that do not match. Shared by the CPU and CUDA implementations.
struct MatmulShape {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  Shape out;
};
MatmulShape matmul_shape(const Tensor& a, const Tensor& b, bool transpose_b);

// The shape rules of the layout ops below, shared by the CPU and CUDA implementations (each
// checks its own devices and dtypes first): the output shape, or InvalidArgument.
Shape permute_shape(const Tensor& x, const std::vector<int>& perm);
// cat: the dimension (dim made non-negative), the products of the output's sizes before and after
// it, and the output shape.
struct CatShape {
  int64_t dim = 0, outer = 1, inner = 1;
  Shape out;
};
CatShape cat_shape(const std::vector<Tensor>& xs, int dim);
Shape window_partition_shape(const Tensor& x, int ws);
Shape window_unpartition_shape(const Tensor& windows, int ws, int64_t H, int64_t W);
Shape interpolate_linear_rows_shape(const Tensor& x, int64_t new_len);
Shape resize_bilinear_shape(const Tensor& x, int64_t out_h, int64_t out_w);
// conv2d_nhwc's problem: x [B, H, W, Cin], weight [Cout, Cin, kh, kw], out [B, Ho, Wo, Cout].
struct Conv2dShape {
  int64_t B = 0, H = 0, W = 0, Cin = 0, Cout = 0, kh = 0, kw = 0, Ho = 0, Wo = 0;
};
Conv2dShape conv2d_shape(const Tensor& x, const Tensor& w, int stride, int pad);

// LayerNorm over the last dimension with affine weight/bias [C].
// out_dtype: the output's dtype, by default x's. CPU: float32 only. CUDA: x, weight/bias (one
// dtype for both) and the output each float32 or bfloat16, math in fp32 (e.g. float32 residual
// stream in, bfloat16 out: the fused LayerNorm + cast of the bf16 encoder). act: GELU applies the
// erf GELU to the result (SAM's LayerNorm2d + GELU; one pass on the GPU); ReLU is not offered.
// CUDA kernels that store a GELU in bf16 use a branch-free erf within 5e-7 (ops/cuda/fast_erf.h).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                  std::optional<DType> out_dtype = std::nullopt, Activation act = Activation::None);

// x converted to `to` (F32 <-> BF16) on its device; x itself when it already has that dtype.
Tensor cast(const Tensor& x, DType to);

// ||got - ref||_F / ||ref||_F in double precision (||got - ref||_F when ref is all zeros), for any
// floating dtypes and devices (compared on the host in fp32); the element counts must match.
// Fidelity reports, tests and benchmarks share it.
double relative_error(const Tensor& got, const Tensor& ref);

// Element-wise, in place. add_: y is broadcast over x's leading dims (y's shape must equal a
// suffix of x's shape, or y.numel() == x.numel()).
void add_(Tensor& x, const Tensor& y);
Tensor add(const Tensor& x, const Tensor& y);
void scale_(Tensor& x, float s);
void gelu_(Tensor& x);  // 0.5 x (1 + erf(x / sqrt 2)); CUDA bf16: the erf of ops/cuda/fast_erf.h
void relu_(Tensor& x);
void softmax_lastdim_(Tensor& x);

// Copying permutation of dimensions (like torch.permute(...).contiguous()).
Tensor permute(const Tensor& x, const std::vector<int>& perm);
// Concatenate along dimension `dim` (all other dims equal).
Tensor cat(const std::vector<Tensor>& xs, int dim);

// 2-D convolution, NHWC in and out: x [B, H, W, Cin], w [Cout, Cin, kh, kw] (PyTorch layout),
// bias [Cout] or null, zero padding `pad` on every side. out_dtype as for linear (x's dtype, or
// float32 for a bfloat16 x on CUDA, bias then bf16 or f32).
Tensor conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, int stride, int pad,
                   std::optional<DType> out_dtype = std::nullopt);
// ConvTranspose2d with kernel 2, stride 2, NHWC: x [B, H, W, Cin], w [Cin, Cout, 2, 2]
// (PyTorch layout), bias [Cout] -> [B, 2H, 2W, Cout]; then `act` (None or GELU), fused on the GPU.
Tensor conv_transpose2x2_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act = Activation::None);
// matmul(vecs, conv_transpose2x2_nhwc(x, w, bias, act).reshape({B, 4HW, Cout}), transpose_b = true):
// x [B, H, W, Cin], vecs [B, V, Cout] -> [B, V, 4HW], each output pixel's channels dotted with each of
// its image's V vectors (SAM's masks = hyper_in @ upscaled). On the GPU in bf16 for SAM's shape
// (Cin 64, Cout 32, V 4, W a multiple of 64) one kernel, without writing the upscaled tensor;
// otherwise the two operators.
Tensor conv_transpose2x2_dot(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, const Tensor& vecs);

// SAM window partition: x [B, H, W, C] zero-padded at bottom/right to multiples of ws, cut into
// [B * nh * nw, ws, ws, C] (window order: b, then row of windows, then column).
Tensor window_partition(const Tensor& x, int ws);
// Inverse: windows [B * nh * nw, ws, ws, C] -> [B, H, W, C], dropping the padding.
Tensor window_unpartition(const Tensor& windows, int ws, int64_t H, int64_t W);

// Multi-head self-attention over an H x W grid with SAM's decomposed relative-position bias:
// qkv [B, H*W, 3*C] laid out as (3, heads, head_dim) along the last dim (the output of the
// qkv linear); returns [B, H*W, C] with heads concatenated (head-major), i.e. the input of proj.
// attn = softmax((q * scale) k^T + rel_h + rel_w), scale = head_dim^-0.5, where
// rel_h[i, j] = q_i . rel_pos_h[(ih - jh) + H - 1] and rel_w likewise with rel_pos_w / W
// (rel_pos_h [2H-1, head_dim], rel_pos_w [2W-1, head_dim]; both null = no bias).
Tensor attention_relpos(const Tensor& qkv, int num_heads, int64_t H, int64_t W,
                        const Tensor* rel_pos_h, const Tensor* rel_pos_w);

// Windowed self-attention with the window partition in the addressing: qkv_grid [B, H, W, 3C] is
// the qkv linear applied to the UNPADDED grid tokens; the grid is padded to multiples of `window`
// and every padding token gets q = k = v = qkv_bias [3C] (what the reference gets by applying the
// qkv linear to zero-padded tokens). Each window attends as attention_relpos with H = W = window;
// returns [B, H, W, C] for the real tokens only. Saves all GEMM work on the padding.
Tensor attention_relpos_windowed(const Tensor& qkv_grid, const Tensor& qkv_bias, int num_heads, int window,
                                 const Tensor* rel_pos_h, const Tensor* rel_pos_w);

// Plain multi-head attention: q [B, Nq, D], k [B, Nk, D], v [B, Nk, D] (already projected);
// heads split D into num_heads chunks; softmax(q k^T / sqrt(D/heads)) v -> [B, Nq, D]. q may also
// be [1, Nq, D]: one query sequence against each of the B key sequences (no copies of it).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads);
// ops::attention's shape rules (both devices): throws InvalidArgument when q, k, v and the head
// count do not fit together.
void check_attention_shapes(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads);
// The same with k and v in one tensor, kv [B, Nk, 2D] = [k | v] along the last dim (the output of one
// projection GEMM with the two weights stacked), read in place on the GPU.
Tensor attention_packed_kv(const Tensor& q, const Tensor& kv, int num_heads);
// Self-attention with q, k and v in one tensor, qkv [B, N, 3D] = [q | k | v] along the last dim
// (one projection GEMM with the three weights stacked, e.g. nn.MultiheadAttention's in_proj),
// read in place on both devices: attention(q, k, v, num_heads) of the three column ranges
// (scale head_dim^-0.5 in double, as attention_relpos; the same float for every power-of-4 head dim).
Tensor attention_packed_qkv(const Tensor& qkv, int num_heads);

// F.interpolate(mode="linear", align_corners=False) along the first dim of x [L, C] -> [new_len, C].
Tensor interpolate_linear_rows(const Tensor& x, int64_t new_len);
// F.interpolate(mode="bilinear", align_corners=False, antialias=False) on planes x [N, H, W]
// -> [N, out_h, out_w]; each plane independently.
Tensor resize_bilinear(const Tensor& x, int64_t out_h, int64_t out_w);

}  // namespace vitrt::ops

// ---- Block-sparse linear (ops_bsr.cpp) ----
#include "vitrt/bsr.h"

namespace vitrt::ops {

// y[..., N] = act(x[..., K] @ W^T + bias[N]) + residual[..., N] with W an [N, K] block-sparse
// matrix in BSR (vitrt/bsr.h). CPU: x float32, values F32 or BF16, computed in fp32, W checked with
// validate(). CUDA x (float32 or bfloat16): W must carry device copies in x's dtype
// (bsr_to_cuda(w, x.dtype()), validated there), bias and residual CUDA tensors of x's dtype, act
// None or GELU; bf16 runs on tensor cores with fp32 accumulation, fp32 in exact fp32 FMA.
Tensor linear_bsr(const Tensor& x, const BsrMatrix& w, const Tensor* bias = nullptr,
                  Activation act = Activation::None, const Tensor* residual = nullptr);

}  // namespace vitrt::ops

// ---- Block-sparse MLP (ops_bsr_mlp.cpp) ----
namespace vitrt::ops {

// The fused kernel's schedule for one block-sparse MLP pair (bsr_mlp_schedule.h), on the device.
struct BsrMlpPlan {
  Tensor words, group_begin;  // I32, CUDA
  int groups = 0;
  uint32_t k_mask = 0;
  int64_t words_count = 0;
  std::vector<int32_t> group_begin_host;  // the same on the host
};
// A plan when the fused CUDA kernel covers the pair fc1, fc2 (both uploaded with bsr_to_cuda as
// `dtype`): bf16, 64-blocks, fc1.cols <= 1024 (768 in the resident form), an sm_90 device; null
// otherwise (mlp_bsr then runs the two linears). Made once per model, at upload.
std::shared_ptr<const BsrMlpPlan> plan_bsr_mlp(const BsrMatrix& fc1, const BsrMatrix& fc2, DType dtype);
// fc2(GELU(fc1(x) + b1)) + b2 + residual (a transformer MLP with its residual), fc1 and fc2 BSR.
// With a plan on CUDA: one fused kernel (the hidden activation stays on chip) where it was measured
// faster (D <= 384, or D <= 768 and both weights at most 12.5% dense) and the tokens give every SM a
// unit of work (VITRT_BSR_MLP_FUSED=1 wherever planned, =0 never); otherwise two ops::linear_bsr
// calls. Arguments as linear_bsr's.
Tensor mlp_bsr(const Tensor& x, const BsrMatrix& fc1, const Tensor& b1, const BsrMatrix& fc2, const Tensor& b2,
               const Tensor& residual, const BsrMlpPlan* plan = nullptr);
// Whether mlp_bsr takes the fused kernel for `tokens` rows of x on CUDA with this plan (what
// benchmarks report next to their timings).
bool mlp_bsr_fused_for(const BsrMatrix& fc1, const BsrMatrix& fc2, int64_t tokens, const BsrMlpPlan* plan);

// The same MLP, fc2(GELU(fc1 x + b1)) + b2, without the work whose result does not depend on x
// (bsr_mlp_simplify.cpp; host, once per model, before upload):
//  - fc1's block-rows that no stored block of fc2 reads lose their blocks (their hidden values are
//    never used: the fused kernel already skips them, the two linears computed them);
//  - fc2's blocks (i, j) whose hidden block j has no stored fc1 block, where h_j = GELU(b1_j) for
//    every token, move into the bias: b2_i += W2[i, j] GELU(b1_j) (exact-erf GELU and the sums in
//    double, rounded once to float32).
// The same function of x up to rounding. How much goes depends on the masks: with unstructured
// weights pruned by block magnitude to 90% in 64-blocks, a block-row or -column of 12 blocks is empty
// with probability ~0.9^12, so about a quarter of either weight's blocks. fc1 / fc2 host BSR matrices
// of one block size that chain (fc2.cols == fc1.rows), b1 / b2 float32 host tensors [fc1.rows] /
// [fc2.rows]; InvalidArgument otherwise.
struct SimplifiedBsrMlp {
  BsrMatrix fc1, fc2;              // host arrays only, values in the inputs' dtypes
  Tensor b2;                       // float32 [fc2.rows]
  int64_t fc1_blocks_dropped = 0;  // fc1 blocks in block-rows that fc2 never reads
  int64_t fc2_blocks_folded = 0;   // fc2 blocks moved into b2
};
SimplifiedBsrMlp simplify_bsr_mlp(const BsrMatrix& fc1, const Tensor& b1, const BsrMatrix& fc2, const Tensor& b2);
// Whether models simplify their block-sparse MLPs at load: yes unless VITRT_BSR_MLP_SIMPLIFY=0 (for
// A/B runs; read once per process).
bool bsr_mlp_simplify_on();

}  // namespace vitrt::ops

// ---- Slicing (ops_narrow.cpp) ----
namespace vitrt::ops {

// x.narrow(dim, start, length).contiguous(): a copy on x's device (any dtype).
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);
// A copy of x on its device, stream-ordered on the GPU (unlike Tensor::clone, which waits for the
// device, it may sit inside a CUDA graph capture).
Tensor copy(const Tensor& x);

}  // namespace vitrt::ops
