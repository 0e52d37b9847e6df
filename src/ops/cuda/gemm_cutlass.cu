// CUTLASS GEMMs with a bias, and the exact GELU or a residual (gemm_cutlass.h). Compiled with the
// CUTLASS headers when CMake finds them (VITRT_HAVE_CUTLASS, scripts/fetch-cutlass.sh); otherwise
// the entry points decline.
//
// NDEBUG before CUTLASS: its device-side asserts are function calls, and a call inside the kernel
// makes ptxas serialise every wgmma (C7510), whatever the build type.
#ifndef NDEBUG
#define NDEBUG
#endif
#include "ops/cuda/gemm_cutlass.h"

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "ops/cuda/runtime.h"
#include "vitrt/error.h"

#if VITRT_HAVE_CUTLASS
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "ops/cuda/fast_erf.h"
#endif

namespace vitrt::cuda {

#if VITRT_HAVE_CUTLASS
namespace {

// The GELU of the fused epilogue: 0.5 x (1 + erf(x / sqrt 2)) with fast_erf's branch-free erf
// (within 2e-6 of the exact GELU; CUTLASS's own GELU calls erff). Scalar and fragment forms, as
// CUTLASS's activations.
template <class T>
struct ErfGelu {
  CUTLASS_HOST_DEVICE T operator()(T const& x) const { return T(fast_erf::gelu(float(x))); }
};
template <class T, int N>
struct ErfGelu<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(fast_erf::gelu(float(x[i])));
    return y;
  }
};

using namespace cute;
using Bf16 = cutlass::bfloat16_t;
using BiasGelu = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<ErfGelu, Bf16, float, Bf16, void, float>;
using BiasOnly = cutlass::epilogue::fusion::LinCombPerColBias<Bf16, float, Bf16, void, float>;
// fp32 D = A W^T + bias + C (the residual stream; C may be D itself), fp32 bias.
using BiasResidualF32 = cutlass::epilogue::fusion::LinCombPerColBias<float, float, float, float, float>;

// One CUTLASS GEMM: A row-major [M, K] bf16, the weight [N, K] bf16 as CUTLASS's column-major B, C (or
// none: void) and D row-major, one CTA per cluster, `TileShapeMNK` tiles, the kernel / epilogue
// schedules and the epilogue's fusion given.
template <class TileShapeMNK, class KernelSchedule, class EpilogueSchedule, class Fusion, class ElementC, class ElementD>
struct GemmOf {
  using ClusterShapeMNK = Shape<_1, _1, _1>;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShapeMNK, ClusterShapeMNK,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, cutlass::layout::RowMajor, kAlignD,
      ElementD, cutlass::layout::RowMajor, kAlignD, EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, cutlass::layout::RowMajor, 8, Bf16,
      cutlass::layout::ColumnMajor, 8, float, TileShapeMNK, ClusterShapeMNK,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using C = ElementC;
  using D = ElementD;
  using Bias = typename Fusion::ElementBias;
};
// Cooperative: both consumer warpgroups on one 128 x 256 tile. Ping-pong: each warpgroup on its own
// 128 x 128 tile, one's epilogue (the GELU) while the other runs its mainloop.
template <class Fusion, class ElementC, class ElementD>
using CooperativeGemm = GemmOf<Shape<_128, _256, _64>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion, ElementC, ElementD>;
template <class Fusion, class ElementC, class ElementD>
using PingpongGemm = GemmOf<Shape<_128, _128, _64>, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                            cutlass::epilogue::TmaWarpSpecialized, Fusion, ElementC, ElementD>;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// D = A W^T + bias (+ C when c is given, beta = 1), on G's kernel; false if CUTLASS declines.
template <class G>
bool run(const void* a, const void* w, const void* bias, const void* c, void* d, int m, int n, int k, void* workspace,
         size_t workspace_bytes, cudaStream_t stream) {
  using Gemm = typename G::Gemm;
  using StrideA = typename G::Kernel::StrideA;
  using StrideB = typename G::Kernel::StrideB;
  using StrideC = typename G::Kernel::StrideC;
  using StrideD = typename G::Kernel::StrideD;
  using CPtr = std::conditional_t<std::is_void_v<typename G::C>, const void*, const typename G::C*>;
  const StrideA sa = cutlass::make_cute_packed_stride(StrideA{}, make_shape(m, k, 1));
  const StrideB sb = cutlass::make_cute_packed_stride(StrideB{}, make_shape(n, k, 1));
  const StrideC sc = cutlass::make_cute_packed_stride(StrideC{}, make_shape(m, n, 1));
  const StrideD sd = cutlass::make_cute_packed_stride(StrideD{}, make_shape(m, n, 1));
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {m, n, k, 1},
                                {static_cast<const Bf16*>(a), sa, static_cast<const Bf16*>(w), sb},
                                {{}, static_cast<CPtr>(c), sc, static_cast<typename G::D*>(d), sd}};
  args.epilogue.thread.alpha = 1.f;
  args.epilogue.thread.beta = c ? 1.f : 0.f;
  args.epilogue.thread.bias_ptr = static_cast<const typename G::Bias*>(bias);
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
  if (Gemm::get_workspace_size(args) > workspace_bytes) return false;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return false;
  const cutlass::Status s = gemm.run(stream);
  check(cudaGetLastError(), "CUTLASS GEMM launch");
  if (s != cutlass::Status::kSuccess) throw Error("CUTLASS GEMM failed to launch after initialising");
  return true;
}

bool applies(const void* a, const void* w, const void* bias, const void* c, const void* d, int64_t M, int64_t N,
             int64_t K) {
  return device_is_sm90() && M > 0 && N % 8 == 0 && K % 8 == 0 && M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX &&
         aligned16(a) && aligned16(w) && aligned16(bias) && (!c || aligned16(c)) && aligned16(d);
}

}  // namespace

bool cutlass_gemm_built() { return true; }

bool cutlass_gemm_bias_bf16(const void* a, const void* w, const void* bias, void* d, int64_t M, int64_t N, int64_t K,
                            bool gelu, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                            CutlassSchedule schedule) {
  if (!applies(a, w, bias, nullptr, d, M, N, K)) return false;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const bool pp = schedule == CutlassSchedule::Pingpong;
  if (gelu)
    return pp ? run<PingpongGemm<BiasGelu, void, Bf16>>(a, w, bias, nullptr, d, m, n, k, workspace, workspace_bytes, stream)
              : run<CooperativeGemm<BiasGelu, void, Bf16>>(a, w, bias, nullptr, d, m, n, k, workspace, workspace_bytes,
                                                           stream);
  return pp ? run<PingpongGemm<BiasOnly, void, Bf16>>(a, w, bias, nullptr, d, m, n, k, workspace, workspace_bytes, stream)
            : run<CooperativeGemm<BiasOnly, void, Bf16>>(a, w, bias, nullptr, d, m, n, k, workspace, workspace_bytes,
                                                         stream);
}

bool cutlass_gemm_bias_residual_f32(const void* a, const void* w, const void* bias, const void* c, void* d, int64_t M,
                                    int64_t N, int64_t K, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                    CutlassSchedule schedule) {
  if (!c || !applies(a, w, bias, c, d, M, N, K)) return false;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  return schedule == CutlassSchedule::Pingpong
             ? run<PingpongGemm<BiasResidualF32, float, float>>(a, w, bias, c, d, m, n, k, workspace, workspace_bytes,
                                                                stream)
             : run<CooperativeGemm<BiasResidualF32, float, float>>(a, w, bias, c, d, m, n, k, workspace,
                                                                   workspace_bytes, stream);
}

#else

bool cutlass_gemm_built() { return false; }

bool cutlass_gemm_bias_bf16(const void*, const void*, const void*, void*, int64_t, int64_t, int64_t, bool, void*, size_t,
                            cudaStream_t, CutlassSchedule) {
  return false;
}

bool cutlass_gemm_bias_residual_f32(const void*, const void*, const void*, const void*, void*, int64_t, int64_t, int64_t,
                                    void*, size_t, cudaStream_t, CutlassSchedule) {
  return false;
}

#endif

}  // namespace vitrt::cuda
