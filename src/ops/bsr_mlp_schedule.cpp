#include "ops/bsr_mlp_schedule.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "vitrt/error.h"

namespace vitrt::ops {

namespace {

// One step of a group: hidden block j, its fc1 blocks (index into fc1's values, column block k), its
// fc2 blocks (index into fc2's values, block-row within the group).
struct Step {
  int32_t j;
  std::vector<std::pair<int32_t, int32_t>> fc1;  // (block, k)
  std::vector<std::pair<int32_t, int32_t>> fc2;  // (block, local row)
};

// BsrMlpOrder::XReuse for one group's steps (in increasing j), given the k of the fc1 block before them
// (-1: none).
void order_for_x_reuse(std::vector<Step>& steps, int32_t prev) {
  std::vector<Step> out;
  out.reserve(steps.size());
  std::vector<bool> used(steps.size(), false);
  for (size_t n = 0; n < steps.size(); ++n) {
    // The first unused step reading `prev`, else the first unused one.
    size_t pick = steps.size();
    for (size_t i = 0; i < steps.size() && pick == steps.size(); ++i)
      if (!used[i])
        for (const auto& b : steps[i].fc1)
          if (b.second == prev) pick = i;
    if (pick == steps.size())
      for (size_t i = 0; i < steps.size(); ++i)
        if (!used[i]) {
          pick = i;
          break;
        }
    used[pick] = true;
    Step st = steps[pick];
    if (!st.fc1.empty()) {
      // prev first; last, the k the remaining steps read most (ties: the smaller k); the rest in order.
      std::vector<int> count(16, 0);
      for (size_t i = 0; i < steps.size(); ++i)
        if (!used[i])
          for (const auto& b : steps[i].fc1) ++count[b.second];
      auto& f = st.fc1;
      std::stable_sort(f.begin(), f.end(), [&](const auto& a, const auto& b) { return a.second < b.second; });
      const auto first = std::find_if(f.begin(), f.end(), [&](const auto& b) { return b.second == prev; });
      if (first != f.end()) std::rotate(f.begin(), first, first + 1);
      const size_t from = first != f.end() ? 1 : 0;
      if (f.size() > from + 1) {
        size_t best = from;
        for (size_t i = from; i < f.size(); ++i)
          if (count[f[i].second] > count[f[best].second]) best = i;
        std::rotate(f.begin() + static_cast<std::ptrdiff_t>(best), f.begin() + static_cast<std::ptrdiff_t>(best) + 1,
                    f.end());
      }
      prev = f.back().second;
    }
    out.push_back(std::move(st));
  }
  steps = std::move(out);
}

}  // namespace

BsrMlpSchedule make_bsr_mlp_schedule(const BsrMatrix& fc1, const BsrMatrix& fc2, BsrMlpOrder order) {
  constexpr const char* kOp = "bsr mlp schedule";
  validate(fc1, "fused MLP fc1");
  validate(fc2, "fused MLP fc2");
  VITRT_CHECK(fc1.block == fc2.block, InvalidArgument, kOp, ": fc1 and fc2 have different blocks (", fc1.block,
              ", ", fc2.block, ")");
  VITRT_CHECK(fc2.cols == fc1.rows, InvalidArgument, kOp, ": fc2 [", fc2.rows, ", ", fc2.cols,
              "] does not take fc1's output [.., ", fc1.rows, "]");
  const int64_t kb = fc1.block_cols(), hb = fc1.block_rows(), nb = fc2.block_rows();
  VITRT_CHECK(kb <= 16 && hb < 65536, InvalidArgument, kOp, ": fc1 [", fc1.rows, ", ", fc1.cols,
              "] is too large for the encoding (at most 16 x 65535 blocks)");
  VITRT_CHECK(fc1.nnz_blocks() < (int64_t{1} << 26) && fc2.nnz_blocks() < (int64_t{1} << 26), InvalidArgument, kOp,
              ": too many stored blocks");
  const int32_t* rp1 = fc1.row_ptr.data<int32_t>();
  const int32_t* ci1 = fc1.col_idx.data<int32_t>();
  const int32_t* rp2 = fc2.row_ptr.data<int32_t>();
  const int32_t* ci2 = fc2.col_idx.data<int32_t>();
  constexpr int G = BsrMlpSchedule::kGroupRows;

  BsrMlpSchedule s;
  s.groups = static_cast<int>((nb + G - 1) / G);
  s.group_begin.push_back(0);
  int64_t last_fc1_word = -1;
  int32_t prev_k = -1;  // the k of the last fc1 block emitted (a tile's walk goes group after group)
  for (int g = 0; g < s.groups; ++g) {
    // Merge the group's block-rows' column lists (each sorted): the steps, in increasing j.
    const int r0 = g * G, r1 = static_cast<int>(std::min<int64_t>(nb, r0 + G));
    std::vector<int32_t> pos(r1 - r0);
    for (int i = r0; i < r1; ++i) pos[i - r0] = rp2[i];
    std::vector<Step> steps;
    for (;;) {
      int32_t j = INT32_MAX;
      for (int i = r0; i < r1; ++i)
        if (pos[i - r0] < rp2[i + 1]) j = std::min(j, ci2[pos[i - r0]]);
      if (j == INT32_MAX) break;
      Step st{j, {}, {}};
      for (int32_t b = rp1[j]; b < rp1[j + 1]; ++b) st.fc1.emplace_back(b, ci1[b]);
      for (int i = r0; i < r1; ++i)
        if (pos[i - r0] < rp2[i + 1] && ci2[pos[i - r0]] == j) st.fc2.emplace_back(pos[i - r0]++, i - r0);
      steps.push_back(std::move(st));
    }
    if (order == BsrMlpOrder::XReuse) order_for_x_reuse(steps, prev_k);
    for (const Step& st : steps) {
      const auto n1 = static_cast<int32_t>(st.fc1.size()), n2 = static_cast<int32_t>(st.fc2.size());
      s.words.push_back(st.j | n1 << 16 | n2 << 24);
      for (const auto& [b, k] : st.fc1) {
        last_fc1_word = static_cast<int64_t>(s.words.size());
        s.words.push_back(b << 5 | k);
        s.k_mask |= 1u << k;
        ++s.fc1_blocks;
        s.x_reuses += k == prev_k;
        prev_k = k;
      }
      for (const auto& [b, local] : st.fc2) {
        s.words.push_back(b << 1 | local);
        ++s.fc2_blocks;
      }
    }
    s.group_begin.push_back(static_cast<int32_t>(s.words.size()));
  }
  if (last_fc1_word >= 0) s.words[last_fc1_word] |= 1 << 4;
  return s;
}

}  // namespace vitrt::ops
