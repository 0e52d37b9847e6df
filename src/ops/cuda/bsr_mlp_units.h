// The fused block-sparse MLP's division of work (bsr_mlp_fused.cu): which units a persistent CTA
// takes. Host and device (tested on the host).
//
// A unit is a token tile and one fc2 block-row in the streamed forms (nothing of a tile stays in
// shared memory across its block-rows), a whole tile in the resident form; `tile_units` units per
// tile, tile-major. A CTA takes a contiguous range, so that a tile's block-rows run one after another
// on one SM while its x rows are in L2, and the ranges differ by at most one unit; or, with
// `whole_tiles`, by at most one tile, every range whole tiles: a tile split between two CTAs is read
// from memory by both, at the end of one's range and the start of the other's, far apart in time.
// (A stride of the grid would give every CTA the same block-row whenever the SM count is a multiple of
// the block-rows, 132 and ViT-B's 12, and the block-rows' work differs.)
#pragma once
#include <cstdint>

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

}  // namespace vitrt::cuda
