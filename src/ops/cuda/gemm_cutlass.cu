// The entry points of gemm_cutlass.h: argument checks and the choice of kernel family. The kernels
// are instantiated in gemm_cutlass_{gelu,bias,residual}.cu (gemm_cutlass_kernel.cuh), compiled with
// the CUTLASS headers when CMake finds them (VITRT_HAVE_CUTLASS, scripts/fetch-cutlass.sh); without
// them every entry point declines.
#include "ops/cuda/gemm_cutlass.h"

#include <cstdint>

#include "ops/cuda/runtime.h"

#if VITRT_HAVE_CUTLASS
#include "ops/cuda/gemm_cutlass_kernel.cuh"
#endif

namespace vitrt::cuda {

bool parse_cutlass_config(const std::string& s, CutlassConfig* out) {
  CutlassConfig c;
  std::string base = s;
  if (base.size() > 3 && base.compare(base.size() - 3, 3, "-c2") == 0) c.cluster_m = 2, base.resize(base.size() - 3);
  if (base == "pingpong") c.schedule = CutlassSchedule::Pingpong;
  else if (base == "cooperative" || s == "1") c.schedule = CutlassSchedule::Cooperative;
  else return false;
  *out = c;
  return true;
}

std::string to_string(const CutlassConfig& c) {
  return std::string(c.schedule == CutlassSchedule::Pingpong ? "pingpong" : "cooperative") +
         (c.cluster_m == 2 ? "-c2" : "");
}

#if VITRT_HAVE_CUTLASS
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

bool applies(const void* a, const void* w, const void* bias, const void* c, const void* d, int64_t M, int64_t N,
             int64_t K) {
  return device_is_sm90() && M > 0 && N % 8 == 0 && K % 8 == 0 && M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX &&
         aligned16(a) && aligned16(w) && aligned16(bias) && (!c || aligned16(c)) && aligned16(d);
}

}  // namespace

bool cutlass_gemm_built() { return true; }

bool cutlass_gemm_bias_bf16(const void* a, const void* w, const void* bias, void* d, int64_t M, int64_t N, int64_t K,
                            bool gelu, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                            CutlassConfig config) {
  if (!applies(a, w, bias, nullptr, d, M, N, K)) return false;
  const cutlass_impl::Problem p{a, w, bias, nullptr, d, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                                workspace, workspace_bytes, stream};
  return gelu ? cutlass_impl::run_bias_gelu_bf16(p, config) : cutlass_impl::run_bias_bf16(p, config);
}

bool cutlass_gemm_bias_residual_f32(const void* a, const void* w, const void* bias, const void* c, void* d, int64_t M,
                                    int64_t N, int64_t K, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                    CutlassConfig config) {
  if (!c || !applies(a, w, bias, c, d, M, N, K)) return false;
  const cutlass_impl::Problem p{a, w, bias, c, d, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                                workspace, workspace_bytes, stream};
  return cutlass_impl::run_bias_residual_f32(p, config);
}

#else

bool cutlass_gemm_built() { return false; }

bool cutlass_gemm_bias_bf16(const void*, const void*, const void*, void*, int64_t, int64_t, int64_t, bool, void*, size_t,
                            cudaStream_t, CutlassConfig) {
  return false;
}

bool cutlass_gemm_bias_residual_f32(const void*, const void*, const void*, const void*, void*, int64_t, int64_t, int64_t,
                                    void*, size_t, cudaStream_t, CutlassConfig) {
  return false;
}

#endif

}  // namespace vitrt::cuda
