#include <cstring>
// Tensor-level operators: argument checking, output allocation, device dispatch. The kernels in
// ops/cpu work on raw float pointers and trust what they are given; everything a caller can get
// wrong is caught here with an InvalidArgument naming the operator and the offending shape.
#include "ops/ops.h"
#include "ops/op_profiler.h"
#include "ops/ops_cuda.h"
#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/attention.h"
#endif

#include <algorithm>
#include <string>

#include "ops/cpu/attention.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/interpolate.h"
#include "ops/cpu/layout.h"
#include "ops/cpu/norm.h"

namespace vitrt::ops {
namespace {

// On the CPU path every operand must be a defined, float32, host tensor. (Each op sends CUDA
// tensors to cuda_impl by its first operand; a CUDA operand seen here means mixed devices.)
void check_input(const Tensor& t, const char* op, const char* name) {
  VITRT_CHECK(t.defined(), InvalidArgument, "ops::", op, ": ", name, " is an undefined tensor");
  VITRT_CHECK(t.device() == Device::CPU, InvalidArgument, "ops::", op, ": ", name,
              " is a CUDA tensor but the operation runs on the CPU (its first operand is a host tensor); "
              "all operands must be on the same device");
  VITRT_CHECK(t.dtype() == DType::F32, InvalidArgument, "ops::", op, ": ", name, " must be float32, got ",
              dtype_name(t.dtype()));
}

const float* f32(const Tensor& t) { return static_cast<const float*>(t.raw()); }
float* f32(Tensor& t) { return static_cast<float*>(t.raw()); }

cpu::Act to_cpu(Activation a) {
  switch (a) {
    case Activation::None: return cpu::Act::None;
    case Activation::GELU: return cpu::Act::GELU;
    case Activation::ReLU: return cpu::Act::ReLU;
  }
  throw InvalidArgument("ops: unknown activation");
}

// CPU kernels compute in float32 only: an explicit output dtype must be F32.
void check_out_f32(std::optional<DType> out_dtype, const char* op) {
  VITRT_CHECK(!out_dtype || *out_dtype == DType::F32, InvalidArgument, "ops::", op, ": output dtype ",
              dtype_name(*out_dtype), " requested, but the CPU path computes in float32 only");
}

// Rows of 2H-1 (resp. 2W-1) relative positions, interpolated like segment_anything's get_rel_pos
// when the table was trained for another size.
Tensor rel_pos_for(const Tensor& table, int64_t size) {
  const int64_t want = 2 * size - 1;
  if (table.size(0) == want) return table;
  return interpolate_linear_rows(table, want);
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, const Tensor* residual,
              std::optional<DType> out_dtype) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("linear ", x.numel() / std::max<int64_t>(1, x.size(-1)), "x", w.size(0), "x", w.size(1),
                     act == Activation::GELU ? " +gelu" : "", residual ? " +res" : "",
                     out_dtype && *out_dtype != x.dtype() ? " ->f32" : "");
    return cuda_impl::linear(x, w, bias, act, residual, out_dtype);
  }
  check_out_f32(out_dtype, "linear");
  check_input(x, "linear", "x");
  check_input(w, "linear", "weight");
  VITRT_CHECK(x.dim() >= 1 && w.dim() == 2 && w.size(1) == x.size(-1), InvalidArgument,
              "ops::linear: x ", shape_str(x.shape()), " does not match weight ", shape_str(w.shape()),
              " (expected [out, ", x.dim() >= 1 ? x.size(-1) : 0, "])");
  const int64_t K = x.size(-1), N = w.size(0), M = K ? x.numel() / K : 0;
  Shape out_shape = x.shape();
  out_shape.back() = N;
  if (bias) {
    check_input(*bias, "linear", "bias");
    bias->expect_shape({N}, "ops::linear bias");
  }
  if (residual) {
    check_input(*residual, "linear", "residual");
    residual->expect_shape(out_shape, "ops::linear residual");
  }
  Tensor y = Tensor::empty(out_shape);
  cpu::gemm_epilogue(f32(x), f32(w), true, f32(y), M, N, K, bias ? f32(*bias) : nullptr, to_cpu(act),
                     residual ? f32(*residual) : nullptr);
  return y;
}

Tensor linear_broadcast_add(const Tensor& x, const Tensor& w, const Tensor& c) {
  VITRT_CHECK(x.dim() == 3 && w.dim() == 2 && w.size(1) == x.size(2), InvalidArgument,
              "ops::linear_broadcast_add: x ", shape_str(x.shape()), " and weight ", shape_str(w.shape()),
              " (expected [B, T, K] and [N, K])");
  c.expect_shape({x.size(1), w.size(0)}, "ops::linear_broadcast_add c");
  VITRT_CHECK(x.size(2) > 0, InvalidArgument, "ops::linear_broadcast_add: empty inner dimension (K = 0)");
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("linear ", x.size(0), "x[", x.size(1), "x", w.size(0), "x", w.size(1), "] +c");
    return cuda_impl::linear_broadcast_add(x, w, c);
  }
  check_input(x, "linear_broadcast_add", "x");
  check_input(w, "linear_broadcast_add", "weight");
  check_input(c, "linear_broadcast_add", "c");
  const int64_t B = x.size(0), T = x.size(1), K = x.size(2), N = w.size(0);
  Tensor y = Tensor::empty({B, T, N});
  for (int64_t b = 0; b < B; ++b)
    cpu::gemm_epilogue(f32(x) + b * T * K, f32(w), true, f32(y) + b * T * N, T, N, K, nullptr, cpu::Act::None,
                       f32(c));
  return y;
}

void linear_add_(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("linear ", x.numel() / std::max<int64_t>(1, x.size(-1)), "x", w.size(0), "x", w.size(1),
                     " +=", y.dtype() != x.dtype() ? " ->f32" : "");
    return cuda_impl::linear_add_(y, x, w, bias);
  }
  // CPU: the epilogue's residual input must not alias its output, so the sum goes through a
  // temporary (host memory is not what this op saves).
  check_input(y, "linear_add_", "y");
  const Tensor sum = linear(x, w, bias, Activation::None, &y);
  std::memcpy(y.raw(), sum.raw(), sum.nbytes());
}

MatmulShape matmul_shape(const Tensor& a, const Tensor& b, bool transpose_b) {
  VITRT_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3) && b.dim() <= a.dim(),
              InvalidArgument, "ops::matmul: unsupported ranks ", shape_str(a.shape()), " x ", shape_str(b.shape()));
  MatmulShape s;
  s.batch = a.dim() == 3 ? a.size(0) : 1;
  s.M = a.size(-2), s.K = a.size(-1);
  const int64_t bK = transpose_b ? b.size(-1) : b.size(-2);
  s.N = transpose_b ? b.size(-2) : b.size(-1);
  VITRT_CHECK(bK == s.K && (b.dim() == 2 || b.size(0) == s.batch), InvalidArgument, "ops::matmul: ",
              shape_str(a.shape()), " x ", shape_str(b.shape()), transpose_b ? "^T" : "", " do not match");
  s.out = a.dim() == 3 ? Shape{s.batch, s.M, s.N} : Shape{s.M, s.N};
  return s;
}

Shape permute_shape(const Tensor& x, const std::vector<int>& perm) {
  const int64_t nd = x.dim();
  VITRT_CHECK(static_cast<int64_t>(perm.size()) == nd, InvalidArgument, "ops::permute: ", perm.size(),
              " axes given for shape ", shape_str(x.shape()));
  std::vector<bool> seen(nd, false);
  Shape out(nd);
  for (int64_t d = 0; d < nd; ++d) {
    VITRT_CHECK(perm[d] >= 0 && perm[d] < nd && !seen[perm[d]], InvalidArgument,
                "ops::permute: axes are not a permutation of 0..", nd - 1);
    seen[perm[d]] = true;
    out[d] = x.size(perm[d]);
  }
  return out;
}

CatShape cat_shape(const std::vector<Tensor>& xs, int dim) {
  VITRT_CHECK(!xs.empty(), InvalidArgument, "ops::cat: no tensors given");
  const int64_t nd = xs[0].dim();
  CatShape s;
  s.dim = dim < 0 ? dim + nd : dim;
  VITRT_CHECK(s.dim >= 0 && s.dim < nd, InvalidArgument, "ops::cat: dim ", dim, " out of range for ",
              shape_str(xs[0].shape()));
  s.out = xs[0].shape();
  s.out[s.dim] = 0;
  for (const Tensor& t : xs) {
    bool ok = t.dim() == nd;
    for (int64_t i = 0; ok && i < nd; ++i) ok = i == s.dim || t.size(i) == xs[0].size(i);
    VITRT_CHECK(ok, InvalidArgument, "ops::cat: ", shape_str(t.shape()), " does not match ",
                shape_str(xs[0].shape()), " outside dim ", s.dim);
    s.out[s.dim] += t.size(s.dim);
  }
  for (int64_t i = 0; i < s.dim; ++i) s.outer *= s.out[i];
  for (int64_t i = s.dim + 1; i < nd; ++i) s.inner *= s.out[i];
  return s;
}

Shape window_partition_shape(const Tensor& x, int ws) {
  VITRT_CHECK(x.dim() == 4 && ws >= 1, InvalidArgument, "ops::window_partition: need x [B, H, W, C] and window >= 1, got ",
              shape_str(x.shape()), " and ", ws);
  const int64_t nh = (x.size(1) + ws - 1) / ws, nw = (x.size(2) + ws - 1) / ws;
  return {x.size(0) * nh * nw, ws, ws, x.size(3)};
}

Shape window_unpartition_shape(const Tensor& windows, int ws, int64_t H, int64_t W) {
  VITRT_CHECK(ws >= 1 && H >= 0 && W >= 0, InvalidArgument, "ops::window_unpartition: bad window ", ws, " or size ",
              H, "x", W);
  const int64_t nh = (H + ws - 1) / ws, nw = (W + ws - 1) / ws;
  VITRT_CHECK(windows.dim() == 4 && windows.size(1) == ws && windows.size(2) == ws && nh * nw > 0 &&
                  windows.size(0) % (nh * nw) == 0,
              InvalidArgument, "ops::window_unpartition: windows ", shape_str(windows.shape()), " do not tile ", H,
              "x", W, " with window ", ws);
  return {windows.size(0) / (nh * nw), H, W, windows.size(3)};
}

Shape interpolate_linear_rows_shape(const Tensor& x, int64_t new_len) {
  VITRT_CHECK(x.dim() == 2 && x.size(0) >= 1 && new_len >= 1, InvalidArgument,
              "ops::interpolate_linear_rows: need x [L >= 1, C] and new_len >= 1, got ", shape_str(x.shape()), " and ",
              new_len);
  return {new_len, x.size(1)};
}

Conv2dShape conv2d_shape(const Tensor& x, const Tensor& w, int stride, int pad) {
  VITRT_CHECK(x.dim() == 4 && w.dim() == 4 && w.size(1) == x.size(3), InvalidArgument, "ops::conv2d_nhwc: x ",
              shape_str(x.shape()), " (NHWC) does not match weight ", shape_str(w.shape()), " ([Cout, Cin, kh, kw])");
  VITRT_CHECK(stride >= 1 && pad >= 0, InvalidArgument, "ops::conv2d_nhwc: bad stride ", stride, " / padding ", pad);
  Conv2dShape s;
  s.B = x.size(0), s.H = x.size(1), s.W = x.size(2), s.Cin = x.size(3);
  s.Cout = w.size(0), s.kh = w.size(2), s.kw = w.size(3);
  VITRT_CHECK(s.H + 2 * pad >= s.kh && s.W + 2 * pad >= s.kw && s.kh > 0 && s.kw > 0, InvalidArgument,
              "ops::conv2d_nhwc: kernel ", s.kh, "x", s.kw, " larger than the padded input ", shape_str(x.shape()));
  s.Ho = (s.H + 2 * pad - s.kh) / stride + 1, s.Wo = (s.W + 2 * pad - s.kw) / stride + 1;
  return s;
}

Shape resize_bilinear_shape(const Tensor& x, int64_t out_h, int64_t out_w) {
  VITRT_CHECK(x.dim() >= 2 && x.size(-2) >= 1 && x.size(-1) >= 1 && out_h >= 1 && out_w >= 1, InvalidArgument,
              "ops::resize_bilinear: need planes [..., H, W] and an output size >= 1, got ", shape_str(x.shape()),
              " -> ", out_h, "x", out_w);
  Shape out = x.shape();
  out[out.size() - 2] = out_h;
  out.back() = out_w;
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_b) {
  if (a.is_cuda()) {
    VITRT_PROFILE_OP("matmul ", shape_str(a.shape()), "x", shape_str(b.shape()));
    return cuda_impl::matmul(a, b, transpose_b);
  }
  check_input(a, "matmul", "a");
  check_input(b, "matmul", "b");
  const auto [batch, M, N, K, out_shape] = matmul_shape(a, b, transpose_b);
  Tensor c = Tensor::empty(out_shape);
  if (b.dim() == 2) {
    // One b for the whole batch: a single [batch*M, K] x [K, N] product.
    cpu::gemm_epilogue(f32(a), f32(b), transpose_b, f32(c), batch * M, N, K, nullptr, cpu::Act::None, nullptr);
  } else {
    cpu::batched_matmul(f32(a), f32(b), f32(c), batch, M, N, K, transpose_b);
  }
  return c;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                  std::optional<DType> out_dtype, Activation act) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("layer_norm ", x.numel() / std::max<int64_t>(1, x.size(-1)), "x", x.size(-1),
                     out_dtype && *out_dtype != x.dtype() ? " +cast" : "", act == Activation::GELU ? " +gelu" : "");
    return cuda_impl::layer_norm(x, weight, bias, eps, out_dtype, act);
  }
  VITRT_CHECK(act == Activation::None || act == Activation::GELU, InvalidArgument,
              "ops::layer_norm: only GELU may follow the LayerNorm");
  check_out_f32(out_dtype, "layer_norm");
  check_input(x, "layer_norm", "x");
  check_input(weight, "layer_norm", "weight");
  check_input(bias, "layer_norm", "bias");
  VITRT_CHECK(x.dim() >= 1, InvalidArgument, "ops::layer_norm: x must have at least one dimension");
  const int64_t C = x.size(-1);
  weight.expect_shape({C}, "ops::layer_norm weight");
  bias.expect_shape({C}, "ops::layer_norm bias");
  Tensor y = Tensor::empty(x.shape());
  cpu::layer_norm(f32(x), f32(weight), f32(bias), f32(y), C ? x.numel() / C : 0, C, eps);
  if (act == Activation::GELU) cpu::gelu(f32(y), y.numel());
  return y;
}

namespace {
// y broadcasts over x if it equals a suffix of x's shape, or simply has as many elements.
void check_add(const Tensor& x, const Tensor& y) {
  check_input(x, "add", "x");
  check_input(y, "add", "y");
  bool ok = y.numel() == x.numel();
  if (!ok && y.dim() <= x.dim())
    ok = std::equal(y.shape().begin(), y.shape().end(), x.shape().end() - y.dim());
  VITRT_CHECK(ok && (y.numel() > 0 || x.numel() == 0), InvalidArgument, "ops::add: cannot broadcast ",
              shape_str(y.shape()), " onto ", shape_str(x.shape()));
}
}  // namespace

void add_(Tensor& x, const Tensor& y) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("add_ ", x.numel());
    return cuda_impl::add_(x, y);
  }
  check_add(x, y);
  cpu::add_broadcast(f32(x), f32(y), f32(x), x.numel(), y.numel());
}

Tensor add(const Tensor& x, const Tensor& y) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("add ", x.numel(), y.numel() == x.numel() ? "" : " (broadcast)");
    return cuda_impl::add(x, y);
  }
  check_add(x, y);
  Tensor out = Tensor::empty(x.shape());
  cpu::add_broadcast(f32(x), f32(y), f32(out), x.numel(), y.numel());
  return out;
}

void scale_(Tensor& x, float s) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("scale_ ", x.numel());
    return cuda_impl::scale_(x, s);
  }
  check_input(x, "scale_", "x");
  cpu::scale(f32(x), x.numel(), s);
}

void gelu_(Tensor& x) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("gelu_ ", x.numel());
    return cuda_impl::gelu_(x);
  }
  check_input(x, "gelu_", "x");
  cpu::gelu(f32(x), x.numel());
}

void relu_(Tensor& x) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("relu_ ", x.numel());
    return cuda_impl::relu_(x);
  }
  check_input(x, "relu_", "x");
  cpu::relu(f32(x), x.numel());
}

void softmax_lastdim_(Tensor& x) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("softmax ", shape_str(x.shape()));
    return cuda_impl::softmax_lastdim_(x);
  }
  check_input(x, "softmax_lastdim_", "x");
  VITRT_CHECK(x.dim() >= 1, InvalidArgument, "ops::softmax_lastdim_: x must have at least one dimension");
  const int64_t n = x.size(-1);
  cpu::softmax_rows(f32(x), n ? x.numel() / n : 0, n);
}

Tensor permute(const Tensor& x, const std::vector<int>& perm) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("permute ", shape_str(x.shape()));
    return cuda_impl::permute(x, perm);
  }
  check_input(x, "permute", "x");
  Tensor out = Tensor::empty(permute_shape(x, perm));
  cpu::permute(f32(x), f32(out), x.shape(), perm);
  return out;
}

Tensor cat(const std::vector<Tensor>& xs, int dim) {
  if (!xs.empty() && xs[0].is_cuda()) {
    VITRT_PROFILE_OP("cat ", xs.size(), " x ", shape_str(xs[0].shape()), " dim ", dim);
    return cuda_impl::cat(xs, dim);
  }
  for (const Tensor& t : xs) check_input(t, "cat", "input");
  const CatShape s = cat_shape(xs, dim);
  std::vector<const float*> ptrs;
  std::vector<int64_t> sizes;
  for (const Tensor& t : xs) {
    ptrs.push_back(f32(t));
    sizes.push_back(t.size(s.dim));
  }
  Tensor out = Tensor::empty(s.out);
  cpu::cat(ptrs, sizes, f32(out), s.outer, s.inner);
  return out;
}

Tensor conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, int stride, int pad,
                   std::optional<DType> out_dtype) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("conv2d ", shape_str(x.shape()), " k", w.size(2), " s", stride);
    return cuda_impl::conv2d_nhwc(x, w, bias, stride, pad, out_dtype);
  }
  check_out_f32(out_dtype, "conv2d_nhwc");
  check_input(x, "conv2d_nhwc", "x");
  check_input(w, "conv2d_nhwc", "weight");
  const Conv2dShape s = conv2d_shape(x, w, stride, pad);
  if (bias) {
    check_input(*bias, "conv2d_nhwc", "bias");
    bias->expect_shape({s.Cout}, "ops::conv2d_nhwc bias");
  }
  Tensor out = Tensor::empty({s.B, s.Ho, s.Wo, s.Cout});
  cpu::conv2d_nhwc(f32(x), f32(w), bias ? f32(*bias) : nullptr, f32(out), s.B, s.H, s.W, s.Cin, s.Cout, s.kh, s.kw,
                   stride, pad);
  return out;
}

Tensor conv_transpose2x2_dot(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, const Tensor& vecs) {
  VITRT_CHECK(x.dim() == 4 && w.dim() == 4 && vecs.dim() == 3 && vecs.size(0) == x.size(0) && vecs.size(2) == w.size(1),
              InvalidArgument, "ops::conv_transpose2x2_dot: x ", shape_str(x.shape()), ", weight ", shape_str(w.shape()),
              " and vectors ", shape_str(vecs.shape()), " do not match ([B, H, W, Cin], [Cin, Cout, 2, 2], [B, V, Cout])");
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("conv_transpose2x2 ", shape_str(x.shape()), " -> ", w.size(1), act == Activation::GELU ? " +gelu" : "",
                     " . ", shape_str(vecs.shape()));
    Tensor fused = cuda_impl::conv_transpose2x2_dot(x, w, bias, act, vecs);
    if (fused.defined()) return fused;
  }
  const int64_t B = x.size(0), P = 4 * x.size(1) * x.size(2);
  const Tensor up = conv_transpose2x2_nhwc(x, w, bias, act);
  return matmul(vecs, up.reshape({B, P, w.size(1)}), /*transpose_b=*/true);
}

Tensor conv_transpose2x2_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act) {
  if (x.is_cuda()) {
    VITRT_PROFILE_OP("conv_transpose2x2 ", shape_str(x.shape()), " -> ", w.size(1), act == Activation::GELU ? " +gelu" : "");
    return cuda_impl::conv_transpose2x2_nhwc(x, w, bias, act);
  }
  VITRT_CHECK(act == Activation::None || act == Activation::GELU, InvalidArgument,
              "ops::conv_transpose2x2_nhwc: the activation must be None or GELU");
  check_input(x, "conv_transpose2x2_nhwc", "x");
  check_input(w, "conv_transpose2x2_nhwc", "weight");
  VITRT_CHECK(x.dim() == 4 && w.dim() == 4 && w.size(0) == x.size(3) && w.size(2) == 2 && w.size(3) == 2,
              InvalidArgument, "ops::conv_transpose2x2_nhwc: x ", shape_str(x.shape()),
              " (NHWC) does not match weight ", shape_str(w.shape()), " ([Cin, Cout, 2, 2])");
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), Cin = x.size(3), Cout = w.size(1);
  if (bias) {
    check_input(*bias, "conv_transpose2x2_nhwc", "bias");
    bias->expect_shape({Cout}, "ops::conv_transpose2x2_nhwc bias");
  }
  Tensor out = Tensor::empty({B, 2 * H, 2 * W, Cout});
  cpu::conv_transpose2x2_nhwc(f32(x), f32(w), bias ? f32(*bias) : nullptr, f32(out), B, H, W, Cin, Cout);
  if (act == Activation::GELU) cpu::gelu(f32(out), out.numel());
  return out;
}

Tensor window_partition(const Tensor& x, int ws) {
  if (x.is_cuda()) return cuda_impl::window_partition(x, ws);
  check_input(x, "window_partition", "x");
  Tensor out = Tensor::empty(window_partition_shape(x, ws));
  cpu::window_partition(f32(x), f32(out), x.size(0), x.size(1), x.size(2), x.size(3), ws);
  return out;
}

Tensor window_unpartition(const Tensor& windows, int ws, int64_t H, int64_t W) {
  if (windows.is_cuda()) return cuda_impl::window_unpartition(windows, ws, H, W);
  check_input(windows, "window_unpartition", "windows");
  Tensor out = Tensor::empty(window_unpartition_shape(windows, ws, H, W));
  cpu::window_unpartition(f32(windows), f32(out), out.size(0), H, W, out.size(3), ws);
  return out;
}

Tensor attention_relpos(const Tensor& qkv, int num_heads, int64_t H, int64_t W, const Tensor* rel_pos_h,
                        const Tensor* rel_pos_w) {
#ifdef VITRT_HAVE_CUDA
  if (qkv.is_cuda()) {
    VITRT_PROFILE_OP("attention_relpos global ", shape_str(qkv.shape()), " heads ", num_heads);
    return cuda_impl::attention_relpos(qkv, num_heads, H, W, rel_pos_h, rel_pos_w);
  }
#endif
  check_input(qkv, "attention_relpos", "qkv");
  VITRT_CHECK(qkv.dim() == 3 && H >= 1 && W >= 1 && qkv.size(1) == H * W && qkv.size(2) % 3 == 0 && num_heads >= 1,
              InvalidArgument, "ops::attention_relpos: qkv ", shape_str(qkv.shape()), " is not [B, ", H, "*", W,
              ", 3*C]");
  const int64_t B = qkv.size(0), C = qkv.size(2) / 3;
  VITRT_CHECK(C % num_heads == 0 && C > 0, InvalidArgument, "ops::attention_relpos: C = ", C,
              " is not divisible by ", num_heads, " heads");
  const int64_t hd = C / num_heads;
  VITRT_CHECK((rel_pos_h == nullptr) == (rel_pos_w == nullptr), InvalidArgument,
              "ops::attention_relpos: give both rel_pos_h and rel_pos_w, or neither");
  Tensor rh, rw;
  if (rel_pos_h) {
    check_input(*rel_pos_h, "attention_relpos", "rel_pos_h");
    check_input(*rel_pos_w, "attention_relpos", "rel_pos_w");
    VITRT_CHECK(rel_pos_h->dim() == 2 && rel_pos_h->size(1) == hd && rel_pos_h->size(0) >= 1 &&
                    rel_pos_w->dim() == 2 && rel_pos_w->size(1) == hd && rel_pos_w->size(0) >= 1,
                InvalidArgument, "ops::attention_relpos: rel_pos tables ", shape_str(rel_pos_h->shape()), " / ",
                shape_str(rel_pos_w->shape()), " must be [L, ", hd, "]");
    rh = rel_pos_for(*rel_pos_h, H);
    rw = rel_pos_for(*rel_pos_w, W);
  }
  Tensor out = Tensor::empty({B, H * W, C});
  cpu::attention_relpos(f32(qkv), f32(out), B, H, W, num_heads, hd, rel_pos_h ? f32(rh) : nullptr,
                        rel_pos_h ? f32(rw) : nullptr);
  return out;
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads) {
#ifdef VITRT_HAVE_CUDA
  if (q.is_cuda()) {
    VITRT_PROFILE_OP("attention ", shape_str(q.shape()), "x", shape_str(k.shape()));
    return cuda_impl::attention(q, k, v, num_heads);
  }
#endif
  check_input(q, "attention", "q");
  check_input(k, "attention", "k");
  check_input(v, "attention", "v");
  check_attention_shapes(q, k, v, num_heads);
  const int64_t B = k.size(0), Nq = q.size(1), Nk = k.size(1), D = q.size(2);
  Tensor out = Tensor::empty({B, Nq, D});
  if (q.size(0) == B) {
    cpu::attention(f32(q), f32(k), f32(v), f32(out), B, Nq, Nk, D, num_heads);
  } else {  // one q for every key sequence
    for (int64_t b = 0; b < B; ++b)
      cpu::attention(f32(q), f32(k) + b * Nk * D, f32(v) + b * Nk * D, f32(out) + b * Nq * D, 1, Nq, Nk, D,
                     num_heads);
  }
  return out;
}

void check_attention_shapes(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads) {
  VITRT_CHECK(q.dim() == 3 && k.dim() == 3 && v.shape() == k.shape() && (q.size(0) == k.size(0) || q.size(0) == 1) &&
                  q.size(2) == k.size(2) && num_heads >= 1 && q.size(2) % num_heads == 0,
              InvalidArgument, "ops::attention: q ", shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ",
              shape_str(v.shape()), " with ", num_heads, " heads do not match");
}

Tensor attention_packed_kv(const Tensor& q, const Tensor& kv, int num_heads) {
#ifdef VITRT_HAVE_CUDA
  if (q.is_cuda()) {
    VITRT_PROFILE_OP("attention ", shape_str(q.shape()), "x", shape_str(kv.shape()), " (packed kv)");
    return cuda_impl::attention_packed_kv(q, kv, num_heads);
  }
#endif
  VITRT_CHECK(q.dim() == 3 && kv.dim() == 3 && kv.size(2) == 2 * q.size(2), InvalidArgument,
              "ops::attention_packed_kv: q ", shape_str(q.shape()), " and kv ", shape_str(kv.shape()),
              " do not match (kv [B, Nk, 2D])");
  const int64_t D = q.size(2);
  return attention(q, narrow(kv, 2, 0, D), narrow(kv, 2, D, D), num_heads);
}

Tensor attention_packed_qkv(const Tensor& qkv, int num_heads) {
  VITRT_CHECK(qkv.dim() == 3 && qkv.size(1) >= 1 && qkv.size(2) % 3 == 0 && num_heads >= 1 &&
                  (qkv.size(2) / 3) % num_heads == 0,
              InvalidArgument, "ops::attention_packed_qkv: qkv ", shape_str(qkv.shape()), " with ", num_heads,
              " heads is not [B, N, 3D] with D divisible by the heads");
  // attention_relpos without rel-pos tables is exactly this: its (3, heads, head_dim) layout is
  // [q | k | v]; the N tokens as an N x 1 grid (the grid shape only matters for the tables).
  const int64_t N = qkv.size(1);
#ifdef VITRT_HAVE_CUDA
  if (qkv.is_cuda()) {
    VITRT_PROFILE_OP("attention ", shape_str(qkv.shape()), " (packed qkv) heads ", num_heads);
    return cuda_impl::attention_relpos(qkv, num_heads, N, 1, nullptr, nullptr);
  }
#endif
  return attention_relpos(qkv, num_heads, N, 1, nullptr, nullptr);
}

Tensor interpolate_linear_rows(const Tensor& x, int64_t new_len) {
  if (x.is_cuda()) return cuda_impl::interpolate_linear_rows(x, new_len);
  check_input(x, "interpolate_linear_rows", "x");
  Tensor out = Tensor::empty(interpolate_linear_rows_shape(x, new_len));
  cpu::interpolate_linear_rows(f32(x), f32(out), x.size(0), x.size(1), new_len);
  return out;
}

Tensor resize_bilinear(const Tensor& x, int64_t out_h, int64_t out_w) {
  if (x.is_cuda()) return cuda_impl::resize_bilinear(x, out_h, out_w);
  check_input(x, "resize_bilinear", "x");
  Tensor out = Tensor::empty(resize_bilinear_shape(x, out_h, out_w));
  const int64_t H = x.size(-2), W = x.size(-1), N = x.numel() / (H * W);
  cpu::resize_bilinear(f32(x), f32(out), N, H, W, out_h, out_w);
  return out;
}

}  // namespace vitrt::ops
