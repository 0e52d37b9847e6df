// The reduced form of a permutation (host code, header-only so that tests/unit can check it without a
// GPU): size-1 dims dropped, and runs of output dims that are also consecutive, in the same order, in
// the input merged into one dim. [32, 64, 64, 256] by (0, 3, 1, 2) (SAM's NHWC -> NCHW embeddings)
// becomes [32, 4096, 256] by (0, 2, 1): a batch of matrix transposes, which layout.cu's permute runs
// with a tiled kernel. x.reshape(shape).permute(perm) equals x.reshape(merged.shape).permute(merged.perm).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace vitrt::cuda {

struct MergedPermutation {
  std::vector<int64_t> shape;  // merged input dims, in input order
  std::vector<int> perm;       // output dim g takes merged input dim perm[g]
};

inline MergedPermutation merge_permutation(const std::vector<int64_t>& shape, const std::vector<int>& perm) {
  std::vector<int> rank(shape.size(), -1);  // place of each dim among the dims of size > 1
  for (size_t d = 0, r = 0; d < shape.size(); ++d)
    if (shape[d] != 1) rank[d] = static_cast<int>(r++);
  std::vector<std::vector<int>> groups;  // runs of consecutive (size > 1) input dims, in output order
  for (int d : perm) {
    if (shape[d] == 1) continue;
    if (!groups.empty() && rank[groups.back().back()] + 1 == rank[d]) groups.back().push_back(d);
    else groups.push_back({d});
  }
  // The groups in input order: by first dim (whatever lies between two groups is size 1).
  std::vector<int> order(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) order[g] = static_cast<int>(g);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return groups[a][0] < groups[b][0]; });
  MergedPermutation m;
  m.shape.resize(groups.size());
  m.perm.resize(groups.size());
  for (size_t pos = 0; pos < order.size(); ++pos) {
    int64_t n = 1;
    for (int d : groups[order[pos]]) n *= shape[d];
    m.shape[pos] = n;
    m.perm[order[pos]] = static_cast<int>(pos);
  }
  return m;
}

}  // namespace vitrt::cuda
