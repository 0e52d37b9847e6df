// ops::linear_bsr: argument checks and dispatch for the block-sparse linear.
#include "ops/cpu/bsr_gemm.h"
#include "ops/ops.h"

namespace vitrt::ops {

Tensor linear_bsr(const Tensor& x, const BsrMatrix& w, const Tensor* bias, Activation act) {
  VITRT_CHECK(x.defined(), InvalidArgument, "ops::linear_bsr: x is an undefined tensor");
  VITRT_CHECK(!x.is_cuda(), Error,
              "ops::linear_bsr: block-sparse linear on CUDA tensors is not implemented yet (CPU only)");
  VITRT_CHECK(x.dtype() == DType::F32, InvalidArgument, "ops::linear_bsr: x must be float32, got ",
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
  Tensor y = Tensor::empty(out_shape);
  const cpu::Act a = act == Activation::GELU   ? cpu::Act::GELU
                     : act == Activation::ReLU ? cpu::Act::ReLU
                                               : cpu::Act::None;
  cpu::bsr_linear(x.data<float>(), w, bias ? bias->data<float>() : nullptr, a, y.data<float>(), M);
  return y;
}

}  // namespace vitrt::ops
