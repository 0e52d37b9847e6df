// Tensor-level CUDA operators: argument checks (mirroring ops.cpp), output allocation on the
// device, and calls into the kernels of ops/cuda. See ops_cuda.h.
#include "ops/ops_cuda.h"

#include <algorithm>
#include <string>

#include "core/device_memory.h"
#include "ops/cpu/resize_antialias.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/conv_transpose.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/image.h"
#include "ops/cuda/interpolate.h"
#include "ops/cuda/layout.h"
#include "ops/cuda/norm.h"
#endif

namespace vitrt::ops::cuda_impl {

namespace {
// F32 / BF16 conversions of host tensors.
// Host tensors: the CPU implementation in ops_cast.cpp.
Tensor cast_cpu(const Tensor& x, DType to) { return ops::cast(x, to); }
}  // namespace

#ifndef VITRT_HAVE_CUDA

// ---- CPU-only build: every CUDA entry point explains what is missing. ----
namespace {
[[noreturn]] void no_cuda(const char* op) {
  throw Error(detail::concat("ops::", op, ": this vitrt build has no CUDA backend (built without nvcc)"));
}
}  // namespace

Tensor cast(const Tensor& x, DType to) {
  VITRT_CHECK(x.defined(), InvalidArgument, "cast: undefined tensor");
  if (x.dtype() == to) return x;
  if (x.is_cuda()) no_cuda("cast");
  return cast_cpu(x, to);
}
Tensor linear(const Tensor&, const Tensor&, const Tensor*, Activation, const Tensor*, std::optional<DType>) {
  no_cuda("linear");
}
void linear_add_(Tensor&, const Tensor&, const Tensor&, const Tensor*) { no_cuda("linear_add_"); }
Tensor linear_broadcast_add(const Tensor&, const Tensor&, const Tensor&) { no_cuda("linear_broadcast_add"); }
Tensor conv_transpose2x2_dot(const Tensor&, const Tensor&, const Tensor*, Activation, const Tensor&) {
  no_cuda("conv_transpose2x2_dot");
}
Tensor matmul(const Tensor&, const Tensor&, bool) { no_cuda("matmul"); }
Tensor layer_norm(const Tensor&, const Tensor&, const Tensor&, float, std::optional<DType>, Activation) {
  no_cuda("layer_norm");
}
void add_(Tensor&, const Tensor&) { no_cuda("add_"); }
Tensor add(const Tensor&, const Tensor&) { no_cuda("add"); }
void scale_(Tensor&, float) { no_cuda("scale_"); }
void gelu_(Tensor&) { no_cuda("gelu_"); }
void relu_(Tensor&) { no_cuda("relu_"); }
void softmax_lastdim_(Tensor&) { no_cuda("softmax_lastdim_"); }
Tensor permute(const Tensor&, const std::vector<int>&) { no_cuda("permute"); }
Tensor cat(const std::vector<Tensor>&, int) { no_cuda("cat"); }
Tensor conv2d_nhwc(const Tensor&, const Tensor&, const Tensor*, int, int, std::optional<DType>) {
  no_cuda("conv2d_nhwc");
}
Tensor conv_transpose2x2_nhwc(const Tensor&, const Tensor&, const Tensor*, Activation) {
  no_cuda("conv_transpose2x2_nhwc");
}
Tensor window_partition(const Tensor&, int) { no_cuda("window_partition"); }
Tensor window_unpartition(const Tensor&, int, int64_t, int64_t) { no_cuda("window_unpartition"); }
Tensor interpolate_linear_rows(const Tensor&, int64_t) { no_cuda("interpolate_linear_rows"); }
Tensor resize_bilinear(const Tensor&, int64_t, int64_t) { no_cuda("resize_bilinear"); }
Tensor resize_antialias_u8(const Tensor&, int, int) { no_cuda("resize_antialias_u8"); }
Tensor normalize_pad(const Tensor&, int, const float*, const float*, DType) { no_cuda("normalize_pad"); }
Tensor preprocess_image(const Image&, int, const std::array<float, 3>&, const std::array<float, 3>&, DType, int*,
                        int*) {
  no_cuda("preprocess_image");
}
Tensor postprocess_masks(const Tensor&, int64_t, int64_t, int64_t, int64_t, int64_t, Tensor*) {
  no_cuda("postprocess_masks");
}

#else  // VITRT_HAVE_CUDA

namespace {

// Defined CUDA tensor.
void check_dev(const Tensor& t, const char* op, const char* name) {
  VITRT_CHECK(t.defined(), InvalidArgument, "ops::", op, ": ", name, " is an undefined tensor");
  VITRT_CHECK(t.is_cuda(), InvalidArgument, "ops::", op, ": ", name,
              " is a CPU tensor; the CUDA operator needs every operand on the GPU");
}
// Defined CUDA tensor of a floating dtype the kernels take.
void check_float(const Tensor& t, const char* op, const char* name) {
  check_dev(t, op, name);
  VITRT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, InvalidArgument, "ops::", op, ": ", name,
              " must be float32 or bfloat16, got ", dtype_name(t.dtype()));
}
// Like check_float, and of the same dtype as the first operand.
void check_like(const Tensor& t, const Tensor& ref, const char* op, const char* name) {
  check_dev(t, op, name);
  VITRT_CHECK(t.dtype() == ref.dtype(), InvalidArgument, "ops::", op, ": ", name, " is ", dtype_name(t.dtype()),
              " but the input is ", dtype_name(ref.dtype()), " (CUDA operators take one dtype per call)");
}

Tensor empty_like_dev(const Shape& s, DType dt) { return Tensor::empty(s, dt, Device::CUDA); }

cuda::Act to_cuda(Activation a) {
  switch (a) {
    case Activation::None: return cuda::Act::None;
    case Activation::GELU: return cuda::Act::GELU;
    case Activation::ReLU: return cuda::Act::ReLU;
  }
  throw InvalidArgument("ops: unknown activation");
}

// y[M, N] = act(x[M, K] w^T + bias) + residual with w [N, K] (trans_b) or [K, N]; x and w of
// dtype dt, y, bias and residual of dtype od (dt, or F32 for a BF16 dt).
// cuBLASLt's epilogues add the bias, the residual (beta = 1) and a ReLU applied last. GELU: in
// bf16 its GELU epilogue (tanh form, within ~5e-4 of erf GELU, well under bf16's 2^-8 relative
// rounding) saves a pass over the 4x-wide MLP hidden tensor; in fp32, which must match the
// reference to 1e-4, the exact erf GELU -- like an activation before a residual -- runs as one
// element-wise pass over the output afterwards (also for bf16 inputs with an fp32 output).
void gemm_epilogue(DType dt, DType od, const void* x, const void* w, bool trans_b, void* y, int64_t M, int64_t N,
                   int64_t K, const void* bias, Activation act, const void* residual) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // empty sum: y = act(bias) + residual
    devmem::memset_zero(y, Device::CUDA, static_cast<size_t>(M * N) * dtype_size(od));
    cuda::bias_act_residual(od, y, M, N, bias, to_cuda(act), residual);
    return;
  }
  cuda::GemmArgs g;
  g.dtype = dt;
  if (od != dt) g.d_dtype = od;
  g.M = M, g.N = N, g.K = K;
  g.a = x, g.b = w, g.trans_b = trans_b, g.d = y;
  g.bias = bias;
  bool post = false;
  if (act == Activation::None) {
    g.c = residual;
  } else if (act == Activation::ReLU && !residual) {
    g.relu = true;
  } else if (act == Activation::GELU && !residual && od == DType::BF16) {
    g.gelu_tanh = true;
  } else {
    post = true;  // GELU, or ReLU followed by a residual
  }
  cuda::gemm(g);
  if (post) cuda::bias_act_residual(od, y, M, N, nullptr, to_cuda(act), residual);
}

// The output dtype of linear / conv2d_nhwc: x's own, or F32 for a BF16 x.
DType out_dtype_for(const Tensor& x, std::optional<DType> out_dtype, const char* op) {
  const DType od = out_dtype.value_or(x.dtype());
  VITRT_CHECK(od == x.dtype() || (x.dtype() == DType::BF16 && od == DType::F32), InvalidArgument, "ops::", op, ": ",
              dtype_name(x.dtype()), " input with ", dtype_name(od),
              " output is not supported (the input's dtype, or bfloat16 -> float32)");
  return od;
}

// A bias of x's dtype or of the output dtype od, returned in od: cuBLASLt's bias has D's type
// (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), so a bf16 bias for an fp32 output is widened -- exactly --
// into a small stream-ordered temporary ([N] elements).
Tensor bias_for(const Tensor& bias, const Tensor& x, DType od, int64_t n, const char* op) {
  check_dev(bias, op, "bias");
  VITRT_CHECK(bias.dtype() == x.dtype() || bias.dtype() == od, InvalidArgument, "ops::", op, ": bias is ",
              dtype_name(bias.dtype()), " but the input is ", dtype_name(x.dtype()), " and the output ",
              dtype_name(od));
  bias.expect_shape({n}, detail::concat("ops::", op, " bias"));
  return cuda_impl::cast(bias, od);
}

}  // namespace

Tensor cast(const Tensor& x, DType to) {
  VITRT_CHECK(x.defined(), InvalidArgument, "cast: undefined tensor");
  if (x.dtype() == to) return x;
  if (!x.is_cuda()) return cast_cpu(x, to);
  VITRT_CHECK((x.dtype() == DType::F32 || x.dtype() == DType::BF16) && (to == DType::F32 || to == DType::BF16),
              InvalidArgument, "cast: cannot convert a CUDA ", dtype_name(x.dtype()), " tensor to ", dtype_name(to),
              " (float32 <-> bfloat16 only)");
  Tensor out = empty_like_dev(x.shape(), to);
  cuda::cast(x.dtype(), x.raw(), to, out.raw(), x.numel());
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, const Tensor* residual,
              std::optional<DType> out_dtype) {
  check_float(x, "linear", "x");
  check_like(w, x, "linear", "weight");
  const DType od = out_dtype_for(x, out_dtype, "linear");
  VITRT_CHECK(x.dim() >= 1 && w.dim() == 2 && w.size(1) == x.size(-1), InvalidArgument, "ops::linear: x ",
              shape_str(x.shape()), " does not match weight ", shape_str(w.shape()), " (expected [out, ",
              x.dim() >= 1 ? x.size(-1) : 0, "])");
  const int64_t K = x.size(-1), N = w.size(0), M = K ? x.numel() / K : 0;
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor b;
  if (bias) b = bias_for(*bias, x, od, N, "linear");
  if (residual) {
    check_dev(*residual, "linear", "residual");
    VITRT_CHECK(residual->dtype() == od, InvalidArgument, "ops::linear: residual is ", dtype_name(residual->dtype()),
                " but the output is ", dtype_name(od), " (the residual has the output's dtype)");
    residual->expect_shape(out_shape, "ops::linear residual");
  }
  Tensor y = empty_like_dev(out_shape, od);
  // M is 0 when K is 0 (numel 0) -- mirror the CPU: nothing to compute then.
  gemm_epilogue(x.dtype(), od, x.raw(), w.raw(), true, y.raw(), M, N, K, bias ? b.raw() : nullptr, act,
                residual ? residual->raw() : nullptr);
  return y;
}

void linear_add_(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) {
  check_float(x, "linear_add_", "x");
  check_like(w, x, "linear_add_", "weight");
  check_dev(y, "linear_add_", "y");
  const DType od = out_dtype_for(x, y.dtype(), "linear_add_");
  VITRT_CHECK(x.dim() >= 1 && w.dim() == 2 && w.size(1) == x.size(-1), InvalidArgument, "ops::linear_add_: x ",
              shape_str(x.shape()), " does not match weight ", shape_str(w.shape()));
  const int64_t K = x.size(-1), N = w.size(0), M = K ? x.numel() / K : 0;
  Shape out_shape = x.shape();
  out_shape.back() = N;
  VITRT_CHECK(y.numel() == M * N && y.size(-1) == N, InvalidArgument, "ops::linear_add_: y ", shape_str(y.shape()),
              " does not hold the product ", shape_str(out_shape));
  Tensor b;
  if (bias) b = bias_for(*bias, x, od, N, "linear_add_");
  // C = D = y: cuBLASLt's in-place form (beta = 1 on the same matrix).
  gemm_epilogue(x.dtype(), od, x.raw(), w.raw(), true, y.raw(), M, N, K, bias ? b.raw() : nullptr, Activation::None,
                y.raw());
}

Tensor linear_broadcast_add(const Tensor& x, const Tensor& w, const Tensor& c) {
  check_float(x, "linear_broadcast_add", "x");
  check_like(w, x, "linear_broadcast_add", "weight");
  check_like(c, x, "linear_broadcast_add", "c");
  VITRT_CHECK(x.dim() == 3 && w.dim() == 2 && w.size(1) == x.size(2) && x.size(2) > 0, InvalidArgument,
              "ops::linear_broadcast_add: x ", shape_str(x.shape()), " and weight ", shape_str(w.shape()),
              " (expected [B, T, K] and [N, K], K > 0)");
  c.expect_shape({x.size(1), w.size(0)}, "ops::linear_broadcast_add c");
  const int64_t B = x.size(0), T = x.size(1), K = x.size(2), N = w.size(0);
  Tensor y = empty_like_dev({B, T, N}, x.dtype());
  if (B == 0 || T == 0 || N == 0) return y;
  // One strided-batch GEMM: A advances T rows per product, the weight and C (batch stride 0) are
  // shared.
  cuda::GemmArgs g;
  g.dtype = x.dtype();
  g.M = T, g.N = N, g.K = K;
  g.a = x.raw(), g.b = w.raw(), g.trans_b = true, g.d = y.raw(), g.c = c.raw();
  g.batch = B;
  g.stride_a = T * K, g.stride_b = 0, g.stride_d = T * N, g.stride_c = 0;
  cuda::gemm(g);
  return y;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_b) {
  check_float(a, "matmul", "a");
  check_like(b, a, "matmul", "b");
  const auto [batch, M, N, K, out_shape] = ops::matmul_shape(a, b, transpose_b);
  Tensor c = empty_like_dev(out_shape, a.dtype());
  if (batch == 0 || M == 0 || N == 0) return c;
  if (K == 0) {
    devmem::memset_zero(c.raw(), Device::CUDA, c.nbytes());
    return c;
  }
  cuda::GemmArgs g;
  g.dtype = a.dtype();
  g.K = K, g.N = N;
  g.a = a.raw(), g.b = b.raw(), g.trans_b = transpose_b, g.d = c.raw();
  if (b.dim() == 2) {
    g.M = batch * M;  // one b for the whole batch: a single [batch*M, K] product
  } else {
    g.M = M;
    g.batch = batch;
    g.stride_a = M * K, g.stride_b = K * N, g.stride_d = M * N;
  }
  cuda::gemm(g);
  return c;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                  std::optional<DType> out_dtype, Activation act) {
  VITRT_CHECK(act == Activation::None || act == Activation::GELU, InvalidArgument,
              "ops::layer_norm: only GELU may follow the LayerNorm");
  check_float(x, "layer_norm", "x");
  check_float(weight, "layer_norm", "weight");
  check_dev(bias, "layer_norm", "bias");
  VITRT_CHECK(bias.dtype() == weight.dtype(), InvalidArgument, "ops::layer_norm: bias is ", dtype_name(bias.dtype()),
              " but the weight is ", dtype_name(weight.dtype()), " (weight and bias share one dtype)");
  const DType od = out_dtype.value_or(x.dtype());
  VITRT_CHECK(od == DType::F32 || od == DType::BF16, InvalidArgument, "ops::layer_norm: output dtype ",
              dtype_name(od), " is not supported (float32 or bfloat16)");
  VITRT_CHECK(x.dim() >= 1, InvalidArgument, "ops::layer_norm: x must have at least one dimension");
  const int64_t C = x.size(-1);
  weight.expect_shape({C}, "ops::layer_norm weight");
  bias.expect_shape({C}, "ops::layer_norm bias");
  Tensor y = empty_like_dev(x.shape(), od);
  cuda::layer_norm(x.dtype(), x.raw(), weight.dtype(), weight.raw(), bias.raw(), od, y.raw(), C ? x.numel() / C : 0,
                   C, eps, act == Activation::GELU);
  return y;
}

namespace {
void check_add(const Tensor& x, const Tensor& y) {
  check_float(x, "add", "x");
  check_like(y, x, "add", "y");
  bool ok = y.numel() == x.numel();
  if (!ok && y.dim() <= x.dim()) ok = std::equal(y.shape().begin(), y.shape().end(), x.shape().end() - y.dim());
  VITRT_CHECK(ok && (y.numel() > 0 || x.numel() == 0), InvalidArgument, "ops::add: cannot broadcast ",
              shape_str(y.shape()), " onto ", shape_str(x.shape()));
}
}  // namespace

void add_(Tensor& x, const Tensor& y) {
  check_add(x, y);
  cuda::add_broadcast(x.dtype(), x.raw(), y.raw(), x.raw(), x.numel(), y.numel());
}

Tensor add(const Tensor& x, const Tensor& y) {
  check_add(x, y);
  Tensor out = empty_like_dev(x.shape(), x.dtype());
  cuda::add_broadcast(x.dtype(), x.raw(), y.raw(), out.raw(), x.numel(), y.numel());
  return out;
}

void scale_(Tensor& x, float s) {
  check_float(x, "scale_", "x");
  cuda::scale(x.dtype(), x.raw(), x.numel(), s);
}

void gelu_(Tensor& x) {
  check_float(x, "gelu_", "x");
  cuda::gelu(x.dtype(), x.raw(), x.numel());
}

void relu_(Tensor& x) {
  check_float(x, "relu_", "x");
  cuda::relu(x.dtype(), x.raw(), x.numel());
}

void softmax_lastdim_(Tensor& x) {
  check_float(x, "softmax_lastdim_", "x");
  VITRT_CHECK(x.dim() >= 1, InvalidArgument, "ops::softmax_lastdim_: x must have at least one dimension");
  const int64_t n = x.size(-1);
  cuda::softmax_lastdim(x.dtype(), x.raw(), n ? x.numel() / n : 0, n);
}

Tensor permute(const Tensor& x, const std::vector<int>& perm) {
  check_dev(x, "permute", "x");
  const Shape out_shape = ops::permute_shape(x, perm);
  VITRT_CHECK(x.dim() <= 6, InvalidArgument, "ops::permute: ", x.dim(), " dimensions; the CUDA kernel takes at most 6");
  Tensor out = empty_like_dev(out_shape, x.dtype());
  cuda::permute(dtype_size(x.dtype()), x.raw(), out.raw(), x.shape(), perm);
  return out;
}

Tensor cat(const std::vector<Tensor>& xs, int dim) {
  for (const Tensor& t : xs) check_like(t, xs[0], "cat", "input");
  const ops::CatShape s = ops::cat_shape(xs, dim);
  Tensor out = empty_like_dev(s.out, xs[0].dtype());
  const int64_t total_cols = s.out[s.dim] * s.inner;
  int64_t offset = 0;
  for (const Tensor& t : xs) {
    const int64_t cols = t.size(s.dim) * s.inner;
    cuda::copy_columns(dtype_size(t.dtype()), t.raw(), out.raw(), s.outer, cols, total_cols, offset);
    offset += cols;
  }
  return out;
}

Tensor conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, int stride, int pad,
                   std::optional<DType> out_dtype) {
  check_float(x, "conv2d_nhwc", "x");
  check_like(w, x, "conv2d_nhwc", "weight");
  const DType od = out_dtype_for(x, out_dtype, "conv2d_nhwc");
  const auto [B, H, W, Cin, Cout, kh, kw, Ho, Wo] = ops::conv2d_shape(x, w, stride, pad);
  Tensor b;
  if (bias) b = bias_for(*bias, x, od, Cout, "conv2d_nhwc");
  Tensor out = empty_like_dev({B, Ho, Wo, Cout}, od);
  const int64_t M = B * Ho * Wo, K = Cin * kh * kw;
  if (M == 0 || Cout == 0) return out;
  const void* bp = bias ? b.raw() : nullptr;
  if (kh == 1 && kw == 1 && stride == 1 && pad == 0) {
    // 1x1: the NHWC input already is the [M, Cin] operand, the weight [Cout, Cin].
    gemm_epilogue(x.dtype(), od, x.raw(), w.raw(), true, out.raw(), M, Cout, K, bp, Activation::None, nullptr);
    return out;
  }
  // im2col, then one GEMM against the weight read as [Cout, K]. The column buffer comes from the
  // stream-ordered pool and is released (stream-ordered) after the GEMM. Columns in tap-major order
  // (coalesced, 16-byte vectors for SAM's 256-channel neck conv; the weight, a few hundred KiB, is
  // permuted to match) where every size fits in 32 bits; otherwise in the weight's own order.
  Tensor col = empty_like_dev({M, K}, x.dtype());
  const bool small = M * K < (int64_t{1} << 31) && B * H * W * Cin < (int64_t{1} << 31);
  if (small) {
    cuda::im2col_nhwc_taps(dtype_size(x.dtype()), x.raw(), col.raw(), B, H, W, Cin, kh, kw, stride, pad, Ho, Wo);
    const Tensor w_taps = permute(w, {0, 2, 3, 1});  // [Cout, kh, kw, Cin]
    gemm_epilogue(x.dtype(), od, col.raw(), w_taps.raw(), true, out.raw(), M, Cout, K, bp, Activation::None, nullptr);
  } else {
    cuda::im2col_nhwc(dtype_size(x.dtype()), x.raw(), col.raw(), B, H, W, Cin, kh, kw, stride, pad, Ho, Wo);
    gemm_epilogue(x.dtype(), od, col.raw(), w.raw(), true, out.raw(), M, Cout, K, bp, Activation::None, nullptr);
  }
  return out;
}

Tensor conv_transpose2x2_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act) {
  VITRT_CHECK(act == Activation::None || act == Activation::GELU, InvalidArgument,
              "ops::conv_transpose2x2_nhwc: the activation must be None or GELU");
  check_float(x, "conv_transpose2x2_nhwc", "x");
  check_like(w, x, "conv_transpose2x2_nhwc", "weight");
  VITRT_CHECK(x.dim() == 4 && w.dim() == 4 && w.size(0) == x.size(3) && w.size(2) == 2 && w.size(3) == 2,
              InvalidArgument, "ops::conv_transpose2x2_nhwc: x ", shape_str(x.shape()),
              " (NHWC) does not match weight ", shape_str(w.shape()), " ([Cin, Cout, 2, 2])");
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), Cin = x.size(3), Cout = w.size(1);
  if (bias) {
    check_like(*bias, x, "conv_transpose2x2_nhwc", "bias");
    bias->expect_shape({Cout}, "ops::conv_transpose2x2_nhwc bias");
  }
  Tensor out = empty_like_dev({B, 2 * H, 2 * W, Cout}, x.dtype());
  const int64_t M = B * H * W, N = Cout * 4;
  if (M == 0 || Cout == 0) return out;
  if (x.dtype() == DType::BF16 && cuda::conv_transpose2x2_mma_supported(M, Cin, Cout, x.raw(), w.raw(), out.raw())) {
    // One tensor-core kernel with the bias, GELU and scatter in its epilogue (Cin = 64: SAM's
    // second upscaling layer); the weight as [tap, Cout, Cin] rows (a 16 KB copy per call).
    const Tensor wt = permute(w, {2, 3, 1, 0});
    cuda::conv_transpose2x2_mma(x.raw(), wt.raw(), bias ? bias->raw() : nullptr, out.raw(), B, H, W, Cin, Cout,
                                act == Activation::GELU);
    return out;
  }
  // Y[M, Cout*4] = X[M, Cin] @ W[Cin, Cout*4] (the PyTorch weight as stored, column
  // co*4 + ky*2 + kx), then each row scattered into its 2x2 output block with the bias.
  Tensor y = empty_like_dev({M, N}, x.dtype());
  gemm_epilogue(x.dtype(), x.dtype(), x.raw(), w.raw(), false, y.raw(), M, N, Cin, nullptr, Activation::None,
                nullptr);
  cuda::conv_transpose2x2_scatter(x.dtype(), y.raw(), bias ? bias->raw() : nullptr, out.raw(), B, H, W, Cout,
                                  act == Activation::GELU);
  return out;
}

Tensor conv_transpose2x2_dot(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, const Tensor& vecs) {
  check_float(x, "conv_transpose2x2_dot", "x");
  check_like(w, x, "conv_transpose2x2_dot", "weight");
  check_like(vecs, x, "conv_transpose2x2_dot", "vectors");
  if (bias) check_like(*bias, x, "conv_transpose2x2_dot", "bias");
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), Cin = x.size(3), Cout = w.size(1), V = vecs.size(1);
  if (x.dtype() != DType::BF16 || (act != Activation::None && act != Activation::GELU) || w.size(0) != Cin ||
      w.size(2) != 2 || w.size(3) != 2 || (bias && bias->numel() != Cout))
    return Tensor();
  Tensor out = empty_like_dev({B, V, 4 * H * W}, x.dtype());
  const Tensor wt = permute(w, {2, 3, 1, 0});  // [tap, Cout, Cin] rows, as conv_transpose2x2_mma
  if (!cuda::conv_transpose2x2_dot_supported(B, H, W, Cin, Cout, V, x.raw(), wt.raw(), vecs.raw(), out.raw()))
    return Tensor();
  cuda::conv_transpose2x2_gelu_dot(x.raw(), wt.raw(), bias ? bias->raw() : nullptr, vecs.raw(), out.raw(), B, H, W,
                                   act == Activation::GELU);
  return out;
}

Tensor window_partition(const Tensor& x, int ws) {
  check_dev(x, "window_partition", "x");
  Tensor out = empty_like_dev(ops::window_partition_shape(x, ws), x.dtype());
  cuda::window_partition(dtype_size(x.dtype()), x.raw(), out.raw(), x.size(0), x.size(1), x.size(2), x.size(3), ws);
  return out;
}

Tensor window_unpartition(const Tensor& windows, int ws, int64_t H, int64_t W) {
  check_dev(windows, "window_unpartition", "windows");
  Tensor out = empty_like_dev(ops::window_unpartition_shape(windows, ws, H, W), windows.dtype());
  cuda::window_unpartition(dtype_size(windows.dtype()), windows.raw(), out.raw(), out.size(0), H, W, out.size(3), ws);
  return out;
}

Tensor interpolate_linear_rows(const Tensor& x, int64_t new_len) {
  check_float(x, "interpolate_linear_rows", "x");
  Tensor out = empty_like_dev(ops::interpolate_linear_rows_shape(x, new_len), x.dtype());
  cuda::interpolate_linear_rows(x.dtype(), x.raw(), out.raw(), x.size(0), x.size(1), new_len);
  return out;
}

Tensor resize_bilinear(const Tensor& x, int64_t out_h, int64_t out_w) {
  check_float(x, "resize_bilinear", "x");
  Tensor out = empty_like_dev(ops::resize_bilinear_shape(x, out_h, out_w), x.dtype());
  const int64_t H = x.size(-2), W = x.size(-1), N = x.numel() / (H * W);
  cuda::resize_bilinear(x.dtype(), x.raw(), N, H, W, H * W, W, x.dtype(), out.raw(), out_h, out_w);
  return out;
}

Tensor resize_antialias_u8(const Tensor& image, int out_h, int out_w) {
  check_dev(image, "resize_antialias_u8", "image");
  VITRT_CHECK(image.dtype() == DType::U8 && image.dim() == 3 && image.size(2) >= 1 && image.size(2) <= 4,
              InvalidArgument, "ops::resize_antialias_u8: need a uint8 image [H, W, C <= 4], got ",
              dtype_name(image.dtype()), " ", shape_str(image.shape()));
  VITRT_CHECK(out_h >= 1 && out_w >= 1 && image.size(0) >= 1 && image.size(1) >= 1, InvalidArgument,
              "ops::resize_antialias_u8: empty image or size (", shape_str(image.shape()), " -> ", out_h, "x", out_w,
              ")");
  const int C = static_cast<int>(image.size(2));
  Tensor out = Tensor::empty({out_h, out_w, C}, DType::U8, Device::CUDA);
  cuda::resize_antialias_u8(static_cast<const uint8_t*>(image.raw()), static_cast<int>(image.size(1)),
                            static_cast<int>(image.size(0)), C, static_cast<uint8_t*>(out.raw()), out_w, out_h);
  return out;
}

Tensor normalize_pad(const Tensor& image, int S, const float* mean, const float* std, DType dt) {
  check_dev(image, "normalize_pad", "image");
  VITRT_CHECK(image.dtype() == DType::U8 && image.dim() == 3 && image.size(2) >= 1 && image.size(2) <= 4,
              InvalidArgument, "ops::normalize_pad: need a uint8 image [h, w, C <= 4], got ",
              dtype_name(image.dtype()), " ", shape_str(image.shape()));
  VITRT_CHECK(image.size(0) <= S && image.size(1) <= S, InvalidArgument, "ops::normalize_pad: image ",
              shape_str(image.shape()), " is larger than ", S, "x", S);
  VITRT_CHECK(dt == DType::F32 || dt == DType::BF16, InvalidArgument, "ops::normalize_pad: output dtype ",
              dtype_name(dt), " (float32 or bfloat16)");
  const int C = static_cast<int>(image.size(2));
  Tensor out = empty_like_dev({1, S, S, C}, dt);
  cuda::normalize_pad(static_cast<const uint8_t*>(image.raw()), static_cast<int>(image.size(0)),
                      static_cast<int>(image.size(1)), C, S, mean, std, dt, out.raw());
  return out;
}

Tensor preprocess_image(const Image& rgb, int S, const std::array<float, 3>& mean, const std::array<float, 3>& std,
                        DType dt, int* input_h, int* input_w) {
  VITRT_CHECK(!rgb.empty(), ImageError, "cannot segment an empty image (", rgb.width, "x", rgb.height, ")");
  VITRT_CHECK(rgb.channels == 3 && rgb.pixels.size() == static_cast<size_t>(rgb.width) * rgb.height * 3, ImageError,
              "preprocess_image expects an RGB image with ", rgb.width, "x", rgb.height, "x3 bytes");
  int nw = 0, nh = 0;
  longest_side_shape(rgb.width, rgb.height, S, &nw, &nh);
  VITRT_CHECK(nw > 0 && nh > 0, InvalidArgument, "preprocess_image: ", rgb.width, "x", rgb.height,
              " is too elongated for target ", S, " (a side would become 0 pixels)");
  Tensor src = Tensor::empty({rgb.height, rgb.width, 3}, DType::U8, Device::CUDA);
  devmem::copy(src.raw(), Device::CUDA, rgb.pixels.data(), Device::CPU, rgb.pixels.size());
  Tensor resized = resize_antialias_u8(src, nh, nw);
  if (input_h) *input_h = nh;
  if (input_w) *input_w = nw;
  return normalize_pad(resized, S, mean.data(), std.data(), dt);
}

Tensor postprocess_masks(const Tensor& low_res, int64_t S, int64_t input_h, int64_t input_w, int64_t out_h,
                         int64_t out_w, Tensor* logits) {
  check_float(low_res, "postprocess_masks", "low_res");
  VITRT_CHECK(low_res.dim() >= 2 && low_res.size(-1) >= 1 && low_res.size(-2) >= 1, InvalidArgument,
              "ops::postprocess_masks: need low-res planes [..., m, m], got ", shape_str(low_res.shape()));
  VITRT_CHECK(S >= 1 && input_h >= 1 && input_w >= 1 && input_h <= S && input_w <= S && out_h >= 1 && out_w >= 1,
              InvalidArgument, "ops::postprocess_masks: bad sizes: S ", S, ", input ", input_h, "x", input_w,
              ", output ", out_h, "x", out_w);
  const int64_t mh = low_res.size(-2), mw = low_res.size(-1), N = low_res.numel() / (mh * mw);
  // Bilinear to S x S in fp32 (the CPU path's intermediate), crop, bilinear to the output size and
  // threshold, in one pass: the S x S values are recomputed where the second resize reads them.
  Shape out_shape = low_res.shape();
  out_shape[out_shape.size() - 2] = out_h;
  out_shape.back() = out_w;
  Tensor masks = Tensor::empty(out_shape, DType::U8, Device::CUDA);
  Tensor lg;
  if (logits) lg = empty_like_dev(out_shape, DType::F32);
  cuda::upscale_crop_resize(low_res.dtype(), low_res.raw(), N, mh, mw, S, input_h, input_w,
                            logits ? static_cast<float*>(lg.raw()) : nullptr, static_cast<uint8_t*>(masks.raw()), out_h,
                            out_w);
  if (logits) *logits = lg;
  return masks;
}

#endif  // VITRT_HAVE_CUDA

}  // namespace vitrt::ops::cuda_impl
