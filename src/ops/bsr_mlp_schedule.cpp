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

}  // namespace

BsrMlpSchedule make_bsr_mlp_schedule(const BsrMatrix& fc1, const BsrMatrix& fc2) {
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
    for (const Step& st : steps) {
      const auto n1 = static_cast<int32_t>(st.fc1.size()), n2 = static_cast<int32_t>(st.fc2.size());
      s.words.push_back(st.j | n1 << 16 | n2 << 24);
      for (const auto& [b, k] : st.fc1) {
        last_fc1_word = static_cast<int64_t>(s.words.size());
        s.words.push_back(b << 5 | k);
        s.k_mask |= 1u << k;
        ++s.fc1_blocks;
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
