#include "io/rle.h"

#include <algorithm>

#include "vitrt/error.h"

namespace vitrt {

std::vector<uint32_t> rle_counts(const uint8_t* mask, int h, int w) {
  VITRT_CHECK(h >= 0 && w >= 0 && (mask || h * w == 0), InvalidArgument, "rle_counts: bad mask ",
              h, "x", w);
  std::vector<uint32_t> counts;
  uint8_t prev = 0;
  uint32_t run = 0;
  for (int x = 0; x < w; ++x) {
    for (int y = 0; y < h; ++y) {
      const uint8_t v = mask[static_cast<size_t>(y) * w + x] != 0;
      if (v != prev) {
        counts.push_back(run);
        run = 0;
        prev = v;
      }
      ++run;
    }
  }
  counts.push_back(run);
  return counts;
}

std::string rle_to_string(const std::vector<uint32_t>& counts) {
  std::string s;
  for (size_t i = 0; i < counts.size(); ++i) {
    int64_t x = counts[i];
    if (i > 2) x -= counts[i - 2];  // runs two apart (same value) tend to be similar
    bool more = true;
    while (more) {
      char c = static_cast<char>(x & 0x1f);
      x >>= 5;  // arithmetic: negative deltas end once only sign bits remain
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c |= 0x20;
      s.push_back(static_cast<char>(c + 48));
    }
  }
  return s;
}

std::vector<uint32_t> rle_from_string(const std::string& s) {
  std::vector<uint32_t> counts;
  size_t p = 0;
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      VITRT_CHECK(p < s.size(), InvalidArgument, "RLE string ends inside a count");
      const int c = s[p] - 48;
      VITRT_CHECK(c >= 0 && c < 64 && k < 8, InvalidArgument, "bad RLE string at character ",
                  p);
      x |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = c & 0x20;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x -= int64_t{1} << (5 * k);  // sign-extend a negative delta
    }
    if (counts.size() > 2) x += counts[counts.size() - 2];
    VITRT_CHECK(x >= 0 && x <= UINT32_MAX, InvalidArgument, "RLE string decodes to count ", x);
    counts.push_back(static_cast<uint32_t>(x));
  }
  return counts;
}

std::vector<uint8_t> rle_decode(const std::vector<uint32_t>& counts, int h, int w) {
  VITRT_CHECK(h >= 0 && w >= 0, InvalidArgument, "rle_decode: bad size ", h, "x", w);
  uint64_t total = 0;
  for (uint32_t c : counts) total += c;
  VITRT_CHECK(total == static_cast<uint64_t>(h) * w, InvalidArgument, "RLE counts sum to ", total,
              ", not ", h, "x", w, " = ", static_cast<uint64_t>(h) * w);
  std::vector<uint8_t> mask(static_cast<size_t>(h) * w);
  size_t i = 0;  // column-major position
  for (size_t r = 0; r < counts.size(); ++r) {
    if (r % 2 == 1)
      for (size_t j = i; j < i + counts[r]; ++j) mask[(j % h) * w + j / h] = 1;
    i += counts[r];
  }
  return mask;
}

uint64_t rle_area(const std::vector<uint32_t>& counts) {
  uint64_t area = 0;
  for (size_t r = 1; r < counts.size(); r += 2) area += counts[r];
  return area;
}

uint64_t mask_area(const uint8_t* mask, int h, int w) {
  return static_cast<uint64_t>(
      std::count_if(mask, mask + static_cast<size_t>(h) * w, [](uint8_t v) { return v != 0; }));
}

namespace {
// Inclusive [x0, y0, x1, y1] of the set pixels; x1 = -1 when there are none.
std::array<int, 4> tight_box(const uint8_t* mask, int h, int w) {
  int x0 = w, y0 = h, x1 = -1, y1 = -1;
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = mask + static_cast<size_t>(y) * w;
    for (int x = 0; x < w; ++x) {
      if (!row[x]) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = y;
    }
  }
  return {x0, y0, x1, y1};
}
}  // namespace

std::array<int, 4> mask_box_xyxy(const uint8_t* mask, int h, int w) {
  const auto box = tight_box(mask, h, w);
  return box[2] < 0 ? std::array<int, 4>{0, 0, 0, 0} : box;
}

std::array<double, 4> mask_bbox_xywh(const uint8_t* mask, int h, int w) {
  const auto [x0, y0, x1, y1] = tight_box(mask, h, w);
  if (x1 < 0) return {0, 0, 0, 0};
  return {double(x0), double(y0), double(x1 - x0 + 1), double(y1 - y0 + 1)};
}

}  // namespace vitrt
