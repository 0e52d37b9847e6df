// CUTLASS kernels: fp32 D = A W^T + bias + C (the residual adds into the encoder's fp32 stream),
// clusters of 1 only (gemm_cutlass_kernel.cuh). Empty without the CUTLASS headers.
#if VITRT_HAVE_CUTLASS
#include "ops/cuda/gemm_cutlass_kernel.cuh"

namespace vitrt::cuda::cutlass_impl {
bool run_bias_residual_f32(const Problem& p, CutlassConfig cfg) {
  if (cfg.cluster_m != 1) return false;
  return cfg.schedule == CutlassSchedule::Pingpong ? run<PingpongGemm<1, BiasResidualF32, float, float>>(p)
                                                   : run<CooperativeGemm<1, BiasResidualF32, float, float>>(p);
}
}  // namespace vitrt::cuda::cutlass_impl
#endif
