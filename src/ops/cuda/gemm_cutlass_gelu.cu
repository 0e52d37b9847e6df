// CUTLASS kernels: bf16 D = GELU(A W^T + bias) (the MLP's first linear), every config
// (gemm_cutlass_kernel.cuh). Empty without the CUTLASS headers.
#if VITRT_HAVE_CUTLASS
#include "ops/cuda/gemm_cutlass_kernel.cuh"

namespace vitrt::cuda::cutlass_impl {
bool run_bias_gelu_bf16(const Problem& p, CutlassConfig cfg) { return run_config<BiasGelu, void, Bf16>(p, cfg); }
}  // namespace vitrt::cuda::cutlass_impl
#endif
