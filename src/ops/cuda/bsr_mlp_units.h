// The fused block-sparse MLP's division of work (bsr_mlp_fused.cu): which units a persistent CTA
// takes. Host and device (tested on the host).
//
// A unit is a token tile and one fc2 block-row in the streamed forms (nothing of a tile stays in
// shared memory across its block-rows), a whole tile in the resident form; `tile_units` units per
// tile, tile-major. Contiguous ranges (the resident form; the streamed forms where tiles are not
// shared, below): a CTA takes a range, meant to run a tile's block-rows one after another on one SM
// while its x rows are in L2 (they were not: see below), and the ranges differ by at most one unit; or, with
// `whole_tiles`, by at most one tile, every range whole tiles: a tile split between two CTAs is read
// from memory by both, at the end of one's range and the start of the other's, far apart in time.
// (A stride of the grid would give every CTA the same block-row whenever the SM count is a multiple of
// the block-rows, 132 and ViT-B's 12, and the block-rows' work differs.)
//
// Tiles shared (BsrMlpTileParts, the streamed forms' default where it fits): P CTAs work on one tile at a
// time, each on a fixed part of its block-rows (parts balanced by the schedule's words), and the grid's
// grid / P groups of CTAs take the tiles in turn. Why: with contiguous ranges 132 tiles are in flight
// at once, and each tile's x slabs are read from L2 again at every block-row that needs them (~5 times
// at ViT-B @ 0.9): 132 x 384 KB of x is the whole of the L2, so most re-reads went to DRAM (ncu, H100,
// 2026-12-06: L2 hit rate 49%, 530 MB of DRAM traffic against the 231 MB of x, residual and y). Shared,
// 33 tiles are in flight (13 MB at P = 4), each tile's slabs read by its P CTAs at about the same time.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/cuda/host_device.h"

namespace vitrt::cuda {

struct BsrMlpUnitRange {
  int begin, end;  // units [begin, end)
};
// (tiles * tile_units < 2^31: the host checks)
VITRT_HOST_DEVICE inline BsrMlpUnitRange bsr_mlp_unit_range(int tiles, int tile_units, bool whole_tiles, int cta,
                                                            int grid) {
  const int64_t split = whole_tiles ? tiles : int64_t{tiles} * tile_units, per = whole_tiles ? tile_units : 1;
  return {static_cast<int>(split * cta / grid * per), static_cast<int>(split * (cta + 1) / grid * per)};
}

// Whole tiles per CTA where that costs at most 1/16 of the time in the uneven split (the busiest CTA's
// ceil(tiles / grid) tiles against the average tiles / grid): ViT-B/16 at batch 256, 263 tiles of 192
// tokens on 132 SMs, 2 against 1.99; not for 200 tiles (2 against 1.5). (Just under one tile per SM,
// some CTAs get none: the busiest one has a tile either way.)
inline bool bsr_mlp_whole_tiles(int64_t tiles, int grid) {
  const int64_t most = (tiles + grid - 1) / grid;
  return most * grid * 16 <= tiles * 17;
}

// The parts of a tile's block-rows, P CTAs per tile (ctas = 0: contiguous ranges instead).
constexpr int kMaxTileParts = 8;
constexpr int kMaxPartRows = 32;
struct BsrMlpTileParts {
  int ctas = 0;                              // P
  int8_t begin[kMaxTileParts + 1] = {};      // part i: rows[begin[i] .. begin[i + 1])
  int8_t rows[kMaxPartRows] = {};            // block-rows, each once, ascending within a part
};

// The block-rows (cost[g]: the schedule's words of block-row g) in P parts, longest processing time
// first (each row to the part with the least cost so far), or ctas = 0 where they do not fit the table.
inline BsrMlpTileParts bsr_mlp_tile_parts(const std::vector<int64_t>& cost, int P) {
  BsrMlpTileParts t;
  const int groups = static_cast<int>(cost.size());
  if (P < 1 || P > kMaxTileParts || groups < P || groups > kMaxPartRows) return t;
  std::vector<int> order(groups);
  for (int g = 0; g < groups; ++g) order[g] = g;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cost[a] > cost[b]; });
  std::vector<int64_t> load(P, 0);
  std::vector<std::vector<int>> part(P);
  for (int g : order) {
    const int i = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[i] += cost[g];
    part[i].push_back(g);
  }
  int k = 0;
  for (int i = 0; i < P; ++i) {
    std::sort(part[i].begin(), part[i].end());
    t.begin[i] = static_cast<int8_t>(k);
    for (int g : part[i]) t.rows[k++] = static_cast<int8_t>(g);
  }
  t.begin[P] = static_cast<int8_t>(k);
  t.ctas = P;
  return t;
}

// The tile-sharing choice for `tiles` tiles on at most `grid` CTAs: among P of {6, 4, 3, 2} whose
// groups get two tiles at least, the largest whose modelled time (the busiest group's tiles x its
// busiest part) is within 5% of the least, if that is within 10% of the perfectly even split (tiles x
// total cost / grid); else ctas = 0. Why the largest: fewer tiles in flight, and the model does not
// see L2. Measured (H100, 2026-12-06, fused MLP, M = 50432, ms at 0.8 / 0.9 / 0.95): ViT-B P = 4
// 0.367 / 0.194 / 0.125, P = 2 0.394 / 0.196 / 0.129, P = 6 0.387 / 0.195 / 0.146, contiguous ranges
// 0.412-0.425 / 0.227-0.229 / 0.133-0.134; ViT-S (6 block-rows) P = 2 0.104 / 0.071 / 0.059, P = 4
// 0.115 / 0.077 / 0.065, ranges 0.102 / 0.072-0.073 / 0.059. `want` > 0 asks for that P alone,
// wherever its parts fit (P <= block-rows <= kMaxPartRows, P <= grid).
inline BsrMlpTileParts bsr_mlp_choose_tile_parts(const std::vector<int64_t>& cost, int64_t tiles, int grid,
                                                int want = 0) {
  int64_t total = 0;
  for (int64_t c : cost) total += c;
  BsrMlpTileParts part[4];
  double time[4] = {};
  const int Ps[4] = {6, 4, 3, 2};
  double least = 0;
  for (int i = 0; i < 4; ++i) {
    const int P = Ps[i], groups = grid / P;
    if ((want > 0 && P != want) || groups < 1 || (want == 0 && tiles < 2 * static_cast<int64_t>(groups))) continue;
    part[i] = bsr_mlp_tile_parts(cost, P);
    if (part[i].ctas == 0) continue;
    int64_t most = 0;
    for (int j = 0; j < P; ++j) {
      int64_t c = 0;
      for (int k = part[i].begin[j]; k < part[i].begin[j + 1]; ++k) c += cost[part[i].rows[k]];
      most = std::max(most, c);
    }
    time[i] = static_cast<double>((tiles + groups - 1) / groups) * static_cast<double>(most);
    if (least == 0 || time[i] < least) least = time[i];
  }
  if (least == 0) return BsrMlpTileParts{};
  if (want > 0) {
    for (int i = 0; i < 4; ++i)
      if (part[i].ctas != 0) return part[i];
  }
  const double even = static_cast<double>(tiles) * static_cast<double>(total) / grid;
  if (least > 1.1 * even) return BsrMlpTileParts{};
  for (int i = 0; i < 4; ++i)  // (largest P first)
    if (part[i].ctas != 0 && time[i] <= 1.05 * least) return part[i];
  return BsrMlpTileParts{};
}

// A CTA's units in order, for both schedules: (tile, first block-row) pairs. Contiguous: the range of
// bsr_mlp_unit_range; shared tiles: tiles group, group + groups, ... (group = cta / P, groups = grid /
// P; a CTA beyond groups x P has none), and per tile the block-rows of part cta % P.
struct BsrMlpUnitCursor {
  int u = 0, end = 0, tile_units = 1;  // contiguous
  int tile = 0, tiles = 0, step = 1, k = 0, k_begin = 0, k_end = 0;  // shared
  bool shared = false;
  VITRT_HOST_DEVICE BsrMlpUnitCursor(int tiles_, int tile_units_, bool whole_tiles, const BsrMlpTileParts& parts, int cta,
                                     int grid) {
    if (parts.ctas > 0) {
      shared = true;
      const int P = parts.ctas, groups = grid / P;
      tiles = cta < groups * P ? tiles_ : 0;
      tile = cta / P, step = groups;
      k = k_begin = parts.begin[cta % P], k_end = parts.begin[cta % P + 1];
      if (k_begin == k_end) tiles = 0;
    } else {
      const BsrMlpUnitRange r = bsr_mlp_unit_range(tiles_, tile_units_, whole_tiles, cta, grid);
      u = r.begin, end = r.end, tile_units = tile_units_;
    }
  }
  // The next unit's tile and block-row; false when there is none.
  VITRT_HOST_DEVICE bool next(const BsrMlpTileParts& parts, int& tile_out, int& grp_out) {
    if (!shared) {
      if (u >= end) return false;
      tile_out = u / tile_units, grp_out = u % tile_units;
      ++u;
      return true;
    }
    if (tile >= tiles) return false;
    tile_out = tile, grp_out = parts.rows[k];
    if (++k == k_end) k = k_begin, tile += step;
    return true;
  }
};

}  // namespace vitrt::cuda
