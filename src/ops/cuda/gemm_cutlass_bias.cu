// CUTLASS kernels: bf16 D = A W^T + bias (qkv and the other bias-only products), every config
// (gemm_cutlass_kernel.cuh). Empty without the CUTLASS headers.
#if VITRT_HAVE_CUTLASS
#include "ops/cuda/gemm_cutlass_kernel.cuh"

namespace vitrt::cuda::cutlass_impl {
bool run_bias_bf16(const Problem& p, CutlassConfig cfg) { return run_config<BiasOnly, void, Bf16>(p, cfg); }
}  // namespace vitrt::cuda::cutlass_impl
#endif
