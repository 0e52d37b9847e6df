// Encodings the HTTP API needs: base64 (embeddings, low-res logits and images inside JSON),
// the content hash that keys the embedding cache, and masks as polygons.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vitrt/image.h"

namespace vitrt::server {

std::string base64_encode(const void* data, size_t size);
// Standard alphabet, '=' padding optional, ASCII whitespace ignored; a "data:...;base64," prefix
// (what a browser's FileReader gives) is skipped. Throws InvalidArgument naming `what` otherwise.
std::vector<uint8_t> base64_decode(std::string_view text, const char* what);

// Hex SHA-256 (first 128 bits: 32 hex digits) of the decoded pixels and the size, so that the
// same picture is one cache entry whatever file format or metadata it came in.
std::string image_content_hash(const Image& rgb);

// What the API reports about one binary mask, from a single pass over it.
struct MaskSummary {
  std::string coco_counts;          // pycocotools' compressed RLE string (column-major runs)
  uint64_t area = 0;                // set pixels
  std::array<int64_t, 4> bbox{};    // COCO XYWH (w = right - left + 1); zeros when empty
};
// Same results as rle_to_string(rle_counts()), mask_area() and mask_bbox_xywh() of io/rle.h, but
// the mask is read row by row in blocks of columns (the runs go down columns, the mask is stored
// by rows: reading it column by column strides across the whole mask once per column).
MaskSummary summarize_mask(const uint8_t* mask, int h, int w);

// Outer boundaries of the 4-connected components of a row-major h x w mask (nonzero = inside),
// each a closed polygon [x0, y0, x1, y1, ...] on the pixel-corner grid (a pixel (x, y) spans
// [x, x+1] x [y, y+1]), clockwise on screen, collinear vertices removed. Holes are not
// returned: COCO polygons cannot express them (use the RLE for exact masks). At most
// max_polygons, largest first.
std::vector<std::vector<int>> mask_to_polygons(const uint8_t* mask, int h, int w, size_t max_polygons = 256);

}  // namespace vitrt::server
