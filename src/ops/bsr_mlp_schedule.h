// The work list of the fused block-sparse MLP kernel (ops/cuda/bsr_mlp_fused.cu), built on the host
// from the two weights' structure: y = fc2(GELU(fc1(x) + b1)) + b2 + residual with fc1 [H, D] and
// fc2 [N, H] both BSR in b x b blocks.
//
// Why a schedule: the kernel never writes the hidden activation h = GELU(fc1(x) + b1) ([M, H], 4x
// the size of x) to memory. A CTA owns a tile of tokens and a *group* of fc2's block-rows (G of
// them: G b-wide slices of y, kept in registers), and walks the hidden blocks j that the group
// needs: those where one of its fc2 block-rows stores block (i, j). For each it computes the
// b-wide slice h_j from fc1's block-row j (its stored blocks (j, k) times x's column block k), and
// multiplies it straight away, from registers, by the group's stored blocks (i, j) of fc2. A hidden
// block no fc2 block of the group reads is never computed; at 90% sparsity with G = 1 a group needs
// ~10% of them, so the groups together compute fc1 ~1.2 times over (G = 2: 1.14, G = 4: 1.03).
// The kernel takes G = 1: with two accumulator sets the choice between them is a branch around the
// wgmmas, and ptxas then serialises every wgmma of the kernel (C7518); at G = 1 the fc1 work is 3%
// more of the total instead.
//
// Encoding (int32 words, one run per group, `group_begin[g] .. group_begin[g + 1]`), per step:
//   header           j | n1 << 16 | n2 << 24      hidden block j, n1 fc1 blocks, n2 fc2 blocks
//   n1 fc1 words     b1 << 5 | last << 4 | k      b1: index of block (j, k) in fc1's values;
//                                                 last: the tile's last fc1 block (x is then free)
//   n2 fc2 words     b2 << 1 | local              b2: index of block (i, j) in fc2's values,
//                                                 local = i - G g (0: the kernel takes G = 1)
// The fc1 blocks of a step are in increasing k, its fc2 blocks in increasing i, the steps of a group
// in increasing j: every output accumulates its products in the order of the unfused kernels.
#pragma once
#include <cstdint>
#include <vector>

#include "vitrt/bsr.h"

namespace vitrt::ops {

struct BsrMlpSchedule {
  static constexpr int kGroupRows = 1;  // G: fc2 block-rows per group (see below)
  std::vector<int32_t> words;
  std::vector<int32_t> group_begin;  // [groups + 1]
  int groups = 0;
  uint32_t k_mask = 0;  // bit k: some fc1 block reads x's column block k (the kernel loads only those)
  int64_t fc1_blocks = 0, fc2_blocks = 0;  // words of each kind (fc1 blocks counted with recomputation)
};

// Throws InvalidArgument unless fc1 [H, D] and fc2 [N, H] are valid BSR matrices of one block size
// whose shapes chain (fc2.cols == fc1.rows), with D / block <= 16, H / block < 65536 and fewer than
// 2^26 stored blocks each.
BsrMlpSchedule make_bsr_mlp_schedule(const BsrMatrix& fc1, const BsrMatrix& fc2);

}  // namespace vitrt::ops
