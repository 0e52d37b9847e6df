// The CUDA block-sparse linear (ops::linear_bsr on CUDA tensors, ops/cuda/bsr_gemm.h) against the
// CPU reference (cpu::bsr_linear_reference: unpack to dense, oneDNN linear in fp32) on the same
// random inputs (normals, never zeros), and the block-sparse ViT on CUDA against the same model
// run dense on the folded weights.
//
// Coverage: block sizes 16 / 32 / 64; block-rows that are empty, full, a single block, first and
// last block only, and ~30% random; an all-empty and an all-full matrix; token counts 1, 63, 64,
// 65, 197, 1000 (partial and single 128-token tiles); bias, GELU and residual on and off; ViT-B MLP
// shapes at 90% block-magnitude sparsity; every bf16 kernel variant (cuda::BsrTcConfig) on ragged,
// empty and full matrices with token counts 1, 63, 197, 300; the Hopper x-resident and streamed
// kernels on their own (ragged / empty / full, several tiles per CTA; the streamed one with the
// residual, also in place).
// Tolerances, relative Frobenius error ||gpu - cpu|| / ||cpu||:
//   float32 (exact fp32 FMA, only the summation order differs):             1e-5
//   bfloat16 (inputs rounded to bf16 for both sides, fp32 accumulation,
//            the GPU output rounded to bf16: ~2^-9 relative per element):    1e-2
//   bf16 inputs with fp32 output (the raw kernel; no output rounding):       1e-4
//   ViT logits, sparse vs dense-folded on CUDA: fp32 1e-4, bf16 2e-2 (two bf16 pipelines whose
//   roundings differ op by op through the whole network); sparse CUDA vs sparse CPU fp32: fp32
//   1e-4, bf16 3e-2.
// Every test skips without the CUDA backend or a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "vit_test_util.h"
#include "models/vit/vit_model.h"
#include "ops/cpu/bsr_gemm.h"
#include "ops/ops.h"
#include "vitrt/bsr.h"
#include "vitrt/checkpoint.h"
#include "vitrt/supermask.h"
#include "vitrt/vit.h"

#ifdef VITRT_HAVE_CUDA
#include <cuda_runtime.h>

#include "ops/bsr_mlp_device_schedule.h"
#include "ops/cuda/bsr_gemm.h"
#include "ops/cuda/runtime.h"
#endif

namespace vitrt {
namespace {

constexpr double kTolF32 = 1e-5;
constexpr double kTolBF16 = 1e-2;

class CudaBsr : public test::CudaTest {};

#ifdef VITRT_HAVE_CUDA

// Host tensor of random normals in `dt` (F32, or BF16 rounded from the normals).
Tensor random_tensor(const Shape& shape, DType dt, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  Tensor t = Tensor::empty(shape, dt);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = d(rng);
    if (dt == DType::BF16) t.data<uint16_t>()[i] = f32_to_bf16(v);
    else t.data<float>()[i] = v;
  }
  return t;
}

// Which blocks of an [N, K] weight are stored.
enum class Pattern { Ragged, Empty, Full, Sparse };

// Block mask [N/b, K/b] (U8). Ragged: block-rows cycle through empty, full, one block, first and
// last block, ~30% random -- every kind of block-row the kernel schedules.
Tensor block_mask(int64_t N, int64_t K, int b, Pattern pattern, uint32_t seed) {
  const int64_t br_n = N / b, bc_n = K / b;
  Tensor mask = Tensor::zeros({br_n, bc_n}, DType::U8);
  std::mt19937 rng(seed);
  for (int64_t br = 0; br < br_n; ++br)
    for (int64_t bc = 0; bc < bc_n; ++bc) {
      bool keep = pattern == Pattern::Full;
      if (pattern == Pattern::Sparse) keep = br > 0 && rng() % 10 == 0;  // ~10% (the pruned MLPs), row 0 empty
      if (pattern == Pattern::Ragged) {
        switch (br % 5) {
          case 0: keep = false; break;
          case 1: keep = true; break;
          case 2: keep = bc == br % bc_n; break;
          case 3: keep = bc == 0 || bc == bc_n - 1; break;
          default: keep = rng() % 10 < 3; break;
        }
      }
      mask.data<uint8_t>()[br * bc_n + bc] = keep;
    }
  return mask;
}

using test::rel_frobenius;

// The CPU reference on the (already dtype-rounded) host inputs, fp32 result.
Tensor reference(const Tensor& x, const BsrMatrix& w, const Tensor* bias, ops::Activation act,
                 const Tensor* residual) {
  const Tensor x32 = x.to_f32();
  const int64_t M = x.numel() / w.cols;
  Tensor y = Tensor::empty({M, w.rows});
  Tensor bias32;
  if (bias) bias32 = bias->to_f32();
  cpu::bsr_linear_reference(x32.data<float>(), w, bias ? bias32.data<float>() : nullptr,
                            act == ops::Activation::GELU ? cpu::Act::GELU : cpu::Act::None, y.data<float>(), M);
  if (residual) {
    const Tensor r32 = residual->to_f32();
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] += r32.data<float>()[i];
  }
  return y;
}

// Runs ops::linear_bsr on CUDA over token counts x bias x GELU x residual for one matrix.
void check_against_cpu(const BsrMatrix& host, DType dt, const std::vector<int64_t>& token_counts,
                       const std::string& what) {
  const double tol = dt == DType::F32 ? kTolF32 : kTolBF16;
  const BsrMatrix dev = bsr_to_cuda(host, dt);
  const Tensor bias = random_tensor({host.rows}, dt, 11, 0.5f);
  const Tensor bias_dev = bias.to(Device::CUDA);
  for (int64_t M : token_counts) {
    const Tensor x = random_tensor({M, host.cols}, dt, static_cast<uint32_t>(100 + M));
    const Tensor residual = random_tensor({M, host.rows}, dt, static_cast<uint32_t>(200 + M));
    const Tensor x_dev = x.to(Device::CUDA), residual_dev = residual.to(Device::CUDA);
    for (bool with_bias : {false, true})
      for (ops::Activation act : {ops::Activation::None, ops::Activation::GELU})
        for (bool with_residual : {false, true}) {
          SCOPED_TRACE(::testing::Message() << what << " " << dtype_name(dt) << " M " << M << " bias " << with_bias
                                            << " gelu " << (act == ops::Activation::GELU) << " residual "
                                            << with_residual);
          const Tensor got = ops::linear_bsr(x_dev, dev, with_bias ? &bias_dev : nullptr, act,
                                             with_residual ? &residual_dev : nullptr);
          ASSERT_TRUE(got.is_cuda());
          ASSERT_EQ(got.dtype(), dt);
          const Tensor want =
              reference(x, host, with_bias ? &bias : nullptr, act, with_residual ? &residual : nullptr);
          EXPECT_LE(rel_frobenius(got.to(Device::CPU), want), tol);
        }
  }
}

BsrMatrix random_bsr(int64_t N, int64_t K, int b, Pattern pattern, DType dt, uint32_t seed) {
  const Tensor w = random_tensor({N, K}, dt, seed, 1.f / std::sqrt(static_cast<float>(K)));
  const Tensor mask = block_mask(N, K, b, pattern, seed + 1);
  return bsr_from_dense(w, b, &mask);
}

#endif  // VITRT_HAVE_CUDA

TEST_F(CudaBsr, RaggedBlockRowsMatchCpu) {
#ifdef VITRT_HAVE_CUDA
  for (DType dt : {DType::F32, DType::BF16})
    for (int b : {16, 32, 64}) {
      // 10 block-rows: two of each kind; 6 block-columns so full rows run the pipeline 6 deep.
      const BsrMatrix m = random_bsr(10 * b, 6 * b, b, Pattern::Ragged, dt, static_cast<uint32_t>(b));
      ASSERT_GT(m.nnz_blocks(), 0);
      check_against_cpu(m, dt, {1, 63, 64, 65, 197, 1000}, "ragged block " + std::to_string(b));
    }
#endif
}

TEST_F(CudaBsr, EmptyAndFullMatricesMatchCpu) {
#ifdef VITRT_HAVE_CUDA
  for (DType dt : {DType::F32, DType::BF16})
    for (int b : {16, 64}) {
      const BsrMatrix empty = random_bsr(3 * b, 2 * b, b, Pattern::Empty, dt, 5);
      ASSERT_EQ(empty.nnz_blocks(), 0);
      check_against_cpu(empty, dt, {1, 130}, "all-empty block " + std::to_string(b));
      const BsrMatrix full = random_bsr(3 * b, 4 * b, b, Pattern::Full, dt, 6);
      check_against_cpu(full, dt, {1, 130}, "all-full block " + std::to_string(b));
    }
#endif
}

// ViT-B MLP shapes (768 -> 3072 -> 768) pruned to 90% by block magnitude, as `vitrt sparsify` does.
TEST_F(CudaBsr, VitMlpShapesAtNinetyPercentMatchCpu) {
#ifdef VITRT_HAVE_CUDA
  for (DType dt : {DType::F32, DType::BF16})
    for (int b : {32, 64})
      for (auto [N, K] : {std::pair<int64_t, int64_t>{3072, 768}, {768, 3072}}) {
        const Tensor w = random_tensor({N, K}, dt, 21, 1.f / std::sqrt(static_cast<float>(K)));
        const BsrMatrix m = prune_blocks_by_magnitude(w, b, 0.9);
        check_against_cpu(m, dt, {197, 1000},
                          "vit-b mlp " + std::to_string(N) + "x" + std::to_string(K) + " block " + std::to_string(b));
      }
#endif
}

// The raw bf16 kernel writing float32 (ops::linear_bsr always writes x's dtype; this output mode
// is for callers that keep fp32 activations).
TEST_F(CudaBsr, Bf16KernelWithFloatOutputMatchesCpu) {
#ifdef VITRT_HAVE_CUDA
  for (int b : {16, 32, 64}) {
    const BsrMatrix host = random_bsr(10 * b, 4 * b, b, Pattern::Ragged, DType::BF16, 31);
    const BsrMatrix dev = bsr_to_cuda(host, DType::BF16);
    const cuda::BsrDeviceView view = cuda::device_view(dev);
    for (int64_t M : {5, 129}) {
      const Tensor x = random_tensor({M, host.cols}, DType::BF16, 41);
      const Tensor bias = random_tensor({host.rows}, DType::BF16, 42);
      const Tensor residual = random_tensor({M, host.rows}, DType::F32, 43);
      const Tensor x_dev = x.to(Device::CUDA), bias_dev = bias.to(Device::CUDA),
                   residual_dev = residual.to(Device::CUDA);
      for (bool gelu : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "block " << b << " M " << M << " gelu " << gelu);
        Tensor y = Tensor::empty({M, host.rows}, DType::F32, Device::CUDA);
        cuda::bsr_linear_bf16(x_dev.raw(), M, view, bias_dev.raw(), gelu, residual_dev.raw(), DType::F32, y.raw());
        const Tensor want =
            reference(x, host, &bias, gelu ? ops::Activation::GELU : ops::Activation::None, &residual);
        EXPECT_LE(rel_frobenius(y.to(Device::CPU), want), 1e-4);
      }
    }
  }
#endif
}

#ifdef VITRT_HAVE_CUDA
cuda::BsrDeviceView device_view(const BsrMatrix& dev, bool natural_order) {
  cuda::BsrDeviceView view = cuda::device_view(dev);
  if (natural_order) view.row_order = nullptr;
  return view;
}

// Runs every compiled bf16 variant for host's block size on each token count: bf16 output with a
// bias / GELU / residual combination that rotates with the variant and token count, and (first
// token count) fp32 output with everything on. Alternate variants use the natural block-row order.
void check_every_variant(const BsrMatrix& host, const std::vector<int64_t>& token_counts, const std::string& what) {
  const BsrMatrix dev = bsr_to_cuda(host, DType::BF16);
  const Tensor bias = random_tensor({host.rows}, DType::BF16, 301, 0.5f);
  const Tensor bias_dev = bias.to(Device::CUDA);
  struct Case {
    int64_t M;
    Tensor x, residual, residual_f32, x_dev, residual_dev, residual_f32_dev;
    Tensor want[4], want_f32;  // [flags]: none, bias, bias + GELU, bias + GELU + residual
  };
  std::vector<Case> cases;
  for (int64_t M : token_counts) {
    Case c;
    c.M = M;
    c.x = random_tensor({M, host.cols}, DType::BF16, static_cast<uint32_t>(400 + M));
    c.residual = random_tensor({M, host.rows}, DType::BF16, static_cast<uint32_t>(500 + M));
    c.residual_f32 = random_tensor({M, host.rows}, DType::F32, static_cast<uint32_t>(600 + M));
    c.x_dev = c.x.to(Device::CUDA), c.residual_dev = c.residual.to(Device::CUDA);
    c.residual_f32_dev = c.residual_f32.to(Device::CUDA);
    c.want[0] = reference(c.x, host, nullptr, ops::Activation::None, nullptr);
    c.want[1] = reference(c.x, host, &bias, ops::Activation::None, nullptr);
    c.want[2] = reference(c.x, host, &bias, ops::Activation::GELU, nullptr);
    c.want[3] = reference(c.x, host, &bias, ops::Activation::GELU, &c.residual);
    c.want_f32 = reference(c.x, host, &bias, ops::Activation::GELU, &c.residual_f32);
    cases.push_back(std::move(c));
  }
  const std::vector<cuda::BsrTcConfig> variants = cuda::bsr_tc_variants(host.block);
  ASSERT_FALSE(variants.empty());
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const cuda::BsrTcConfig& cfg = variants[vi];
    if (!cuda::bsr_tc_config_supported(cfg, host.block, host.cols)) continue;
    const cuda::BsrDeviceView view = device_view(dev, vi % 2 == 1);
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& c = cases[ci];
      const int flags = static_cast<int>((vi + ci) % 4);
      SCOPED_TRACE(::testing::Message() << what << " variant " << cuda::to_string(cfg) << " M " << c.M << " flags "
                                        << flags << " natural order " << (vi % 2 == 1));
      Tensor y = Tensor::empty({c.M, host.rows}, DType::BF16, Device::CUDA);
      cuda::bsr_linear_bf16(c.x_dev.raw(), c.M, view, flags >= 1 ? bias_dev.raw() : nullptr, flags >= 2,
                            flags == 3 ? c.residual_dev.raw() : nullptr, DType::BF16, y.raw(), &cfg);
      EXPECT_LE(rel_frobenius(y.to(Device::CPU), c.want[flags]), kTolBF16);
      if (ci == 0) {
        Tensor y32 = Tensor::empty({c.M, host.rows}, DType::F32, Device::CUDA);
        cuda::bsr_linear_bf16(c.x_dev.raw(), c.M, view, bias_dev.raw(), true, c.residual_f32_dev.raw(), DType::F32,
                              y32.raw(), &cfg);
        EXPECT_LE(rel_frobenius(y32.to(Device::CPU), c.want_f32), 1e-4) << "fp32 output";
      }
    }
  }
}
#endif

// Every bf16 kernel variant (token tile, rows per CTA, stages, warps, persistent) on ragged
// block-rows: 10 block-rows (so 2- and 4-row groups end short) x 40 block-columns (a union bitmap
// of two words), token counts 1, 63, 197, 300.
TEST_F(CudaBsr, EveryBf16VariantMatchesCpuOnRaggedRows) {
#ifdef VITRT_HAVE_CUDA
  for (int b : {16, 32, 64}) {
    const BsrMatrix host = random_bsr(10 * b, 40 * b, b, Pattern::Ragged, DType::BF16, static_cast<uint32_t>(300 + b));
    ASSERT_GT(host.nnz_blocks(), 0);
    check_every_variant(host, {1, 63, 197, 300}, "ragged block " + std::to_string(b));
  }
#endif
}

TEST_F(CudaBsr, EveryBf16VariantMatchesCpuOnEmptyAndFullMatrices) {
#ifdef VITRT_HAVE_CUDA
  for (int b : {16, 32, 64}) {
    const BsrMatrix empty = random_bsr(3 * b, 2 * b, b, Pattern::Empty, DType::BF16, 7);
    ASSERT_EQ(empty.nnz_blocks(), 0);
    check_every_variant(empty, {63, 130}, "all-empty block " + std::to_string(b));
    const BsrMatrix full = random_bsr(5 * b, 4 * b, b, Pattern::Full, DType::BF16, 8);
    check_every_variant(full, {1, 197}, "all-full block " + std::to_string(b));
  }
#endif
}

// Repeated persistent launches (the work counter must reset itself) and a default-variant call.
TEST_F(CudaBsr, PersistentVariantsRepeatAndDefaultIsSupported) {
#ifdef VITRT_HAVE_CUDA
  const int b = 32;
  const BsrMatrix host = random_bsr(24 * b, 12 * b, b, Pattern::Ragged, DType::BF16, 71);
  const BsrMatrix dev = bsr_to_cuda(host, DType::BF16);
  const cuda::BsrDeviceView view = device_view(dev, false);
  const int64_t M = 1000;
  const Tensor x = random_tensor({M, host.cols}, DType::BF16, 72);
  const Tensor x_dev = x.to(Device::CUDA);
  const Tensor want = reference(x, host, nullptr, ops::Activation::None, nullptr);
  for (const cuda::BsrTcConfig& cfg : cuda::bsr_tc_variants(b)) {
    if (!cfg.persistent) continue;
    Tensor y = Tensor::empty({M, host.rows}, DType::BF16, Device::CUDA);
    for (int rep = 0; rep < 3; ++rep) {
      SCOPED_TRACE(::testing::Message() << cuda::to_string(cfg) << " repetition " << rep);
      VITRT_CUDA_CHECK(cudaMemset(y.raw(), 0xff, y.nbytes()));
      cuda::bsr_linear_bf16(x_dev.raw(), M, view, nullptr, false, nullptr, DType::BF16, y.raw(), &cfg);
      EXPECT_LE(rel_frobenius(y.to(Device::CPU), want), kTolBF16);
    }
  }
  Tensor y = Tensor::empty({M, host.rows}, DType::BF16, Device::CUDA);
  cuda::bsr_linear_bf16(x_dev.raw(), M, view, nullptr, false, nullptr, DType::BF16, y.raw());  // default variant
  EXPECT_LE(rel_frobenius(y.to(Device::CPU), want), kTolBF16);
  cuda::BsrTcConfig bad;
  bad.tile_m = 96;
  EXPECT_THROW(cuda::bsr_linear_bf16(x_dev.raw(), M, view, nullptr, false, nullptr, DType::BF16, y.raw(), &bad),
               InvalidArgument);
#endif
}

#ifdef VITRT_HAVE_CUDA
// Whether this GPU runs the x-resident kernel (sm_90): it takes a small full matrix there.
bool xres_runs_here() {
  const BsrMatrix probe = bsr_to_cuda(random_bsr(64, 64, 64, Pattern::Full, DType::BF16, 80), DType::BF16);
  return cuda::bsr_xres_supported(cuda::device_view(probe), nullptr, DType::BF16);
}
#endif

// The Hopper x-resident kernel (bsr_gemm_xres.cu) called directly: ragged, empty and full matrices
// (full rows longer than its W ring), K not a multiple of its 64-column x slabs (the TMA box reads
// zeros past K), token counts around its 128-token tile (rows past M read as zeros), bias / GELU
// on and off, and grids capped at 1 and 3 CTAs so that each CTA runs several tiles (each x slab is
// refilled for the next tile while the current one is still computed), even and odd block-row
// counts (blocks 32 and 16 run their rows in groups of 64 columns where the count allows), every
// block size. The output is poisoned
// first, so every element must be written. Also run through ops::linear_bsr by ctest
// cuda_bsr_xres (VITRT_BSR_XRES=1). Skips off sm_90.
TEST_F(CudaBsr, XResidentKernelMatchesCpu) {
#ifdef VITRT_HAVE_CUDA
  if (!xres_runs_here()) GTEST_SKIP() << "the x-resident kernel needs sm_90";
  // A weight the kernel declines (its shared memory would not fit) is counted, not skipped silently:
  // with the default W ring every matrix here must fit; a ring asked for by VITRT_BSR_XRES_RING or
  // VITRT_BSR_XRES_CHUNK may not fit next to 192 KB of x at K = 768.
  const bool ring_from_env = std::getenv("VITRT_BSR_XRES_RING") || std::getenv("VITRT_BSR_XRES_CHUNK");
  int declined = 0, ran = 0, ran_pairs = 0;
  for (int b : {16, 32, 64}) {
    const int64_t kb = 768 / b;  // K = 768, the kernel's limit
    const std::vector<std::pair<std::string, BsrMatrix>> mats = {
        {"ragged", random_bsr(10 * b, 6 * b, b, Pattern::Ragged, DType::BF16, 81)},
        {"ragged wide", random_bsr(20 * b, kb * b, b, Pattern::Ragged, DType::BF16, 82)},
        {"ragged, odd block-row count", random_bsr(7 * b, kb * b, b, Pattern::Ragged, DType::BF16, 89)},
        {"ragged, K not a multiple of 64", random_bsr(4 * b, 3 * b, b, Pattern::Ragged, DType::BF16, 88)},
        {"empty", random_bsr(3 * b, 2 * b, b, Pattern::Empty, DType::BF16, 83)},
        {"full", random_bsr(3 * b, kb * b, b, Pattern::Full, DType::BF16, 84)},
        {"full, 8 block-rows", random_bsr(8 * b, kb * b, b, Pattern::Full, DType::BF16, 90)},
        {"ragged, one group", random_bsr(4 * b, kb * b, b, Pattern::Ragged, DType::BF16, 91)},
        {"ViT-B fc1 shape, ~90% sparse", random_bsr(3072, 768, b, Pattern::Sparse, DType::BF16, 92)}};
    for (const auto& [name, host] : mats) {
      const BsrMatrix dev = bsr_to_cuda(host, DType::BF16);
      const cuda::BsrDeviceView view = cuda::device_view(dev);
      if (!cuda::bsr_xres_supported(view, nullptr, DType::BF16)) {
        ++declined;
        EXPECT_TRUE(ring_from_env) << name << " block " << b << ": declined with the default ring";
        continue;
      }
      ++ran;
      ran_pairs += cuda::bsr_xres_pairs(view) == 2;
      EXPECT_EQ(view.values_core_matrix != nullptr, host.nnz_blocks() > 0);  // made by bsr_to_cuda for bf16
      const Tensor bias = random_tensor({host.rows}, DType::BF16, 85, 0.5f);
      const Tensor bias_dev = bias.to(Device::CUDA);
      for (int64_t M : {1, 63, 128, 129, 197, 1000}) {
        const Tensor x = random_tensor({M, host.cols}, DType::BF16, static_cast<uint32_t>(700 + M));
        const Tensor x_dev = x.to(Device::CUDA);
        for (int flags = 0; flags < 4; ++flags) {  // bit 0 bias, bit 1 GELU (each combination its own instance)
          const bool with_bias = flags & 1, gelu = flags & 2;
          const Tensor want = reference(x, host, with_bias ? &bias : nullptr,
                                        gelu ? ops::Activation::GELU : ops::Activation::None, nullptr);
          for (int max_ctas : {0, 1, 3}) {
            SCOPED_TRACE(::testing::Message() << name << " block " << b << " M " << M << " flags " << flags
                                              << " max_ctas " << max_ctas);
            Tensor y = Tensor::empty({M, host.rows}, DType::BF16, Device::CUDA);
            VITRT_CUDA_CHECK(cudaMemset(y.raw(), 0xff, y.nbytes()));
            cuda::bsr_linear_bf16_xres(x_dev.raw(), M, view, with_bias ? bias_dev.raw() : nullptr, gelu, y.raw(), max_ctas);
            EXPECT_LE(rel_frobenius(y.to(Device::CPU), want), kTolBF16);
          }
        }
      }
    }
  }
  std::printf("x-resident kernel: %d matrices run (%d with two pairs of warpgroups), %d declined (shared memory); "
              "peak memory bandwidth %.0f GB/s (blocks 32 / 64 take this kernel by default from 4000)\n",
              ran, ran_pairs, declined, cuda::peak_memory_gbps());
  // VITRT_BSR_XRES_PAIRS=2: the grouped block-16 / 32 matrices (8 of them with K = 768) take two pairs.
  const char* pairs_env = std::getenv("VITRT_BSR_XRES_PAIRS");
  if (pairs_env && std::string(pairs_env) == "2" && !ring_from_env) EXPECT_GE(ran_pairs, 8);
  EXPECT_GT(cuda::peak_memory_gbps(), 500.0);  // the attributes read (an HBM card: thousands of GB/s)
  EXPECT_GE(ran, 9);  // the 9 matrices of K < 768 fit any ring: at least those ran
  // Outside its scope: clear errors, and the dispatcher keeps the general kernel.
  const BsrMatrix wide = bsr_to_cuda(random_bsr(2 * 64, 13 * 64, 64, Pattern::Full, DType::BF16, 86), DType::BF16);
  const cuda::BsrDeviceView wide_view = cuda::device_view(wide);
  EXPECT_FALSE(cuda::bsr_xres_supported(wide_view, nullptr, DType::BF16));  // K = 832 > 768
  Tensor x = Tensor::empty({4, 13 * 64}, DType::BF16, Device::CUDA), y = Tensor::empty({4, 128}, DType::BF16, Device::CUDA);
  EXPECT_THROW(cuda::bsr_linear_bf16_xres(x.raw(), 4, wide_view, nullptr, false, y.raw()), InvalidArgument);
  const BsrMatrix small = bsr_to_cuda(random_bsr(2 * 64, 2 * 64, 64, Pattern::Full, DType::BF16, 87), DType::BF16);
  cuda::BsrDeviceView no_copy = cuda::device_view(small);
  no_copy.values_core_matrix = nullptr;  // the blocks go by bulk copies of the core-matrix copy only
  EXPECT_FALSE(cuda::bsr_xres_supported(no_copy, nullptr, DType::BF16));
  EXPECT_THROW(cuda::bsr_linear_bf16_xres(x.raw(), 4, no_copy, nullptr, false, y.raw()), InvalidArgument);
  EXPECT_FALSE(cuda::bsr_xres_supported(cuda::device_view(small), y.raw(), DType::BF16));  // a residual
  EXPECT_FALSE(cuda::bsr_xres_supported(cuda::device_view(small), nullptr, DType::F32));   // fp32 output
#endif
}

// The shapes the defaults are measured on (BENCHMARKS.md) must take the x-resident kernel in the
// form measured: ViT-B's 768 -> 3072 layer pruned to 80% and 90% at every block size fits in shared
// memory (its tables grow with nnz: a reservation that does not fit sends the weight silently to
// another kernel), and block 16 runs with two pairs of consumer warpgroups. Skips off sm_90 and
// under the A/B environment switches (they may ask for rings that do not fit).
TEST_F(CudaBsr, XResidentTakesTheVitMlpShapes) {
#ifdef VITRT_HAVE_CUDA
  if (!xres_runs_here()) GTEST_SKIP() << "the x-resident kernel needs sm_90";
  for (const char* v : {"VITRT_BSR_XRES_RING", "VITRT_BSR_XRES_CHUNK", "VITRT_BSR_XRES_PAIRS", "VITRT_BSR_XRES_PIPE",
                        "VITRT_BSR_XRES_GROUP"})
    if (std::getenv(v)) GTEST_SKIP() << v << " is set";
  const Tensor w = random_tensor({3072, 768}, DType::BF16, 93, 0.03f);
  for (int b : {16, 32, 64})
    for (double sparsity : {0.8, 0.9}) {
      SCOPED_TRACE(::testing::Message() << "block " << b << " sparsity " << sparsity);
      const BsrMatrix dev = bsr_to_cuda(prune_blocks_by_magnitude(w, b, sparsity), DType::BF16);
      const cuda::BsrDeviceView view = cuda::device_view(dev);
      EXPECT_TRUE(cuda::bsr_xres_supported(view, nullptr, DType::BF16));
      EXPECT_EQ(cuda::bsr_xres_pairs(view), b == 64 ? 1 : 2);
    }
#endif
}

#ifdef VITRT_HAVE_CUDA
// A Hopper kernel that takes bias, GELU and a residual (the streamed and y-resident ones), called
// through `launch(x, M, bias, gelu, residual, y, max_ctas)` on `view` (host's device copy) against
// the CPU: token counts around the 128-token tile, bias / GELU / residual in every combination, the
// residual also in place (residual == y), and grids capped at 1 and 3 CTAs. The output is poisoned
// first, so every element must be written. seed: of x and the residual (bias: seed + 1).
template <class Launch>
void expect_linear_with_residual_matches_cpu(const std::string& name, int b, const BsrMatrix& host, uint32_t seed,
                                             Launch launch) {
  const Tensor bias = random_tensor({host.rows}, DType::BF16, seed + 1, 0.5f);
  const Tensor bias_dev = bias.to(Device::CUDA);
  for (int64_t M : {1, 63, 128, 129, 197, 1000}) {
    const Tensor x = random_tensor({M, host.cols}, DType::BF16, static_cast<uint32_t>(seed + M));
    const Tensor x_dev = x.to(Device::CUDA);
    const Tensor res = random_tensor({M, host.rows}, DType::BF16, static_cast<uint32_t>(seed + 50 + M));
    const Tensor res_dev = res.to(Device::CUDA);
    // flags: bit 0 bias, bit 1 GELU, bit 2 residual, bit 3 the residual in place (y holds it); all
    // eight combinations of the first three (the streamed kernel has an instance for each)
    for (int flags : {0, 1, 2, 3, 4, 5, 6, 7, 15}) {
      const bool with_bias = flags & 1, gelu = flags & 2, with_res = flags & 4, in_place = flags & 8;
      const Tensor want = reference(x, host, with_bias ? &bias : nullptr,
                                    gelu ? ops::Activation::GELU : ops::Activation::None, with_res ? &res : nullptr);
      for (int max_ctas : {0, 1, 3}) {
        SCOPED_TRACE(::testing::Message() << name << " block " << b << " M " << M << " flags " << flags
                                          << " max_ctas " << max_ctas);
        Tensor y = Tensor::empty({M, host.rows}, DType::BF16, Device::CUDA);
        if (in_place) VITRT_CUDA_CHECK(cudaMemcpy(y.raw(), res_dev.raw(), y.nbytes(), cudaMemcpyDeviceToDevice));
        else VITRT_CUDA_CHECK(cudaMemset(y.raw(), 0xff, y.nbytes()));
        launch(x_dev.raw(), M, with_bias ? bias_dev.raw() : nullptr, gelu,
               with_res ? (in_place ? y.raw() : res_dev.raw()) : nullptr, y.raw(), max_ctas);
        EXPECT_LE(rel_frobenius(y.to(Device::CPU), want), kTolBF16);
      }
    }
  }
}
#endif

// The Hopper streamed kernel (bsr_gemm_stream.cu) called directly: ragged, empty and full
// matrices (full rows longer than its ring), short and long K (the ViT MLPs' 768 and 3072), token
// counts around its 128-token tile (rows past M read as zeros and are never written), bias, GELU
// and residual in every combination, the residual also in place (residual == y, as the MLP's
// second linear runs), and grids capped at 1 and 3 CTAs so that each CTA runs many items through
// one ring. The output is poisoned first, so every element must be written. Also run through
// ops::linear_bsr by ctest cuda_bsr_stream (VITRT_BSR_STREAM=1). Skips off sm_90.
TEST_F(CudaBsr, StreamedKernelMatchesCpu) {
#ifdef VITRT_HAVE_CUDA
  for (int b : {32, 64}) {
    const std::vector<std::pair<std::string, BsrMatrix>> mats = {
        {"ragged", random_bsr(10 * b, 6 * b, b, Pattern::Ragged, DType::BF16, 91)},
        {"ragged, K = 3072", random_bsr(10 * b, 3072, b, Pattern::Ragged, DType::BF16, 92)},
        {"empty", random_bsr(3 * b, 2 * b, b, Pattern::Empty, DType::BF16, 93)},
        {"full", random_bsr(3 * b, 20 * b, b, Pattern::Full, DType::BF16, 94)}};
    for (const auto& [name, host] : mats) {
      const BsrMatrix dev = bsr_to_cuda(host, DType::BF16);
      const cuda::BsrDeviceView view = cuda::device_view(dev);
      if (!cuda::bsr_stream_supported(view, DType::BF16)) GTEST_SKIP() << "the streamed kernel needs sm_90";
      expect_linear_with_residual_matches_cpu(name, b, host, 900, [&](const void* x, int64_t M, const void* bias,
                                                                      bool gelu, const void* res, void* y, int max_ctas) {
        cuda::bsr_linear_bf16_stream(x, M, view, bias, gelu, res, y, max_ctas);
      });
    }
  }
  // Outside its scope: clear errors.
  const BsrMatrix small = bsr_to_cuda(random_bsr(2 * 64, 2 * 64, 64, Pattern::Full, DType::BF16, 96), DType::BF16);
  cuda::BsrDeviceView no_copy = cuda::device_view(small);
  no_copy.values_core_matrix = nullptr;  // the blocks go by bulk copies of the core-matrix copy only
  EXPECT_FALSE(cuda::bsr_stream_supported(no_copy, DType::BF16));
  Tensor x = Tensor::empty({4, 128}, DType::BF16, Device::CUDA), y = Tensor::empty({4, 128}, DType::BF16, Device::CUDA);
  EXPECT_THROW(cuda::bsr_linear_bf16_stream(x.raw(), 4, no_copy, nullptr, false, nullptr, y.raw()), InvalidArgument);
  EXPECT_FALSE(cuda::bsr_stream_supported(cuda::device_view(small), DType::F32));  // fp32 output
  const BsrMatrix b16 = bsr_to_cuda(random_bsr(64, 64, 16, Pattern::Full, DType::BF16, 97), DType::BF16);
  EXPECT_FALSE(cuda::bsr_stream_supported(cuda::device_view(b16), DType::BF16));  // block 16
#endif
}

// The y-resident kernel (bsr_gemm_yres.cu) against the CPU reference: blocks 16 and 32, ragged /
// empty / full weights (full: a (group, slab) holds more blocks than one slot, so it takes several
// parts, each with the slab again), N not a multiple of the 256-column group, K = 3072 (the MLP's
// second linear) and the ViT-B fc2 shape at ~90%, token counts with partial tiles, several units per
// CTA, bias, GELU, the residual apart and in place; then its scope.
TEST_F(CudaBsr, YResidentKernelMatchesCpu) {
#ifdef VITRT_HAVE_CUDA
  if (!xres_runs_here()) GTEST_SKIP() << "the y-resident kernel needs sm_90";
  for (int b : {16, 32}) {
    const std::vector<std::pair<std::string, BsrMatrix>> mats = {
        {"ragged, N = 320 (a partial group)", random_bsr(320, 192, b, Pattern::Ragged, DType::BF16, 191)},
        {"ragged, K = 3072", random_bsr(256, 3072, b, Pattern::Ragged, DType::BF16, 192)},
        {"ViT-B fc2 shape, ~90% sparse", random_bsr(768, 3072, b, Pattern::Sparse, DType::BF16, 193)},
        {"empty", random_bsr(128, 128, b, Pattern::Empty, DType::BF16, 194)},
        {"full (several parts per slab)", random_bsr(192, 640, b, Pattern::Full, DType::BF16, 195)}};
    for (const auto& [name, host] : mats) {
      const BsrMatrix dev = bsr_to_cuda(host, DType::BF16);
      const cuda::BsrDeviceView view = cuda::device_view(dev);
      ASSERT_TRUE(cuda::bsr_yres_supported(view, DType::BF16)) << name << " block " << b;
      expect_linear_with_residual_matches_cpu(name, b, host, 1900, [&](const void* x, int64_t M, const void* bias,
                                                                       bool gelu, const void* res, void* y, int max_ctas) {
        cuda::bsr_linear_bf16_yres(x, M, view, bias, gelu, res, y, max_ctas);
      });
    }
  }
  // Outside its scope: clear errors.
  const BsrMatrix b64 = bsr_to_cuda(random_bsr(256, 256, 64, Pattern::Full, DType::BF16, 197), DType::BF16);
  EXPECT_FALSE(cuda::bsr_yres_supported(cuda::device_view(b64), DType::BF16));  // block 64
  const BsrMatrix narrow = bsr_to_cuda(random_bsr(80, 128, 16, Pattern::Full, DType::BF16, 198), DType::BF16);
  EXPECT_FALSE(cuda::bsr_yres_supported(cuda::device_view(narrow), DType::BF16));  // N = 80
  const BsrMatrix short_k = bsr_to_cuda(random_bsr(128, 96, 32, Pattern::Full, DType::BF16, 199), DType::BF16);
  EXPECT_FALSE(cuda::bsr_yres_supported(cuda::device_view(short_k), DType::BF16));  // K = 96
  const BsrMatrix small = bsr_to_cuda(random_bsr(128, 128, 16, Pattern::Full, DType::BF16, 200), DType::BF16);
  EXPECT_FALSE(cuda::bsr_yres_supported(cuda::device_view(small), DType::F32));  // fp32 output
  cuda::BsrDeviceView no_copy = cuda::device_view(small);
  no_copy.values_core_matrix = nullptr;  // the blocks go by bulk copies of the core-matrix copy only
  EXPECT_FALSE(cuda::bsr_yres_supported(no_copy, DType::BF16));
  Tensor x = Tensor::empty({4, 128}, DType::BF16, Device::CUDA), y = Tensor::empty({4, 128}, DType::BF16, Device::CUDA);
  EXPECT_THROW(cuda::bsr_linear_bf16_yres(x.raw(), 4, no_copy, nullptr, false, nullptr, y.raw()), InvalidArgument);
#endif
}

// The fused MLP kernel (bsr_mlp_fused.cu) against the CPU reference of the two linears: fc1 and fc2
// ragged, empty or full (an empty fc1 reads no x at all: h = GELU(b1)), D = 128 and 768 (the
// kernel's largest; at 90% sparsity, since its schedule must fit shared memory next to x), token
// counts with partial tiles, several tiles per CTA, the residual apart and in place; then
// ops::mlp_bsr through a plan, and its fallback.
TEST_F(CudaBsr, FusedMlpMatchesCpu) {
#ifdef VITRT_HAVE_CUDA
  struct Case {
    std::string name;
    int64_t D, H;
    Pattern p1, p2;
  };
  const std::vector<Case> cases = {{"ragged", 128, 10 * 64, Pattern::Ragged, Pattern::Ragged},
                                   {"90% sparse, D = 768", 768, 3072, Pattern::Sparse, Pattern::Sparse},
                                   {"fc1 empty", 128, 4 * 64, Pattern::Empty, Pattern::Ragged},
                                   {"fc2 empty", 192, 4 * 64, Pattern::Ragged, Pattern::Empty},
                                   {"full", 256, 6 * 64, Pattern::Full, Pattern::Full},
                                   {"ragged, D = 1024 (streamed forms)", 1024, 8 * 64, Pattern::Ragged, Pattern::Ragged}};
  if (!cuda::device_is_sm90()) GTEST_SKIP() << "the fused MLP kernel needs sm_90";
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const BsrMatrix fc1 = random_bsr(c.H, c.D, 64, c.p1, DType::BF16, seed++);
    const BsrMatrix fc2 = random_bsr(c.D, c.H, 64, c.p2, DType::BF16, seed++);
    const BsrMatrix fc1_dev = bsr_to_cuda(fc1, DType::BF16), fc2_dev = bsr_to_cuda(fc2, DType::BF16);
    const cuda::BsrDeviceView v1 = cuda::device_view(fc1_dev), v2 = cuda::device_view(fc2_dev);
    if (!cuda::bsr_mlp_fused_supported(v1, v2)) {  // (the resident form: D <= 768)
      ASSERT_GT(c.D, 768) << c.name << ": not supported";
      continue;
    }
    const auto plan = ops::plan_bsr_mlp(fc1_dev, fc2_dev, DType::BF16);
    ASSERT_NE(plan, nullptr) << c.name;
    const cuda::BsrMlpDeviceSchedule sched = ops::bsr_mlp_device_schedule(*plan);
    const Tensor b1 = random_tensor({c.H}, DType::BF16, seed++, 0.5f), b2 = random_tensor({c.D}, DType::BF16, seed++, 0.5f);
    const Tensor b1_dev = b1.to(Device::CUDA), b2_dev = b2.to(Device::CUDA);
    for (int64_t M : {1, 63, 128, 197, 1000}) {
      const Tensor x = random_tensor({M, c.D}, DType::BF16, seed++);
      const Tensor res = random_tensor({M, c.D}, DType::BF16, seed++);
      const Tensor x_dev = x.to(Device::CUDA), res_dev = res.to(Device::CUDA);
      const Tensor h = reference(x, fc1, &b1, ops::Activation::GELU, nullptr);
      const Tensor want = reference(h, fc2, &b2, ops::Activation::None, &res);
      // (max_ctas, tile_ctas): ranges of units starting inside a tile; tiles shared by 2-6 CTAs (where
      // the block-rows allow: else ranges), several tiles per group of CTAs, groups left idle.
      const std::vector<std::pair<int, int>> grids = {{0, -1}, {1, -1}, {3, -1}, {7, -1}, {0, 0},
                                                      {4, 2}, {6, 3}, {8, 4}, {12, 6}, {5, 2}};
      for (const auto& [max_ctas, tile_ctas] : grids)
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(::testing::Message() << c.name << " M " << M << " max_ctas " << max_ctas << " tile_ctas "
                                            << tile_ctas << " in place " << in_place);
          Tensor y = Tensor::empty({M, c.D}, DType::BF16, Device::CUDA);
          if (in_place) VITRT_CUDA_CHECK(cudaMemcpy(y.raw(), res_dev.raw(), y.nbytes(), cudaMemcpyDeviceToDevice));
          else VITRT_CUDA_CHECK(cudaMemset(y.raw(), 0xff, y.nbytes()));
          cuda::bsr_mlp_bf16_fused(x_dev.raw(), M, v1, b1_dev.raw(), v2, b2_dev.raw(), sched,
                                   in_place ? y.raw() : res_dev.raw(), y.raw(), max_ctas, tile_ctas);
          EXPECT_LE(rel_frobenius(y.to(Device::CPU), want), kTolBF16);
        }
      {  // Without biases (the kernel takes null b1 / b2: zeros in its shared-memory copies).
        SCOPED_TRACE(::testing::Message() << c.name << " M " << M << " no biases");
        const Tensor want0 = reference(reference(x, fc1, nullptr, ops::Activation::GELU, nullptr), fc2, nullptr,
                                       ops::Activation::None, &res);
        Tensor y = Tensor::empty({M, c.D}, DType::BF16, Device::CUDA);
        cuda::bsr_mlp_bf16_fused(x_dev.raw(), M, v1, nullptr, v2, nullptr, sched, res_dev.raw(), y.raw());
        EXPECT_LE(rel_frobenius(y.to(Device::CPU), want0), kTolBF16);
      }
      // The op, with the plan (fused) and without (two linears).
      SCOPED_TRACE(::testing::Message() << c.name << " M " << M << " ops::mlp_bsr");
      const Tensor fused = ops::mlp_bsr(x_dev, fc1_dev, b1_dev, fc2_dev, b2_dev, res_dev, plan.get());
      const Tensor unfused = ops::mlp_bsr(x_dev, fc1_dev, b1_dev, fc2_dev, b2_dev, res_dev, nullptr);
      EXPECT_LE(rel_frobenius(fused.to(Device::CPU), want), kTolBF16);
      EXPECT_LE(rel_frobenius(unfused.to(Device::CPU), want), kTolBF16);
      // Fused against the two linears: with the GELUs in bf16x2 arithmetic (the streamed forms' default)
      // about one bf16 step of each hidden value (1.2e-3 measured); in fp32 (VITRT_BSR_MLP_GELU=f32, the
      // resident forms) accumulation order only (2-6e-5).
      const char* gelu = std::getenv("VITRT_BSR_MLP_GELU");
      const bool gelu_bf16x2 = gelu == nullptr || std::string(gelu) != "f32";
      EXPECT_LE(rel_frobenius(fused.to(Device::CPU), unfused.to(Device::CPU)), gelu_bf16x2 ? 4e-3 : 1e-3);
    }
  }
  // Outside its scope: no plan (then ops::mlp_bsr runs the two linears), clear errors.
  const BsrMatrix b32a = bsr_to_cuda(random_bsr(128, 64, 32, Pattern::Full, DType::BF16, 390), DType::BF16);
  const BsrMatrix b32b = bsr_to_cuda(random_bsr(64, 128, 32, Pattern::Full, DType::BF16, 391), DType::BF16);
  EXPECT_EQ(ops::plan_bsr_mlp(b32a, b32b, DType::BF16), nullptr);  // block 32
  const BsrMatrix wide1 = bsr_to_cuda(random_bsr(128, 1088, 64, Pattern::Full, DType::BF16, 392), DType::BF16);
  const BsrMatrix wide2 = bsr_to_cuda(random_bsr(1088, 128, 64, Pattern::Full, DType::BF16, 393), DType::BF16);
  EXPECT_EQ(ops::plan_bsr_mlp(wide1, wide2, DType::BF16), nullptr);  // D > 1024 (> 768: the resident form)
  const BsrMatrix mid1 = bsr_to_cuda(random_bsr(128, 832, 64, Pattern::Full, DType::BF16, 386), DType::BF16);
  const BsrMatrix mid2 = bsr_to_cuda(random_bsr(832, 128, 64, Pattern::Full, DType::BF16, 387), DType::BF16);
  // (streamed unless VITRT_BSR_MLP_STREAM=0; four warpgroups exist only streamed and override it)
  const auto env_is = [](const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v != nullptr && std::string(v) == value;
  };
  const bool streamed = !env_is("VITRT_BSR_MLP_STREAM", "0") || env_is("VITRT_BSR_MLP_WARPGROUPS", "4");
  EXPECT_EQ(ops::plan_bsr_mlp(mid1, mid2, DType::BF16) != nullptr, streamed);  // D = 832: the streamed forms only
  // Full 768 x 4096 weights: a schedule of ~10.8K words, which fits neither form's shared memory.
  const BsrMatrix dense1 = bsr_to_cuda(random_bsr(4096, 768, 64, Pattern::Full, DType::BF16, 388), DType::BF16);
  const BsrMatrix dense2 = bsr_to_cuda(random_bsr(768, 4096, 64, Pattern::Full, DType::BF16, 389), DType::BF16);
  EXPECT_EQ(ops::plan_bsr_mlp(dense1, dense2, DType::BF16), nullptr);
  // A hidden width whose biases (fp32 in the streamed forms' shared memory: 4 x (16384 + 64) bytes) do not
  // fit next to the ring: no plan there; the resident form keeps its biases in global memory.
  const BsrMatrix tall1 = bsr_to_cuda(random_bsr(16384, 64, 64, Pattern::Empty, DType::BF16, 380), DType::BF16);
  const BsrMatrix tall2 = bsr_to_cuda(random_bsr(64, 16384, 64, Pattern::Empty, DType::BF16, 381), DType::BF16);
  EXPECT_EQ(ops::plan_bsr_mlp(tall1, tall2, DType::BF16) != nullptr, !streamed);
  const BsrMatrix f1 = bsr_to_cuda(random_bsr(128, 64, 64, Pattern::Full, DType::BF16, 394), DType::BF16);
  const BsrMatrix f2 = bsr_to_cuda(random_bsr(64, 128, 64, Pattern::Full, DType::BF16, 395), DType::BF16);
  const auto plan = ops::plan_bsr_mlp(f1, f2, DType::BF16);
  ASSERT_NE(plan, nullptr);
  const Tensor x = random_tensor({5, 64}, DType::BF16, 396).to(Device::CUDA);
  const Tensor b1 = random_tensor({128}, DType::BF16, 397).to(Device::CUDA), b2 = random_tensor({64}, DType::BF16, 398).to(Device::CUDA);
  const Tensor bad_res = random_tensor({5, 32}, DType::BF16, 399).to(Device::CUDA);
  EXPECT_THROW(ops::mlp_bsr(x, f1, b1, f2, b2, bad_res, plan.get()), InvalidArgument);
  EXPECT_THROW(ops::mlp_bsr(x, f1, b2, f2, b2, x, plan.get()), InvalidArgument);  // b1 of the wrong length
  cuda::BsrMlpDeviceSchedule wrong{plan->words.data<int32_t>(), plan->group_begin.data<int32_t>(), plan->groups + 1,
                                   plan->k_mask, plan->words_count};
  Tensor y = Tensor::empty({5, 64}, DType::BF16, Device::CUDA);
  EXPECT_THROW(cuda::bsr_mlp_bf16_fused(x.raw(), 5, cuda::device_view(f1), b1.raw(), cuda::device_view(f2), b2.raw(),
                                        wrong, nullptr, y.raw()),
               InvalidArgument);
#endif
}

// The schedule bsr_to_cuda uploads: every block-row once, most stored blocks first.
TEST_F(CudaBsr, UploadOrdersBlockRowsByDecreasingBlockCount) {
#ifdef VITRT_HAVE_CUDA
  const BsrMatrix host = random_bsr(20 * 16, 7 * 16, 16, Pattern::Ragged, DType::F32, 51);
  const BsrMatrix dev = bsr_to_cuda(host, DType::BF16);
  EXPECT_EQ(dev.cuda.values.dtype(), DType::BF16);
  EXPECT_EQ(dev.values.dtype(), DType::F32);  // the host arrays are kept as they were
  const Tensor order = dev.cuda.row_order.to(Device::CPU);
  const int32_t* rp = host.row_ptr.data<int32_t>();
  std::vector<int> seen(host.block_rows(), 0);
  for (int64_t i = 0; i < order.numel(); ++i) {
    const int32_t r = order.data<int32_t>()[i];
    ASSERT_TRUE(r >= 0 && r < host.block_rows());
    ++seen[r];
    if (i > 0) {
      const int32_t p = order.data<int32_t>()[i - 1];
      EXPECT_GE(rp[p + 1] - rp[p], rp[r + 1] - rp[r]) << "position " << i;
    }
  }
  for (int c : seen) EXPECT_EQ(c, 1);
#endif
}

TEST_F(CudaBsr, BadCallsAreClearErrors) {
#ifdef VITRT_HAVE_CUDA
  const BsrMatrix host = random_bsr(64, 64, 32, Pattern::Full, DType::F32, 61);
  const Tensor x = random_tensor({3, 64}, DType::F32, 62).to(Device::CUDA);
  EXPECT_THROW(ops::linear_bsr(x, host), InvalidArgument);  // never uploaded
  const BsrMatrix dev16 = bsr_to_cuda(host, DType::BF16);
  EXPECT_THROW(ops::linear_bsr(x, dev16), InvalidArgument);  // uploaded as bf16, x is fp32
  const BsrMatrix dev = bsr_to_cuda(host, DType::F32);
  EXPECT_THROW(ops::linear_bsr(x, dev, nullptr, ops::Activation::ReLU), InvalidArgument);
  const Tensor host_bias = random_tensor({64}, DType::F32, 63);
  EXPECT_THROW(ops::linear_bsr(x, dev, &host_bias), InvalidArgument);  // bias on the host
  const Tensor short_bias = random_tensor({32}, DType::F32, 64).to(Device::CUDA);
  EXPECT_THROW(ops::linear_bsr(x, dev, &short_bias), InvalidArgument);
  const Tensor bad_x = random_tensor({3, 96}, DType::F32, 65).to(Device::CUDA);
  EXPECT_THROW(ops::linear_bsr(bad_x, dev), InvalidArgument);
  const Tensor bad_residual = random_tensor({3, 32}, DType::F32, 66).to(Device::CUDA);
  EXPECT_THROW(ops::linear_bsr(x, dev, nullptr, ops::Activation::None, &bad_residual), InvalidArgument);
  EXPECT_THROW(bsr_to_cuda(host, DType::F16), InvalidArgument);
  // Leading dimensions are flattened: [2, 3, 64] runs as 6 tokens.
  const Tensor x3 = random_tensor({2, 3, 64}, DType::F32, 67);
  const Tensor y3 = ops::linear_bsr(x3.to(Device::CUDA), dev);
  EXPECT_EQ(y3.shape(), (Shape{2, 3, 64}));
  EXPECT_LE(rel_frobenius(y3.to(Device::CPU).reshape({6, 64}), reference(x3.reshape({6, 64}), host, nullptr,
                                                                         ops::Activation::None, nullptr)),
            kTolF32);
#endif
}

// ---- The block-sparse ViT on CUDA ----

#ifdef VITRT_HAVE_CUDA
// 32x32 images, 8x8 patches (17 tokens), hidden 128 in 2 heads of 64 (a head size the CUDA attention
// kernels take), MLP 256: every block size divides both MLP dims.
VitConfig gpu_sparse_vit_config() {
  VitConfig c;
  c.image_size = 32;
  c.patch_size = 8;
  c.hidden_dim = 128;
  c.num_layers = 2;
  c.num_heads = 2;
  c.mlp_dim = 256;
  c.num_classes = 10;
  return c;
}

bool is_mlp_weight(const std::string& name) {
  return name.find(".mlp.") != std::string::npos && name.size() > 7 &&
         name.compare(name.size() - 7, 7, ".weight") == 0;
}
#endif

TEST_F(CudaBsr, SparseVitMatchesDenseFoldedOnCuda) {
#ifdef VITRT_HAVE_CUDA
  const VitConfig cfg = gpu_sparse_vit_config();
  const StateDict sd = vit_random_state_dict(cfg, 77);
  Tensor images = random_tensor({3, cfg.image_size, cfg.image_size, 3}, DType::F32, 78);
  for (int b : {16, 32, 64}) {
    // Every MLP weight pruned to 60% by block magnitude; the dense twin gets the folded weights.
    StateDict rest, folded = sd;
    std::map<std::string, BsrMatrix> sparse;
    for (const auto& [name, t] : sd) {
      if (!is_mlp_weight(name)) {
        rest.emplace(name, t);
        continue;
      }
      BsrMatrix m = prune_blocks_by_magnitude(t, b, 0.6);
      folded[name] = bsr_to_dense(m);
      sparse.emplace(name, std::move(m));
    }
    ASSERT_EQ(sparse.size(), 2u * cfg.num_layers);
    const auto cpu_sparse = vit_from_sparse_state_dict(rest, sparse, Device::CPU, DType::F32, cfg.num_heads);
    const Tensor cpu_logits = vit_logits(*cpu_sparse, images);
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(::testing::Message() << "block " << b << " " << dtype_name(dt));
      const auto sparse_model = vit_from_sparse_state_dict(rest, sparse, Device::CUDA, dt, cfg.num_heads);
      ASSERT_EQ(vit_num_bsr_linears(*sparse_model), 2 * cfg.num_layers);
      // bf16 in 64-blocks on sm_90: the MLPs run as the fused kernel (ops::mlp_bsr with a plan).
      const bool fused = b == 64 && dt == DType::BF16 && cuda::device_is_sm90();
      for (const vit::EncoderLayerW& l : sparse_model->layers) EXPECT_EQ(l.mlp_plan != nullptr, fused);
      // (VITRT_BSR_MLP_FUSED=1, the ctests of the kernel's forms: every planned MLP runs fused)
      const char* force = std::getenv("VITRT_BSR_MLP_FUSED");
      if (force != nullptr && std::string(force) == "1")
        EXPECT_EQ(vit_num_fused_mlps(*sparse_model, images.size(0)), fused ? cfg.num_layers : 0);
      if (force != nullptr && std::string(force) == "0") EXPECT_EQ(vit_num_fused_mlps(*sparse_model, images.size(0)), 0);
      const auto dense_model = vit_from_state_dict(folded, Device::CUDA, dt, cfg.num_heads);
      const Tensor sparse_logits = vit_logits(*sparse_model, images);
      const Tensor dense_logits = vit_logits(*dense_model, images);
      // Same dtype on both sides: only the GEMM summation orders and roundings differ.
      EXPECT_LE(rel_frobenius(sparse_logits, dense_logits), dt == DType::F32 ? 1e-4 : 2e-2);
      // Against the fp32 CPU run of the same sparse model: bf16 also carries its storage rounding.
      EXPECT_LE(rel_frobenius(sparse_logits, cpu_logits), dt == DType::F32 ? 1e-4 : 3e-2);
    }
  }
#endif
}

// A SuperBlock Supermask model (tests/fixtures/supermask: trained in bfloat16, 90% of its MLP
// tiles masked, one tie) folded and packed as `vitrt sparsify --supermask` does, run on CUDA in
// fp32 and bf16 against the logits of SuperBlock's own model.
TEST_F(CudaBsr, SupermaskModelMatchesSuperBlockOnCuda) {
#ifdef VITRT_HAVE_CUDA
  const std::string dir = std::string(VITRT_FIXTURES) + "/supermask";
  std::ifstream in(dir + "/golden.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json g = nlohmann::json::parse(in);
  const nlohmann::json& t = g["train_bf16"];
  const StateDict folded = fold_supermasks(load_torch_checkpoint(dir + "/train_bf16.pth"), t["sparsity"].get<double>(),
                                           t["tile"].get<int>());
  StateDict rest;
  std::map<std::string, BsrMatrix> sparse;
  for (const auto& [name, w] : folded) {
    if (is_mlp_weight(name)) sparse.emplace(name, bsr_from_dense(w, 16));
    else rest.emplace(name, w);
  }
  ASSERT_EQ(sparse.size(), 4u);
  const int64_t s = g["config"]["image_size"].get<int64_t>();
  const Tensor images = Tensor::from_vector(t["inputs_nhwc"].get<std::vector<float>>(), {t["batch"].get<int64_t>(), s, s, 3});
  const std::vector<float> want_v = t["logits"].get<std::vector<float>>();
  const Tensor want = Tensor::from_vector(want_v, {t["batch"].get<int64_t>(), static_cast<int64_t>(want_v.size()) / t["batch"].get<int64_t>()});
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto model = vit_from_sparse_state_dict(rest, sparse, Device::CUDA, dt, g["config"]["num_heads"].get<int>());
    ASSERT_EQ(vit_num_bsr_linears(*model), 4);
    EXPECT_LE(rel_frobenius(vit_logits(*model, images), want), dt == DType::F32 ? 1e-4 : 3e-2);
  }
#endif
}

// The classify path's library function on the GPU (preprocessing on the host, one forward on the
// device, logits back): the same logits as on the CPU for a batch of images of different sizes, and
// the same top-1 as vit_classify on the CPU.
TEST_F(CudaBsr, ImageLogitsOnCudaMatchCpu) {
#ifdef VITRT_HAVE_CUDA
  const VitConfig cfg = gpu_sparse_vit_config();
  const StateDict sd = vit_random_state_dict(cfg, 91);
  std::vector<Image> images;
  for (auto [w, h, k] : {std::tuple{50, 40, 7}, std::tuple{33, 70, 3}, std::tuple{64, 64, 11}})
    images.push_back(vitrt::test::pattern_image(w, h, k, 5, 1));
  const auto cpu = vit_from_state_dict(sd, Device::CPU, DType::F32, cfg.num_heads);
  const Tensor cpu_logits = vit_image_logits(*cpu, images);
  ASSERT_EQ(cpu_logits.shape(), (Shape{3, cfg.num_classes}));
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto gpu = vit_from_state_dict(sd, Device::CUDA, dt, cfg.num_heads);
    const Tensor gpu_logits = vit_image_logits(*gpu, images);
    ASSERT_EQ(gpu_logits.device(), Device::CPU);
    ASSERT_EQ(gpu_logits.shape(), cpu_logits.shape());
    EXPECT_LE(rel_frobenius(gpu_logits, cpu_logits), dt == DType::F32 ? 1e-4 : 3e-2);
    if (dt == DType::F32)
      for (const Image& im : images) EXPECT_EQ(vit_classify(*gpu, im, 1)[0].first, vit_classify(*cpu, im, 1)[0].first);
  }
#endif
}

// Variant names, parsing and the heuristic (host code only: runs without a device).
TEST(CudaBsrConfig, NamesParseAndDefaultsAreSupported) {
#ifndef VITRT_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  for (int b : {16, 32, 64}) {
    const std::vector<cuda::BsrTcConfig> vs = cuda::bsr_tc_variants(b);
    EXPECT_GE(vs.size(), 20u) << "block " << b;
    bool has_legacy = false;
    for (const cuda::BsrTcConfig& c : vs) {
      EXPECT_TRUE(cuda::parse_bsr_tc_config(cuda::to_string(c)) == c) << cuda::to_string(c);
      has_legacy = has_legacy || c == cuda::BsrTcConfig{};
    }
    EXPECT_TRUE(has_legacy) << "block " << b;
    for (int64_t M : {1, 197, 50432})
      for (auto [N, K] : {std::pair<int64_t, int64_t>{3072, 768}, {768, 3072}, {5120, 1280}})
        EXPECT_TRUE(cuda::bsr_tc_config_supported(cuda::choose_bsr_tc_config(M, N, K, b, 0.1), b, K))
            << "M " << M << " N " << N << " K " << K << " block " << b;
  }
  EXPECT_TRUE(cuda::parse_bsr_tc_config("tm=256,r=2,s=3,w=8,p=1") == cuda::parse_bsr_tc_config("tm256.r2.s3.w8.p"));
  EXPECT_THROW(cuda::parse_bsr_tc_config("tm=96"), InvalidArgument);
  EXPECT_THROW(cuda::parse_bsr_tc_config("tm128.q1"), InvalidArgument);
#endif
}

}  // namespace
}  // namespace vitrt
