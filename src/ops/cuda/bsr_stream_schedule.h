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

}  // namespace vitrt::cuda
