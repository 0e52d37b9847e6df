// The streamed BSR kernel's schedule (bsr_gemm_stream.cu): which (token tile, block-row position)
// work item number `item` is, for `block_rows` block-rows per tile. Items go tile by tile; within a
// tile the positions (indices into row_order, most stored blocks first) are rotated by the tile
// index. Persistent CTAs take items c, c + grid, ...: without the rotation a grid that is a multiple
// of block_rows (264 CTAs, ViT-B's 12) would hand every CTA the same position in every tile, the
// CTAs with the longest rows would fall behind, the tiles in flight would spread and x would leave
// L2 before its other block-rows read it. Host and device (tested on the host).
#pragma once
#include "ops/cuda/host_device.h"

namespace vitrt::cuda {

struct BsrStreamItem {
  int tile;      // 128-token tile
  int position;  // index into row_order
};
VITRT_HOST_DEVICE inline BsrStreamItem bsr_stream_item(int item, int block_rows) {
  const int tile = item / block_rows;
  int position = item - tile * block_rows + tile % block_rows;
  if (position >= block_rows) position -= block_rows;
  return {tile, position};
}

// The items c, c + grid, c + 2 grid, ... of one persistent CTA, stepped without dividing: the
// kernel's roles read the next item at every item, and bsr_stream_item's two divisions by a run-time
// block-row count were ~45 of the ~260 SASS instructions a consumer warp spends outside its block
// loop per item (block 64, plain linear). step() adds grid = q block_rows + r as q tiles and r
// positions, the tile index modulo block_rows carried along. Equal to bsr_stream_item at every step
// (tested on the host).
struct BsrStreamCursor {
  int item, tile, rem, tile_mod;  // rem = item - tile * block_rows; tile_mod = tile % block_rows
  int block_rows, grid, grid_q_mod, grid_r, grid_q;
  VITRT_HOST_DEVICE BsrStreamCursor(int first, int grid_, int block_rows_)
      : item(first), tile(first / block_rows_), rem(first - (first / block_rows_) * block_rows_),
        tile_mod((first / block_rows_) % block_rows_), block_rows(block_rows_), grid(grid_),
        grid_q_mod((grid_ / block_rows_) % block_rows_), grid_r(grid_ % block_rows_), grid_q(grid_ / block_rows_) {}
  VITRT_HOST_DEVICE BsrStreamItem current() const {
    int position = rem + tile_mod;
    if (position >= block_rows) position -= block_rows;
    return {tile, position};
  }
  VITRT_HOST_DEVICE void step() {
    item += grid;
    tile += grid_q;
    tile_mod += grid_q_mod;
    rem += grid_r;
    if (rem >= block_rows) rem -= block_rows, ++tile, ++tile_mod;
    if (tile_mod >= block_rows) tile_mod -= block_rows;  // (below 2 block_rows: one subtraction)
  }
};

}  // namespace vitrt::cuda
