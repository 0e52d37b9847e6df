// BSR format, pruning, the CPU block-sparse linear against the dense reference, and the vitrt model
// file round trip. A DISABLED_ test prints CPU timings against dense oneDNN (run it with
// --gtest_also_run_disabled_tests --gtest_filter='*Timing*').
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "io/vitrt_model_file.h"
#include "ops/bsr_mlp_schedule.h"
#include "ops/cpu/bsr_gemm.h"
#include "ops/ops.h"
#include "vitrt/bsr.h"

namespace vitrt {
namespace {

Tensor random_tensor(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// A weight whose block pattern is ragged: block-row r keeps blocks by a per-row rule -- empty rows,
// full rows, single blocks and random patterns all occur.
Tensor ragged_weight(int64_t rows, int64_t cols, int block, uint32_t seed) {
  Tensor w = random_tensor({rows, cols}, seed);
  std::mt19937 rng(seed + 1);
  const int64_t br_n = rows / block, bc_n = cols / block;
  for (int64_t br = 0; br < br_n; ++br) {
    const int kind = static_cast<int>(br % 4);  // 0 empty, 1 full, 2 one block, 3 random ~30%
    for (int64_t bc = 0; bc < bc_n; ++bc) {
      bool keep = kind == 1 || (kind == 2 && bc == (br * 7) % bc_n) || (kind == 3 && rng() % 10 < 3);
      if (keep) continue;
      for (int64_t i = 0; i < block; ++i)
        std::fill_n(w.data<float>() + (br * block + i) * cols + bc * block, block, 0.f);
    }
  }
  return w;
}

void expect_identical(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
}

void expect_close(const Tensor& got, const Tensor& want, double rel) {
  ASSERT_EQ(got.shape(), want.shape());
  double max_ref = 0, max_err = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    max_ref = std::max(max_ref, std::abs(static_cast<double>(want.data<float>()[i])));
    max_err = std::max(max_err, std::abs(static_cast<double>(got.data<float>()[i]) - want.data<float>()[i]));
  }
  // Relative to the output's scale: sums of many products cancel, so elementwise relative error of
  // near-zero outputs says nothing about the kernel.
  EXPECT_LE(max_err, rel * std::max(max_ref, 1.0)) << "max error " << max_err << " of max |y| " << max_ref;
}

class BsrBlock : public ::testing::TestWithParam<int> {};

TEST_P(BsrBlock, DenseRoundTripIsIdentical) {
  const int b = GetParam();
  const Tensor w = ragged_weight(4 * b, 6 * b, b, 11);
  BsrMatrix m = bsr_from_dense(w, b);
  validate(m);
  EXPECT_EQ(m.rows, 4 * b);
  EXPECT_EQ(m.cols, 6 * b);
  EXPECT_EQ(m.row_ptr.data<int32_t>()[1], 0);  // block-row 0 is empty
  EXPECT_EQ(m.row_ptr.data<int32_t>()[2], 6);  // block-row 1 is full
  expect_identical(bsr_to_dense(m), w);
  // BF16 stays BF16 and round-trips bit for bit.
  Tensor w16 = Tensor::empty(w.shape(), DType::BF16);
  for (int64_t i = 0; i < w.numel(); ++i) w16.data<uint16_t>()[i] = f32_to_bf16(w.data<float>()[i]);
  BsrMatrix m16 = bsr_from_dense(w16, b);
  EXPECT_EQ(m16.values.dtype(), DType::BF16);
  expect_identical(bsr_to_dense(m16), w16);
}

TEST_P(BsrBlock, ElementMaskIsApplied) {
  const int b = GetParam();
  const Tensor w = random_tensor({2 * b, 2 * b}, 3);
  Tensor mask = Tensor::zeros({2 * b, 2 * b}, DType::U8);
  mask.data<uint8_t>()[(b + 1) * 2 * b + 3] = 1;  // one element in block (1, 0)
  BsrMatrix m = bsr_from_dense(w, b, &mask);
  EXPECT_EQ(m.nnz_blocks(), 1);
  Tensor d = bsr_to_dense(m);
  for (int64_t i = 0; i < d.numel(); ++i)
    EXPECT_EQ(d.data<float>()[i], mask.data<uint8_t>()[i] ? w.data<float>()[i] : 0.f);
}

TEST_P(BsrBlock, PruningKeepsExactlyTheTopBlocks) {
  const int b = GetParam();
  const int64_t br_n = 5, bc_n = 8, total = br_n * bc_n;
  // Block (r, c) filled with a constant whose magnitude is a known permutation of 1..total.
  std::vector<int> rank(total);
  std::iota(rank.begin(), rank.end(), 1);
  std::shuffle(rank.begin(), rank.end(), std::mt19937(5));
  Tensor w = Tensor::empty({br_n * b, bc_n * b});
  for (int64_t r = 0; r < br_n * b; ++r)
    for (int64_t c = 0; c < bc_n * b; ++c) {
      const int v = rank[(r / b) * bc_n + c / b];
      w.data<float>()[r * bc_n * b + c] = (v % 2 ? -1.f : 1.f) * static_cast<float>(v);  // sign must not matter
    }
  for (double s : {0.0, 0.5, 0.75, 0.9}) {
    BsrMatrix m = prune_blocks_by_magnitude(w, b, s);
    validate(m);
    const int64_t keep = std::llround((1 - s) * total);
    EXPECT_EQ(m.nnz_blocks(), keep) << "sparsity " << s;
    const int32_t* rp = m.row_ptr.data<int32_t>();
    const int32_t* ci = m.col_idx.data<int32_t>();
    for (int64_t r = 0; r < br_n; ++r)
      for (int64_t k = rp[r]; k < rp[r + 1]; ++k) EXPECT_GT(rank[r * bc_n + ci[k]], total - keep);
  }
}

TEST(Bsr, PruningBreaksTiesByBlockOrder) {
  Tensor w = Tensor::empty({16, 64});
  std::fill_n(w.data<float>(), w.numel(), 1.f);  // four equal blocks
  BsrMatrix m = prune_blocks_by_magnitude(w, 16, 0.5);
  ASSERT_EQ(m.nnz_blocks(), 2);
  EXPECT_EQ(m.col_idx.data<int32_t>()[0], 0);
  EXPECT_EQ(m.col_idx.data<int32_t>()[1], 1);
}

TEST_P(BsrBlock, KernelMatchesReference) {
  const int b = GetParam();
  const int64_t N = 6 * b, K = 5 * b;
  BsrMatrix m = bsr_from_dense(ragged_weight(N, K, b, 21 + b), b);
  const Tensor bias = random_tensor({N}, 7);
  for (int64_t M : {1, 5, 7, 13, 25, 197, 394}) {
    const Tensor x = random_tensor({M, K}, static_cast<uint32_t>(M));
    for (bool with_bias : {false, true})
      for (auto act : {ops::Activation::None, ops::Activation::GELU}) {
        SCOPED_TRACE(::testing::Message() << "block " << b << " M " << M << " bias " << with_bias << " gelu "
                                          << (act == ops::Activation::GELU));
        const Tensor* bp = with_bias ? &bias : nullptr;
        const Tensor got = ops::linear_bsr(x, m, bp, act);
        Tensor want = Tensor::empty({M, N});
        cpu::bsr_linear_reference(x.data<float>(), m, bp ? bp->data<float>() : nullptr,
                                  act == ops::Activation::GELU ? cpu::Act::GELU : cpu::Act::None,
                                  want.data<float>(), M);
        expect_close(got, want, 1e-5);
        // The AVX2 micro-kernels too (ops picks AVX-512 on CPUs that have it).
        Tensor avx2 = Tensor::empty({M, N});
        cpu::bsr_linear(x.data<float>(), m, bp ? bp->data<float>() : nullptr,
                        act == ops::Activation::GELU ? cpu::Act::GELU : cpu::Act::None, avx2.data<float>(), M,
                        cpu::BsrIsa::Avx2);
        expect_close(avx2, want, 1e-5);
      }
  }
}

TEST_P(BsrBlock, KernelTakesBf16ValuesAndBatchedInput) {
  const int b = GetParam();
  const Tensor w = ragged_weight(2 * b, 3 * b, b, 4);
  Tensor w16 = Tensor::empty(w.shape(), DType::BF16);
  for (int64_t i = 0; i < w.numel(); ++i) w16.data<uint16_t>()[i] = f32_to_bf16(w.data<float>()[i]);
  const BsrMatrix m = bsr_from_dense(w16, b);
  const Tensor x = random_tensor({2, 9, 3 * b}, 8);
  const Tensor got = ops::linear_bsr(x, m);
  const Tensor want = ops::linear(x, bsr_to_dense(m).to_f32());
  ASSERT_EQ(got.shape(), (Shape{2, 9, 2 * b}));
  expect_close(got, want, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Blocks, BsrBlock, ::testing::Values(16, 32, 64));

TEST(Bsr, AllEmptyMatrixGivesBiasOnly) {
  BsrMatrix m = bsr_from_dense(Tensor::zeros({32, 64}), 16);
  EXPECT_EQ(m.nnz_blocks(), 0);
  const Tensor bias = random_tensor({32}, 1);
  const Tensor y = ops::linear_bsr(random_tensor({3, 64}, 2), m, &bias);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 32; ++j) EXPECT_EQ(y.data<float>()[i * 32 + j], bias.data<float>()[j]);
}

TEST(Bsr, LinearBsrChecksShapes) {
  BsrMatrix m = bsr_from_dense(random_tensor({32, 64}, 1), 16);
  EXPECT_THROW(ops::linear_bsr(random_tensor({3, 32}, 2), m), InvalidArgument);
  const Tensor bad_bias = random_tensor({64}, 3);
  EXPECT_THROW(ops::linear_bsr(random_tensor({3, 64}, 2), m, &bad_bias), InvalidArgument);
}

// The residual operand: y = act(x W^T + b) + residual, the activation before the residual (as
// ops::linear); the ViT's mlp.3 passes its skip connection here.
TEST(Bsr, LinearBsrAddsResidualAfterActivation) {
  const BsrMatrix m = bsr_from_dense(ragged_weight(64, 48, 16, 9), 16);
  const Tensor x = random_tensor({2, 5, 48}, 10), bias = random_tensor({64}, 11), residual = random_tensor({2, 5, 64}, 12);
  const Tensor got = ops::linear_bsr(x, m, &bias, ops::Activation::GELU, &residual);
  Tensor want = ops::linear_bsr(x, m, &bias, ops::Activation::GELU);
  ops::add_(want, residual);
  expect_close(got, want, 1e-6);
  const Tensor bad_residual = random_tensor({2, 5, 48}, 13);
  EXPECT_THROW(ops::linear_bsr(x, m, &bias, ops::Activation::None, &bad_residual), InvalidArgument);
}

// bsr_to_cuda checks the matrix and the dtype before touching a device (so these hold on any machine).
TEST(Bsr, ToCudaRejectsBadMatricesBeforeUploading) {
  BsrMatrix m = bsr_from_dense(random_tensor({32, 64}, 1), 16);
  EXPECT_FALSE(m.on_cuda());
  EXPECT_THROW(bsr_to_cuda(m, DType::F16), InvalidArgument);
  EXPECT_THROW(bsr_to_cuda(m, DType::I32), InvalidArgument);
  BsrMatrix broken = m;
  broken.col_idx = Tensor::zeros({m.nnz_blocks() + 1}, DType::I32);  // row_ptr no longer ends at nnz
  EXPECT_THROW(bsr_to_cuda(broken, DType::F32), InvalidArgument);
}

TEST(Bsr, ModelFileRoundTrip) {
  const std::string path = std::string(VITRT_TEST_TMP) + "/bsr_round_trip.vitrt";
  StateDict dense;
  dense["head.weight"] = random_tensor({10, 48}, 1);
  dense["odd.bias"] = random_tensor({7}, 2);
  Tensor w16 = Tensor::empty({64, 96}, DType::BF16);
  for (int64_t i = 0; i < w16.numel(); ++i) w16.data<uint16_t>()[i] = f32_to_bf16(static_cast<float>(i % 13) - 6.f);
  std::map<std::string, BsrMatrix> sparse;
  sparse["enc.mlp.0.weight"] = prune_blocks_by_magnitude(random_tensor({128, 64}, 3), 32, 0.5);
  sparse["enc.mlp.3.weight"] = prune_blocks_by_magnitude(w16, 16, 0.75);
  io::write_model_file(path, dense, sparse, {{"note", "test"}});
  const io::ModelFile f = io::load_model_file(path);
  ASSERT_EQ(f.dense.size(), 2u);
  ASSERT_EQ(f.sparse.size(), 2u);
  EXPECT_EQ(f.metadata.at("note"), "test");
  EXPECT_EQ(f.metadata.at("format"), io::kVitrtModelFormat);
  for (const auto& [name, t] : dense) expect_identical(f.dense.at(name), t);
  for (const auto& [name, m] : sparse) {
    const BsrMatrix& got = f.sparse.at(name);
    EXPECT_EQ(got.block, m.block);
    expect_identical(got.values, m.values);
    expect_identical(got.col_idx, m.col_idx);
    expect_identical(got.row_ptr, m.row_ptr);
    expect_identical(bsr_to_dense(got), bsr_to_dense(m));
  }
  // Any safetensors reader sees plain tensors.
  EXPECT_EQ(load_safetensors(path).size(), 2u + 3u * 2u);
  std::filesystem::remove(path);
}

// `vitrt sparsify` on a small torchvision-style state_dict: the MLP weights are pruned and packed,
// a weight the block does not divide stays dense and the command says so, everything else is kept.
TEST(Bsr, SparsifyCommand) {
  if (!std::filesystem::exists(VITRT_CLI)) GTEST_SKIP() << "vitrt CLI not built: " << VITRT_CLI;
  const std::string in = std::string(VITRT_TEST_TMP) + "/sparsify_in.safetensors";
  const std::string out = std::string(VITRT_TEST_TMP) + "/sparsify_out.vitrt";
  StateDict sd;
  sd["encoder.layers.encoder_layer_0.mlp.0.weight"] = random_tensor({256, 64}, 1);
  sd["encoder.layers.encoder_layer_0.mlp.0.bias"] = random_tensor({256}, 2);
  sd["encoder.layers.encoder_layer_0.mlp.3.weight"] = random_tensor({64, 256}, 3);
  sd["encoder.layers.encoder_layer_1.mlp.0.weight"] = random_tensor({100, 64}, 4);  // 100 % 64 != 0
  sd["encoder.layers.encoder_layer_0.self_attention.out_proj.weight"] = random_tensor({64, 64}, 5);
  io::write_model_file(in, sd, {});
  const std::string cmd = std::string(VITRT_CLI) + " sparsify -q --checkpoint " + in +
                          " --layers mlp --block 64 --sparsity 0.5 --out " + out + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) text += buf;
  ASSERT_EQ(pclose(p), 0) << text;
  EXPECT_NE(text.find("encoder_layer_1.mlp.0.weight"), std::string::npos) << text;
  EXPECT_NE(text.find("stays dense"), std::string::npos) << text;
  EXPECT_NE(text.find("kept 2 / 4 blocks, density 0.5000"), std::string::npos) << text;
  const io::ModelFile f = io::load_model_file(out);
  EXPECT_EQ(f.sparse.size(), 2u);
  EXPECT_EQ(f.dense.size(), 3u);
  const BsrMatrix& m = f.sparse.at("encoder.layers.encoder_layer_0.mlp.3.weight");
  const BsrMatrix want = prune_blocks_by_magnitude(sd.at("encoder.layers.encoder_layer_0.mlp.3.weight"), 64, 0.5);
  expect_identical(bsr_to_dense(m), bsr_to_dense(want));
  expect_identical(f.dense.at("encoder.layers.encoder_layer_1.mlp.0.weight"),
                   sd.at("encoder.layers.encoder_layer_1.mlp.0.weight"));
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

// Not a test: CPU timings of the ViT-B MLP shapes at 90% sparsity, block 64, M = 1576 tokens
// (batch 8 x 197), against dense oneDNN on the same data.
TEST(BsrTiming, DISABLED_VitBMlpShapes) {
  const int64_t M = 1576;
  for (auto [N, K] : {std::pair<int64_t, int64_t>{3072, 768}, {768, 3072}})
    for (int b : {16, 32, 64})
      for (double s : {0.5, 0.8, 0.9}) {
        const Tensor w = random_tensor({N, K}, 1);
        const BsrMatrix m = prune_blocks_by_magnitude(w, b, s);
        const Tensor folded = bsr_to_dense(m);
        const Tensor x = random_tensor({M, K}, 2), bias = random_tensor({N}, 3);
        auto time = [&](auto&& f) {
          f();
          const int reps = 5;
          auto t0 = std::chrono::steady_clock::now();
          for (int r = 0; r < reps; ++r) f();
          return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
        };
        const double dense_ms = time([&] { ops::linear(x, folded, &bias, ops::Activation::GELU); });
        const double sparse_ms = time([&] { ops::linear_bsr(x, m, &bias, ops::Activation::GELU); });
        std::printf("weight [%lld, %lld] M %lld block %d sparsity %.2f: dense oneDNN %.2f ms, BSR %.2f ms, "
                    "speed-up %.2fx\n",
                    static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(M), b, s, dense_ms,
                    sparse_ms, dense_ms / sparse_ms);
      }
}

// The Hopper kernel's copy of the values: 8 x 8 core matrices, row-major over the tiles. Positions
// worked out by hand for block 32 (4 tiles per row): (i, j) -> ((i / 8) * 4 + j / 8) * 64 +
// (i % 8) * 8 + j % 8; every value kept (a permutation within its block); BF16 moves 2-byte elements.
TEST(Bsr, CoreMatrixOrderPlacesEachElementInItsTile) {
  const int b = 32;
  Tensor v = Tensor::empty({2, b, b});
  for (int64_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j) v.data<float>()[(k * b + i) * b + j] = static_cast<float>(k * 10000 + i * 100 + j);
  const Tensor cm = bsr_core_matrix_order(v, b);
  const float* o = cm.data<float>();
  EXPECT_EQ(o[0], 0.f);           // (0, 0)
  EXPECT_EQ(o[1], 1.f);           // (0, 1)
  EXPECT_EQ(o[8], 100.f);         // (1, 0): next row of the first tile
  EXPECT_EQ(o[64], 8.f);          // (0, 8): first element of the second tile
  EXPECT_EQ(o[267], 903.f);       // (9, 3): tile (1, 0) = 4th, row 1, column 3
  EXPECT_EQ(o[1023], 3131.f);     // (31, 31): last
  EXPECT_EQ(o[1024 + 267], 10903.f);  // the second block, same place
  std::vector<float> a(v.data<float>(), v.data<float>() + v.numel()), c(o, o + cm.numel());
  std::sort(a.begin(), a.end());
  std::sort(c.begin(), c.end());
  EXPECT_EQ(a, c);
  Tensor h = Tensor::empty({1, 64, 64}, DType::BF16);
  for (int64_t i = 0; i < h.numel(); ++i) h.data<uint16_t>()[i] = static_cast<uint16_t>(i);
  const Tensor hc = bsr_core_matrix_order(h, 64);
  // (9, 3) at block 64 (8 tiles per row): ((1 * 8) + 0) * 64 + 1 * 8 + 3 = 523; source index 9 * 64 + 3.
  EXPECT_EQ(hc.data<uint16_t>()[523], 9 * 64 + 3);
  EXPECT_THROW(bsr_core_matrix_order(Tensor::empty({2, 32, 16}), 32), InvalidArgument);
  EXPECT_THROW(bsr_core_matrix_order(Tensor::empty({32, 32}), 32), InvalidArgument);
}


// The fused MLP kernel's schedule (ops/bsr_mlp_schedule.h): decoded on the host, it must name every
// stored fc2 block exactly once, in its block-row's group and in increasing j, each step's fc1
// blocks exactly as fc1's block-row j, flag the last fc1 word once, and -- followed as the kernel
// follows it, in fp32 -- give the MLP of the dense weights.
TEST(BsrMlpSchedule, DecodesToTheMlpOfTheDenseWeights) {
  const int b = 16;
  const int64_t D = 5 * b, H = 12 * b, N = 7 * b, M = 9;
  const Tensor w1 = ragged_weight(H, D, b, 71), w2 = ragged_weight(N, H, b, 72);
  const BsrMatrix fc1 = bsr_from_dense(w1, b), fc2 = bsr_from_dense(w2, b);
  const ops::BsrMlpSchedule s = ops::make_bsr_mlp_schedule(fc1, fc2);
  ASSERT_EQ(s.groups, N / b);
  ASSERT_EQ(static_cast<int>(s.group_begin.size()), s.groups + 1);
  const Tensor x = random_tensor({M, D}, 73), b1 = random_tensor({H}, 74), b2 = random_tensor({N}, 75);
  const float* X = x.data<float>();
  const float* W1 = w1.data<float>();
  const float* W2 = w2.data<float>();
  const int32_t* rp1 = fc1.row_ptr.data<int32_t>();
  const int32_t* rp2 = fc2.row_ptr.data<int32_t>();
  const int32_t* ci2 = fc2.col_idx.data<int32_t>();
  auto gelu = [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };
  std::vector<double> y(M * N, 0.0);
  int lasts = 0;
  int64_t fc1_words = 0, fc2_words = 0;
  uint32_t k_mask = 0;
  for (int g = 0; g < s.groups; ++g) {
    std::vector<int32_t> seen_cols;
    for (int w = s.group_begin[g]; w < s.group_begin[g + 1];) {
      const int32_t hdr = s.words[w++];
      const int j = hdr & 0xffff, n1 = (hdr >> 16) & 255, n2 = (hdr >> 24) & 255;
      ASSERT_TRUE(j >= 0 && j < H / b);
      ASSERT_EQ(n1, rp1[j + 1] - rp1[j]) << "group " << g << " step j " << j;
      ASSERT_EQ(n2, 1);  // one fc2 block-row per group: one block of it per step
      // h_j = GELU(x W1[j]^T + b1) from the fc1 words' blocks only
      std::vector<double> hj(M * b, 0.0);
      std::vector<int32_t> blocks;
      for (int q = 0; q < n1; ++q, ++w) {
        const int32_t word = s.words[w];
        const int32_t blk = word >> 5, k = word & 15;
        ASSERT_EQ(blk, rp1[j] + q);
        ASSERT_TRUE(blk >= rp1[j] && blk < rp1[j + 1]) << "an fc1 block outside block-row j";
        blocks.push_back(blk);
        ASSERT_EQ(k, fc1.col_idx.data<int32_t>()[blk]);
        lasts += (word >> 4) & 1;
        k_mask |= 1u << k;
        ++fc1_words;
        for (int64_t m = 0; m < M; ++m)
          for (int r = 0; r < b; ++r)
            for (int c = 0; c < b; ++c)
              hj[m * b + r] += static_cast<double>(X[m * D + k * b + c]) * W1[(j * b + r) * D + k * b + c];
      }
      std::sort(blocks.begin(), blocks.end());
      ASSERT_EQ(std::unique(blocks.begin(), blocks.end()), blocks.end()) << "an fc1 block twice in a step";
      for (int64_t m = 0; m < M; ++m)
        for (int r = 0; r < b; ++r) hj[m * b + r] = gelu(hj[m * b + r] + b1.data<float>()[j * b + r]);
      for (int q = 0; q < n2; ++q, ++w) {
        const int32_t word = s.words[w];
        const int32_t blk = word >> 1;
        ASSERT_EQ(word & 1, 0);
        ASSERT_TRUE(blk >= rp2[g] && blk < rp2[g + 1]) << "an fc2 block outside the group's block-row";
        ASSERT_EQ(ci2[blk], j);
        seen_cols.push_back(j);
        ++fc2_words;
        for (int64_t m = 0; m < M; ++m)
          for (int r = 0; r < b; ++r)
            for (int c = 0; c < b; ++c) y[m * N + g * b + r] += hj[m * b + c] * W2[(g * b + r) * H + j * b + c];
      }
    }
    // Every stored block of block-row g, in order.
    ASSERT_EQ(static_cast<int32_t>(seen_cols.size()), rp2[g + 1] - rp2[g]) << "group " << g;
    for (size_t i = 0; i < seen_cols.size(); ++i) EXPECT_EQ(seen_cols[i], ci2[rp2[g] + i]);
  }
  EXPECT_EQ(lasts, fc1_words > 0 ? 1 : 0);
  EXPECT_EQ(s.fc1_blocks, fc1_words);
  EXPECT_EQ(s.fc2_blocks, fc2_words);
  EXPECT_EQ(s.fc2_blocks, fc2.nnz_blocks());
  EXPECT_EQ(s.k_mask, k_mask);
  // The dense MLP (no residual), in double.
  double max_err = 0, max_ref = 0;
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> h(H);
    for (int64_t r = 0; r < H; ++r) {
      double a = b1.data<float>()[r];
      for (int64_t c = 0; c < D; ++c) a += static_cast<double>(X[m * D + c]) * W1[r * D + c];
      h[r] = gelu(a);
    }
    for (int64_t n = 0; n < N; ++n) {
      double a = 0;
      for (int64_t r = 0; r < H; ++r) a += h[r] * W2[n * H + r];
      max_ref = std::max(max_ref, std::abs(a));
      max_err = std::max(max_err, std::abs(a - y[m * N + n]));
    }
  }
  ASSERT_GT(max_ref, 1.0);
  EXPECT_LE(max_err, 1e-9 * max_ref);
}

TEST(BsrMlpSchedule, RejectsPairsThatDoNotChain) {
  const BsrMatrix fc1 = bsr_from_dense(ragged_weight(64, 32, 16, 81), 16);
  const BsrMatrix fc2_bad = bsr_from_dense(ragged_weight(32, 48, 16, 82), 16);   // takes 48, not 64
  const BsrMatrix fc2_b32 = bsr_from_dense(ragged_weight(32, 64, 32, 83), 32);   // another block size
  EXPECT_THROW(ops::make_bsr_mlp_schedule(fc1, fc2_bad), InvalidArgument);
  EXPECT_THROW(ops::make_bsr_mlp_schedule(fc1, fc2_b32), InvalidArgument);
  const BsrMatrix wide = bsr_from_dense(ragged_weight(64, 17 * 16, 16, 84), 16);  // 17 column blocks
  const BsrMatrix fc2_wide = bsr_from_dense(ragged_weight(32, 64, 16, 85), 16);
  EXPECT_THROW(ops::make_bsr_mlp_schedule(wide, fc2_wide), InvalidArgument);
}

// ---- ops::simplify_bsr_mlp

// w with the blocks (block-row r, block-column c) for which drop(r, c) holds set to zero.
Tensor zero_blocks(Tensor w, int b, const std::function<bool(int64_t, int64_t)>& drop) {
  const int64_t cols = w.size(1);
  for (int64_t r = 0; r < w.size(0) / b; ++r)
    for (int64_t c = 0; c < cols / b; ++c)
      if (drop(r, c))
        for (int64_t i = 0; i < b; ++i) std::fill_n(w.data<float>() + (r * b + i) * cols + c * b, b, 0.f);
  return w;
}

// Stored blocks of m in block-rows (rows = true) or block-columns for which `pick` holds.
int64_t blocks_where(const BsrMatrix& m, bool rows, const std::function<bool(int64_t)>& pick) {
  int64_t n = 0;
  for (int64_t r = 0; r < m.block_rows(); ++r)
    for (int32_t k = m.row_ptr.data<int32_t>()[r]; k < m.row_ptr.data<int32_t>()[r + 1]; ++k)
      n += pick(rows ? r : m.col_idx.data<int32_t>()[k]);
  return n;
}

// fc1's hidden block-rows 0, 4 (ragged_weight: every fourth row empty, and random ones may be) are
// GELU(b1) for any input; fc2 reads no block of hidden block-columns 1 and 6. The simplified pair
// computes the same MLP as the dense weights (the reference: two dense linears) without fc1's
// unread rows and fc2's blocks in constant columns, and leaves every other stored block as it was.
// F32 and BF16 values.
TEST_P(BsrBlock, SimplifiedMlpComputesTheSameFunction) {
  const int b = GetParam();
  const int64_t D = 4 * b, H = 8 * b, N = 3 * b;
  const Tensor w1 = ragged_weight(H, D, b, 31 + b);
  const Tensor w2 = zero_blocks(random_tensor({N, H}, 32 + b), b,
                                [&](int64_t r, int64_t c) { return c == 1 || c == 6 || (r + c) % 5 == 0; });
  // (ragged_weight's random rows may come out empty too: the sets from the weights themselves)
  const BsrMatrix p1 = bsr_from_dense(w1, b), p2 = bsr_from_dense(w2, b);
  std::vector<bool> is_constant(H / b), is_read(H / b, false);
  for (int64_t j = 0; j < H / b; ++j) is_constant[j] = p1.row_ptr.data<int32_t>()[j] == p1.row_ptr.data<int32_t>()[j + 1];
  for (int64_t k = 0; k < p2.nnz_blocks(); ++k) is_read[p2.col_idx.data<int32_t>()[k]] = true;
  ASSERT_TRUE(is_constant[0] && is_constant[4] && !is_read[1] && !is_read[6]);
  const auto unread = [&](int64_t j) { return !is_read[j]; };
  const auto constant = [&](int64_t j) { return is_constant[j]; };
  const Tensor b1 = random_tensor({H}, 33), b2 = random_tensor({N}, 34);
  const Tensor x = random_tensor({7, D}, 35);
  Tensor h = ops::linear(x, w1, &b1, ops::Activation::GELU);
  const Tensor want = ops::linear(h, w2, &b2);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(::testing::Message() << "block " << b << " " << dtype_name(dt));
    const BsrMatrix fc1 = bsr_from_dense(ops::cast(w1, dt), b), fc2 = bsr_from_dense(ops::cast(w2, dt), b);
    const ops::SimplifiedBsrMlp s = ops::simplify_bsr_mlp(fc1, b1, fc2, b2);
    EXPECT_EQ(s.fc1_blocks_dropped, blocks_where(fc1, true, unread));
    EXPECT_EQ(s.fc2_blocks_folded, blocks_where(fc2, false, constant));
    EXPECT_GT(s.fc1_blocks_dropped, 0);
    EXPECT_GT(s.fc2_blocks_folded, 0);
    EXPECT_EQ(blocks_where(s.fc1, true, unread), 0);
    EXPECT_EQ(blocks_where(s.fc2, false, constant), 0);
    EXPECT_EQ(s.fc1.values.dtype(), dt);
    // Every block kept is the original's.
    const Tensor d1 = bsr_to_dense(s.fc1).to_f32(), o1 = bsr_to_dense(fc1).to_f32();
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < D; ++j)
        ASSERT_EQ(d1.data<float>()[i * D + j], unread(i / b) ? 0.f : o1.data<float>()[i * D + j]) << i << ", " << j;
    const Tensor d2 = bsr_to_dense(s.fc2).to_f32(), o2 = bsr_to_dense(fc2).to_f32();
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < H; ++j)
        ASSERT_EQ(d2.data<float>()[i * H + j], constant(j / b) ? 0.f : o2.data<float>()[i * H + j]) << i << ", " << j;
    // The MLP: against the dense F32 weights (exact for F32 values; the BF16 values are rounded).
    Tensor hs = ops::linear_bsr(x, s.fc1, &b1, ops::Activation::GELU);
    const Tensor got = ops::linear_bsr(hs, s.fc2, &s.b2);
    if (dt == DType::F32) {
      expect_close(got, want, 1e-5);
    } else {
      Tensor h16 = ops::linear_bsr(x, fc1, &b1, ops::Activation::GELU);
      expect_close(got, ops::linear_bsr(h16, fc2, &b2), 1e-5);  // the unsimplified BF16 pair
    }
  }
}

// Nothing constant, nothing unread: the same matrices and bias back.
TEST(Bsr, SimplifyBsrMlpKeepsPairsWithoutConstantParts) {
  const BsrMatrix fc1 = bsr_from_dense(random_tensor({64, 32}, 41), 16);
  const BsrMatrix fc2 = bsr_from_dense(random_tensor({48, 64}, 42), 16);
  const Tensor b1 = random_tensor({64}, 43), b2 = random_tensor({48}, 44);
  const ops::SimplifiedBsrMlp s = ops::simplify_bsr_mlp(fc1, b1, fc2, b2);
  EXPECT_EQ(s.fc1_blocks_dropped, 0);
  EXPECT_EQ(s.fc2_blocks_folded, 0);
  expect_identical(bsr_to_dense(s.fc1), bsr_to_dense(fc1));
  expect_identical(bsr_to_dense(s.fc2), bsr_to_dense(fc2));
  expect_identical(s.b2, b2);
}

TEST(Bsr, SimplifyBsrMlpRejectsPairsThatDoNotChain) {
  const BsrMatrix fc1 = bsr_from_dense(ragged_weight(64, 32, 16, 51), 16);
  const BsrMatrix fc2 = bsr_from_dense(ragged_weight(32, 64, 16, 52), 16);
  const Tensor b1 = random_tensor({64}, 53), b2 = random_tensor({32}, 54);
  const BsrMatrix fc2_bad = bsr_from_dense(ragged_weight(32, 48, 16, 55), 16);  // takes 48, not 64
  const BsrMatrix fc2_b32 = bsr_from_dense(ragged_weight(32, 64, 32, 56), 32);  // another block size
  EXPECT_THROW(ops::simplify_bsr_mlp(fc1, b1, fc2_bad, b2), InvalidArgument);
  EXPECT_THROW(ops::simplify_bsr_mlp(fc1, b1, fc2_b32, b2), InvalidArgument);
  EXPECT_THROW(ops::simplify_bsr_mlp(fc1, b2, fc2, b2), InvalidArgument);  // b1 of fc2's size
  EXPECT_THROW(ops::simplify_bsr_mlp(fc1, b1, fc2, b1), InvalidArgument);
  EXPECT_THROW(ops::simplify_bsr_mlp(fc1, ops::cast(b1, DType::BF16), fc2, b2), InvalidArgument);
  BsrMatrix broken = fc2;
  broken.col_idx = Tensor::zeros({fc2.nnz_blocks()}, DType::I32);  // not increasing within a row
  EXPECT_THROW(ops::simplify_bsr_mlp(fc1, b1, broken, b2), InvalidArgument);
}

}  // namespace
}  // namespace vitrt
