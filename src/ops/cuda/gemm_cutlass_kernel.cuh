// The CUTLASS GEMM template behind gemm_cutlass.h, included only by gemm_cutlass_{gelu,bias,residual}.cu
// (each instantiates one epilogue family) when CMake found the CUTLASS headers (VITRT_HAVE_CUTLASS).
//
// NDEBUG before CUTLASS: its device-side asserts are function calls, and a call inside the kernel
// makes ptxas serialise every wgmma (C7510), whatever the build type.
#pragma once
#ifndef NDEBUG
#define NDEBUG
#endif
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "ops/cuda/gemm_cutlass.h"
#include "ops/cuda/runtime.h"
#include "vitrt/error.h"

namespace vitrt::cuda::cutlass_impl {

using namespace cute;
using Bf16 = cutlass::bfloat16_t;

// The epilogue's GELU: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), the tanh by the hardware's
// tanh.approx on the device (what cuBLASLt's GELU epilogue and the bf16 block-sparse kernels compute:
// six instructions and one MUFU op). Scalar and fragment forms, as CUTLASS's activations.
CUTLASS_HOST_DEVICE float gelu_tanh(float x) {
  const float u = x * (0.7978845608f + 0.0356774081f * x * x);
#ifdef __CUDA_ARCH__
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
#else
  const float t = std::tanh(u);
#endif
  const float hx = 0.5f * x;
  return hx + hx * t;
}
template <class T>
struct TanhGelu {
  CUTLASS_HOST_DEVICE T operator()(T const& x) const { return T(gelu_tanh(float(x))); }
};
template <class T, int N>
struct TanhGelu<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(gelu_tanh(float(x[i])));
    return y;
  }
};

using BiasGelu = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<TanhGelu, Bf16, float, Bf16, void, float>;
using BiasOnly = cutlass::epilogue::fusion::LinCombPerColBias<Bf16, float, Bf16, void, float>;
// fp32 D = A W^T + bias + C (the residual stream; C may be D itself), fp32 bias.
using BiasResidualF32 = cutlass::epilogue::fusion::LinCombPerColBias<float, float, float, float, float>;

// One CUTLASS GEMM: A row-major [M, K] bf16, the weight [N, K] bf16 as CUTLASS's column-major B, C (or
// none: void) and D row-major, clusters of ClusterM x 1 CTAs, `TileShapeMNK` tiles, the kernel /
// epilogue schedules and the epilogue's fusion given.
template <class TileShapeMNK, int ClusterM, class KernelSchedule, class EpilogueSchedule, class Fusion, class ElementC,
          class ElementD>
struct GemmOf {
  using ClusterShapeMNK = Shape<Int<ClusterM>, _1, _1>;
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
template <int ClusterM, class Fusion, class ElementC, class ElementD>
using CooperativeGemm = GemmOf<Shape<_128, _256, _64>, ClusterM, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion, ElementC, ElementD>;
template <int ClusterM, class Fusion, class ElementC, class ElementD>
using PingpongGemm = GemmOf<Shape<_128, _128, _64>, ClusterM, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                            cutlass::epilogue::TmaWarpSpecialized, Fusion, ElementC, ElementD>;

// The arguments every entry point receives (pointers already checked by applies()).
struct Problem {
  const void* a;
  const void* w;
  const void* bias;
  const void* c;  // null: none
  void* d;
  int m, n, k;
  void* workspace;
  size_t workspace_bytes;
  cudaStream_t stream;
};

// D = A W^T + bias (+ C when given, beta = 1), on G's kernel; false if CUTLASS declines.
template <class G>
bool run(const Problem& p) {
  using Gemm = typename G::Gemm;
  using StrideA = typename G::Kernel::StrideA;
  using StrideB = typename G::Kernel::StrideB;
  using StrideC = typename G::Kernel::StrideC;
  using StrideD = typename G::Kernel::StrideD;
  using CPtr = std::conditional_t<std::is_void_v<typename G::C>, const void*, const typename G::C*>;
  const StrideA sa = cutlass::make_cute_packed_stride(StrideA{}, make_shape(p.m, p.k, 1));
  const StrideB sb = cutlass::make_cute_packed_stride(StrideB{}, make_shape(p.n, p.k, 1));
  const StrideC sc = cutlass::make_cute_packed_stride(StrideC{}, make_shape(p.m, p.n, 1));
  const StrideD sd = cutlass::make_cute_packed_stride(StrideD{}, make_shape(p.m, p.n, 1));
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {p.m, p.n, p.k, 1},
                                {static_cast<const Bf16*>(p.a), sa, static_cast<const Bf16*>(p.w), sb},
                                {{}, static_cast<CPtr>(p.c), sc, static_cast<typename G::D*>(p.d), sd}};
  args.epilogue.thread.alpha = 1.f;
  args.epilogue.thread.beta = p.c ? 1.f : 0.f;
  args.epilogue.thread.bias_ptr = static_cast<const typename G::Bias*>(p.bias);
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
  if (Gemm::get_workspace_size(args) > p.workspace_bytes) return false;
  if (gemm.initialize(args, p.workspace, p.stream) != cutlass::Status::kSuccess) return false;
  const cutlass::Status s = gemm.run(p.stream);
  check(cudaGetLastError(), "CUTLASS GEMM launch");
  if (s != cutlass::Status::kSuccess) throw Error("CUTLASS GEMM failed to launch after initialising");
  return true;
}

// The config's kernel for one fusion (cluster 1 or 2 along M).
template <class Fusion, class ElementC, class ElementD>
bool run_config(const Problem& p, CutlassConfig cfg) {
  const bool pp = cfg.schedule == CutlassSchedule::Pingpong;
  if (cfg.cluster_m == 1)
    return pp ? run<PingpongGemm<1, Fusion, ElementC, ElementD>>(p) : run<CooperativeGemm<1, Fusion, ElementC, ElementD>>(p);
  if (cfg.cluster_m == 2)
    return pp ? run<PingpongGemm<2, Fusion, ElementC, ElementD>>(p) : run<CooperativeGemm<2, Fusion, ElementC, ElementD>>(p);
  return false;
}

// One per file (gemm_cutlass_{gelu,bias,residual}.cu).
bool run_bias_gelu_bf16(const Problem& p, CutlassConfig cfg);
bool run_bias_bf16(const Problem& p, CutlassConfig cfg);
bool run_bias_residual_f32(const Problem& p, CutlassConfig cfg);

}  // namespace vitrt::cuda::cutlass_impl
