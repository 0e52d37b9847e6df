// ops::linear_bsr: argument checks and dispatch for the block-sparse linear.
#include <algorithm>

#include "ops/cpu/bsr_gemm.h"
#include "ops/op_profiler.h"
#include "ops/ops.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/cuda/bsr_gemm.h"
#endif

namespace vitrt::ops {

namespace {

Tensor linear_bsr_cpu(const Tensor& x, const BsrMatrix& w, const Tensor* bias, Activation act,
                      const Tensor* residual) {
  VITRT_CHECK(x.dtype() == DType::F32, InvalidArgument, "ops::linear_bsr: x must be float32 on the CPU, got ",
              dtype_name(x.dtype()));
  validate(w, "ops::linear_bsr weight");
  VITRT_CHECK(x.dim() >= 1 && x.size(-1) == w.cols, InvalidArgument, "ops::linear_bsr: x ", shape_str(x.shape()),
              " does not match the BSR weight [", w.rows, ", ", w.cols, "] (expected [..., ", w.cols, "])");
  if (bias) {
    VITRT_CHECK(bias->defined() && !bias->is_cuda() && bias->dtype() == DType::F32, InvalidArgument,
                "ops::linear_bsr: bias must be a float32 host tensor");
    bias->expect_shape({w.rows}, "ops::linear_bsr bias");
  }
  const int64_t M = x.numel() / w.cols;
  Shape out_shape = x.shape();
  out_shape.back() = w.rows;
  if (residual) {
    VITRT_CHECK(residual->defined() && !residual->is_cuda() && residual->dtype() == DType::F32, InvalidArgument,
                "ops::linear_bsr: residual must be a float32 host tensor");
    residual->expect_shape(out_shape, "ops::linear_bsr residual");
  }
  Tensor y = Tensor::empty(out_shape);
  const cpu::Act a = act == Activation::GELU   ? cpu::Act::GELU
                     : act == Activation::ReLU ? cpu::Act::ReLU
                                               : cpu::Act::None;
  cpu::bsr_linear(x.data<float>(), w, bias ? bias->data<float>() : nullptr, a, y.data<float>(), M);
  if (residual) add_(y, *residual);
  return y;
}

Tensor linear_bsr_cuda(const Tensor& x, const BsrMatrix& w, const Tensor* bias, Activation act,
                       const Tensor* residual) {
#ifndef VITRT_HAVE_CUDA
  (void)x, (void)w, (void)bias, (void)act, (void)residual;
  throw Error("ops::linear_bsr: this vitrt build has no CUDA backend (built without nvcc)");
#else
  const DType dt = x.dtype();
  VITRT_CHECK(dt == DType::F32 || dt == DType::BF16, InvalidArgument,
              "ops::linear_bsr: a CUDA x must be float32 or bfloat16, got ", dtype_name(dt));
  VITRT_CHECK(w.on_cuda(), InvalidArgument,
              "ops::linear_bsr: x is a CUDA tensor but the BSR weight has no device copy (upload it once with "
              "bsr_to_cuda(weight, ",
              dtype_name(dt), "))");
  // Cheap consistency checks only: the full validate() ran in bsr_to_cuda.
  VITRT_CHECK(w.cuda.values.dtype() == dt, InvalidArgument, "ops::linear_bsr: the BSR weight was uploaded as ",
              dtype_name(w.cuda.values.dtype()), " but x is ", dtype_name(dt),
              " (CUDA operators take one dtype per call)");
  VITRT_CHECK(is_supported_bsr_block(w.block) && w.rows > 0 && w.cols > 0 && w.rows % w.block == 0 &&
                  w.cols % w.block == 0 && w.cuda.row_ptr.numel() == w.block_rows() + 1 &&
                  w.cuda.row_order.numel() == w.block_rows() &&
                  w.cuda.values.numel() == w.cuda.col_idx.numel() * w.block * w.block,
              InvalidArgument, "ops::linear_bsr: the BSR weight's device arrays do not match its shape [", w.rows,
              ", ", w.cols, "] and block ", w.block);
  VITRT_CHECK(x.dim() >= 1 && x.size(-1) == w.cols, InvalidArgument, "ops::linear_bsr: x ", shape_str(x.shape()),
              " does not match the BSR weight [", w.rows, ", ", w.cols, "] (expected [..., ", w.cols, "])");
  VITRT_CHECK(act == Activation::None || act == Activation::GELU, InvalidArgument,
              "ops::linear_bsr: the CUDA block-sparse kernels fuse no activation or GELU only (ReLU is CPU only)");
  const int64_t M = x.numel() / w.cols;
  Shape out_shape = x.shape();
  out_shape.back() = w.rows;
  auto check_operand = [&](const Tensor& t, const char* name) {
    VITRT_CHECK(t.defined() && t.is_cuda() && t.dtype() == dt, InvalidArgument, "ops::linear_bsr: ", name,
                " must be a CUDA tensor of x's dtype ", dtype_name(dt));
  };
  if (bias) {
    check_operand(*bias, "bias");
    bias->expect_shape({w.rows}, "ops::linear_bsr bias");
  }
  if (residual) {
    check_operand(*residual, "residual");
    residual->expect_shape(out_shape, "ops::linear_bsr residual");
  }
  Tensor y = Tensor::empty(out_shape, dt, Device::CUDA);
  const cuda::BsrDeviceView view = cuda::device_view(w);  // with nnz: the bf16 variant heuristic reads the density
  const bool gelu = act == Activation::GELU;
  if (dt == DType::BF16)  // variant: VITRT_BSR_TC_CONFIG or cuda::choose_bsr_tc_config
    cuda::bsr_linear_bf16(x.raw(), M, view, bias ? bias->raw() : nullptr, gelu, residual ? residual->raw() : nullptr,
                          DType::BF16, y.raw());
  else
    cuda::bsr_linear_f32(x.data<float>(), M, view, bias ? bias->data<float>() : nullptr, gelu,
                         residual ? residual->data<float>() : nullptr, y.data<float>());
  return y;
#endif
}

}  // namespace

Tensor linear_bsr(const Tensor& x, const BsrMatrix& w, const Tensor* bias, Activation act, const Tensor* residual) {
  VITRT_CHECK(x.defined(), InvalidArgument, "ops::linear_bsr: x is an undefined tensor");
  if (x.is_cuda()) {
    // Labelled like ops::linear (M x N x K) so dense and sparse profiles line up; nnz varies per layer.
    VITRT_PROFILE_OP("linear_bsr ", x.numel() / std::max<int64_t>(1, x.size(-1)), "x", w.rows, "x", w.cols, " b",
                     w.block, act == Activation::GELU ? " +gelu" : "", residual ? " +res" : "");
    return linear_bsr_cuda(x, w, bias, act, residual);
  }
  return linear_bsr_cpu(x, w, bias, act, residual);
}

}  // namespace vitrt::ops
