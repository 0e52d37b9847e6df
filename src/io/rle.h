// COCO run-length encoding of binary masks, byte-identical to pycocotools (and to
// segment_anything's mask_to_rle_pytorch for the uncompressed counts), plus the box and area
// helpers that SAM's automatic mask generator reports.
//
// Masks are row-major h x w bytes (nonzero = inside). COCO counts run over the mask in
// column-major (Fortran) order and always start with a run of zeros, possibly empty.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace vitrt {

std::vector<uint32_t> rle_counts(const uint8_t* mask, int h, int w);

// pycocotools' compact string: each count (minus the count two before it, from the fourth on)
// as little-endian groups of 5 bits, 6 bits per character, offset by '0'.
std::string rle_to_string(const std::vector<uint32_t>& counts);
// Inverse of rle_to_string; throws InvalidArgument on a malformed string.
std::vector<uint32_t> rle_from_string(const std::string& s);

// Row-major h x w 0/1 mask; throws InvalidArgument unless the counts sum to h * w.
std::vector<uint8_t> rle_decode(const std::vector<uint32_t>& counts, int h, int w);

// Number of set pixels (pycocotools' area).
uint64_t rle_area(const std::vector<uint32_t>& counts);
uint64_t mask_area(const uint8_t* mask, int h, int w);

// Tight box as pycocotools' toBbox gives it: [x, y, width, height] with width = right - left + 1;
// all zeros for an empty mask.
std::array<double, 4> mask_bbox_xywh(const uint8_t* mask, int h, int w);
// segment_anything's batched_mask_to_box: inclusive [x0, y0, x1, y1] (x1 is the last set
// column, so its xywh has width x1 - x0, one less than COCO's); all zeros for an empty mask.
std::array<int, 4> mask_box_xyxy(const uint8_t* mask, int h, int w);

}  // namespace vitrt
