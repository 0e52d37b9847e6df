// ops::mlp_bsr: a block-sparse MLP pair, fused on Hopper (ops/cuda/bsr_mlp_fused.cu) or as two
// block-sparse linears.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/bsr_mlp_schedule.h"
#include "ops/op_profiler.h"
#include "ops/ops.h"

#ifdef VITRT_HAVE_CUDA
#include "ops/bsr_mlp_device_schedule.h"
#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/env_choice.h"
#endif

namespace vitrt::ops {

namespace {
#ifdef VITRT_HAVE_CUDA
// VITRT_BSR_MLP_FUSED: "0" never, "1" wherever a plan exists; unset ("auto"): where measured faster
// than the two linears (BENCHMARKS.md, 2026-12-04 20:22 session, call 1; the streamed form, bf16,
// M = 50432, 64-blocks, ms fused / two linears): D = 384 (ViT-S) 0.127 / 0.156 at 80% sparsity, 0.087 /
// 0.132 at 90%, 0.069 / 0.117 at 95%; D = 768 (ViT-B) 0.459 / 0.384 at 80%, 0.241 / 0.302 at 90%,
// 0.159 / 0.251 at 95%. So: D <= 384, or both weights at most 12.5% dense (between the ViT-B points at
// 10% and 20%; D = 1024, ViT-L, which the streamed forms take too, was never timed: not fused unless
// asked); and only where the fused kernel's units of work (a tile of tokens and one fc2
// block-row) give every SM one: ViT-B/16 batch 11 and up on an H200. Below that the two linears, whose
// grids split the work finer, keep more of the GPU busy (not measured: small batches were never timed
// with the fused kernel). Read once.
cuda::KernelMode fused_mode() {
  static const cuda::KernelMode m = cuda::kernel_mode_from_env("VITRT_BSR_MLP_FUSED");
  return m;
}
bool fused_selected(const BsrMatrix& fc1, const BsrMatrix& fc2, int64_t M) {
  const cuda::KernelMode m = fused_mode();
  if (m != cuda::KernelMode::Auto) return m == cuda::KernelMode::On;
  return (fc1.cols <= 384 || (fc1.cols <= 768 && std::max(fc1.density(), fc2.density()) <= 0.125)) &&
         cuda::bsr_mlp_fused_fills_gpu(M, static_cast<int>(fc2.rows / fc2.block));
}

Tensor i32_on_cuda(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int32_t));
  return t.to(Device::CUDA);
}
#endif
}  // namespace

std::shared_ptr<const BsrMlpPlan> plan_bsr_mlp(const BsrMatrix& fc1, const BsrMatrix& fc2, DType dtype) {
#ifdef VITRT_HAVE_CUDA
  if (dtype != DType::BF16 || !fc1.on_cuda() || !fc2.on_cuda()) return nullptr;
  if (fc1.cuda.values.dtype() != DType::BF16 || fc2.cuda.values.dtype() != DType::BF16) return nullptr;
  const cuda::BsrDeviceView v1 = cuda::device_view(fc1), v2 = cuda::device_view(fc2);
  if (!cuda::bsr_mlp_fused_supported(v1, v2)) return nullptr;  // (before building a schedule for nothing)
  const BsrMlpSchedule s = make_bsr_mlp_schedule(fc1, fc2);
  if (!cuda::bsr_mlp_fused_supported(v1, v2, static_cast<int64_t>(s.words.size())))
    return nullptr;  // (its schedule does not fit shared memory: a low sparsity, where fusing does not pay)
  auto plan = std::make_shared<BsrMlpPlan>();
  plan->words = i32_on_cuda(s.words.empty() ? std::vector<int32_t>{0} : s.words);
  plan->group_begin = i32_on_cuda(s.group_begin);
  plan->group_begin_host = s.group_begin;
  plan->groups = s.groups;
  plan->k_mask = s.k_mask;
  plan->words_count = static_cast<int64_t>(s.words.size());
  return plan;
#else
  (void)fc1, (void)fc2, (void)dtype;
  return nullptr;
#endif
}

bool mlp_bsr_fused_for(const BsrMatrix& fc1, const BsrMatrix& fc2, int64_t tokens, const BsrMlpPlan* plan) {
#ifdef VITRT_HAVE_CUDA
  return plan != nullptr && fused_selected(fc1, fc2, tokens);
#else
  (void)fc1, (void)fc2, (void)tokens, (void)plan;
  return false;
#endif
}

Tensor mlp_bsr(const Tensor& x, const BsrMatrix& fc1, const Tensor& b1, const BsrMatrix& fc2, const Tensor& b2,
               const Tensor& residual, const BsrMlpPlan* plan) {
#ifdef VITRT_HAVE_CUDA
  const int64_t M = x.numel() / std::max<int64_t>(1, fc1.cols);  // tokens (x is checked below when fused)
  if (x.is_cuda() && mlp_bsr_fused_for(fc1, fc2, M, plan)) {
    constexpr const char* kOp = "ops::mlp_bsr";
    VITRT_CHECK(x.dtype() == DType::BF16 && x.dim() >= 1 && x.size(-1) == fc1.cols,
                InvalidArgument, kOp, ": x must be a bf16 [..., ", fc1.cols, "] tensor, got ",
                dtype_name(x.dtype()), " ", shape_str(x.shape()));
    Shape out_shape = x.shape();
    out_shape.back() = fc2.rows;
    for (const Tensor* t : {&b1, &b2, &residual})
      VITRT_CHECK(t->defined() && t->is_cuda() && t->dtype() == DType::BF16, InvalidArgument,
                  kOp, ": biases and residual must be bf16 CUDA tensors");
    b1.expect_shape({fc1.rows}, "ops::mlp_bsr b1");
    b2.expect_shape({fc2.rows}, "ops::mlp_bsr b2");
    residual.expect_shape(out_shape, "ops::mlp_bsr residual");
    VITRT_PROFILE_OP("mlp_bsr_fused ", M, "x", fc1.rows, "x", fc1.cols, " b", fc1.block);
    Tensor y = Tensor::empty(out_shape, DType::BF16, Device::CUDA);
    const cuda::BsrMlpDeviceSchedule s = bsr_mlp_device_schedule(*plan);
    cuda::bsr_mlp_bf16_fused(x.raw(), M, cuda::device_view(fc1), b1.raw(), cuda::device_view(fc2), b2.raw(), s,
                             residual.raw(), y.raw());
    return y;
  }
#else
  (void)plan;
#endif
  const Tensor h = linear_bsr(x, fc1, &b1, Activation::GELU);
  return linear_bsr(h, fc2, &b2, Activation::None, &residual);
}

}  // namespace vitrt::ops
