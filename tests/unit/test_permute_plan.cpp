// The GPU permute's reduced permutation (src/ops/cuda/permute_plan.h), run on the host: permuting by
// the merged shape and permutation must move every element where the original permutation does,
// for random shapes with size-1 dims and every permutation kind; and SAM's NHWC -> NCHW embeddings
// must reduce to a batch of transposes (the tiled kernel's case).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "ops/cuda/permute_plan.h"

namespace vitrt::cuda {
namespace {

// Destination index of every source element of a row-major tensor of `shape` permuted by `perm`.
std::vector<int64_t> destinations(const std::vector<int64_t>& shape, const std::vector<int>& perm) {
  const size_t nd = shape.size();
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  std::vector<int64_t> out_stride(nd, 1);  // stride of each input dim in the output
  int64_t s = 1;
  for (size_t g = nd; g-- > 0;) {
    out_stride[perm[g]] = s;
    s *= shape[perm[g]];
  }
  std::vector<int64_t> dest(total);
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = nd; d-- > 0;) {
      off += (rem % shape[d]) * out_stride[d];
      rem /= shape[d];
    }
    dest[i] = off;
  }
  return dest;
}

TEST(PermutePlan, MergedPermutationMovesEveryElementAlike) {
  std::mt19937 rng(7);
  for (int t = 0; t < 3000; ++t) {
    const int nd = 1 + static_cast<int>(rng() % 6);
    std::vector<int64_t> shape(nd);
    for (auto& s : shape) s = std::vector<int64_t>{1, 1, 2, 3, 4, 5}[rng() % 6];
    std::vector<int> perm(nd);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const MergedPermutation m = merge_permutation(shape, perm);
    int64_t a = 1, b = 1;
    for (int64_t s : shape) a *= s;
    for (int64_t s : m.shape) b *= s;
    ASSERT_EQ(a, b);
    for (size_t i = 1; i < m.perm.size(); ++i) ASSERT_FALSE(m.perm[i] == m.perm[i - 1] + 1) << "an unmerged run";
    if (m.shape.empty()) continue;  // all dims of size 1
    EXPECT_EQ(destinations(shape, perm), destinations(m.shape, m.perm)) << "case " << t;
  }
}

TEST(PermutePlan, SamEmbeddingsAreABatchOfTransposes) {
  const MergedPermutation m = merge_permutation({32, 64, 64, 256}, {0, 3, 1, 2});
  EXPECT_EQ(m.shape, (std::vector<int64_t>{32, 4096, 256}));
  EXPECT_EQ(m.perm, (std::vector<int>{0, 2, 1}));
  const MergedPermutation one = merge_permutation({1, 64, 64, 24}, {0, 3, 1, 2});
  EXPECT_EQ(one.shape, (std::vector<int64_t>{4096, 24}));
  EXPECT_EQ(one.perm, (std::vector<int>{1, 0}));
  const MergedPermutation same = merge_permutation({2, 3, 4}, {0, 1, 2});  // no move at all
  EXPECT_EQ(same.shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(same.perm, (std::vector<int>{0}));
}

}  // namespace
}  // namespace vitrt::cuda
