// A re-implementation of the 8-bit path of Pillow's libImaging/Resample.c for the bilinear
// ("triangle") filter. Every step that affects rounding follows Pillow: coefficients in double,
// normalised per output pixel, then converted to 22-bit fixed point; int32 accumulation seeded
// with one half; the same choice of pass order and of intermediate rows.
#include "ops/cpu/resize_antialias.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "vitrt/error.h"

namespace vitrt::cpu {
namespace {

constexpr int kPrecisionBits = kResizePrecisionBits;
using Coefficients = ResizeCoefficients;

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}


inline uint8_t clip8(int32_t v) {
  v >>= kPrecisionBits;  // arithmetic shift, like Pillow's lookup-table index
  return static_cast<uint8_t>(std::clamp(v, 0, 255));
}

constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);  // rounds the fixed-point sum

// Resamples rows [0, rows) of `in` (in_w wide) along x into `out` (coefficient count wide).
void horizontal_pass(const uint8_t* in, int in_w, int rows, int cn, const Coefficients& co,
                     uint8_t* out) {
  const int out_w = static_cast<int>(co.first.size());
#pragma omp parallel for schedule(static) if (int64_t(rows) * out_w > 65536)
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in_row = in + static_cast<size_t>(y) * in_w * cn;
    uint8_t* out_row = out + static_cast<size_t>(y) * out_w * cn;
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &co.weights[static_cast<size_t>(xx) * co.ksize];
      const uint8_t* p = in_row + static_cast<size_t>(co.first[xx]) * cn;
      int32_t acc[4] = {kHalf, kHalf, kHalf, kHalf};
      for (int x = 0; x < co.count[xx]; ++x)
        for (int c = 0; c < cn; ++c) acc[c] += p[x * cn + c] * k[x];
      for (int c = 0; c < cn; ++c) out_row[xx * cn + c] = clip8(acc[c]);
    }
  }
}

// Resamples along y; `in` holds source rows starting at row `first_row` (the horizontal pass
// may have produced only the rows that are needed).
void vertical_pass(const uint8_t* in, int w, int first_row, int cn, const Coefficients& co,
                   uint8_t* out) {
  const int out_h = static_cast<int>(co.first.size());
  const size_t stride = static_cast<size_t>(w) * cn;
#pragma omp parallel for schedule(static) if (int64_t(out_h) * w > 65536)
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &co.weights[static_cast<size_t>(yy) * co.ksize];
    const uint8_t* base = in + static_cast<size_t>(co.first[yy] - first_row) * stride;
    uint8_t* out_row = out + static_cast<size_t>(yy) * stride;
    for (size_t i = 0; i < stride; ++i) {
      int32_t acc = kHalf;
      for (int y = 0; y < co.count[yy]; ++y) acc += base[y * stride + i] * k[y];
      out_row[i] = clip8(acc);
    }
  }
}

}  // namespace

ResizeCoefficients resize_coefficients(int in_size, int out_size) {
  // Pillow passes the box edges as float; for a whole-image resize in0 = 0 and in1 = in_size.
  const double scale = static_cast<double>(static_cast<float>(in_size)) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;  // bilinear support is 1
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  const double inv_filter_scale = 1.0 / filter_scale;  // multiplied, not divided, like Pillow
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    // Truncating casts, as in C: "+ 0.5" rounds the positive values, negatives clamp to 0.
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double sum = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = triangle((x + xmin - center + 0.5) * inv_filter_scale);
      sum += k[x];
    }
    int32_t* w = &c.weights[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double v = sum != 0.0 ? k[x] / sum : k[x];
      w[x] = static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits)
                                        : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

void resize_bilinear_antialias_u8(const uint8_t* src, int src_w, int src_h, int channels,
                                  uint8_t* dst, int dst_w, int dst_h) {
  VITRT_CHECK(src_w > 0 && src_h > 0 && dst_w > 0 && dst_h > 0, InvalidArgument,
              "resize: empty image (", src_w, "x", src_h, " -> ", dst_w, "x", dst_h, ")");
  VITRT_CHECK(channels >= 1 && channels <= 4, InvalidArgument, "resize: ", channels,
              " channels (1 to 4 supported)");
  const int cn = channels;
  const bool need_h = dst_w != src_w;
  const bool need_v = dst_h != src_h;
  if (!need_h && !need_v) {
    std::copy(src, src + static_cast<size_t>(src_w) * src_h * cn, dst);
    return;
  }
  if (!need_h) return vertical_pass(src, src_w, 0, cn, resize_coefficients(src_h, dst_h), dst);
  if (!need_v) return horizontal_pass(src, src_w, src_h, cn, resize_coefficients(src_w, dst_w), dst);

  const Coefficients horiz = resize_coefficients(src_w, dst_w);
  const Coefficients vert = resize_coefficients(src_h, dst_h);
  std::vector<uint8_t> temp;
  // Pillow 13 runs the vertical pass first when the height shrinks, by more than twice as many
  // pixels as the width does (earlier Pillow always went horizontal first). The order changes
  // the intermediate rounding, so it is followed exactly.
  if (dst_h < src_h && src_h - dst_h > 2 * (src_w - dst_w)) {
    temp.resize(static_cast<size_t>(dst_h) * src_w * cn);
    vertical_pass(src, src_w, 0, cn, vert, temp.data());
    horizontal_pass(temp.data(), src_w, dst_h, cn, horiz, dst);
  } else {
    // Only source rows [row0, row1) feed the vertical pass.
    const int row0 = vert.first.front();
    const int row1 = vert.first.back() + vert.count.back();
    temp.resize(static_cast<size_t>(row1 - row0) * dst_w * cn);
    horizontal_pass(src + static_cast<size_t>(row0) * src_w * cn, src_w, row1 - row0, cn, horiz,
                    temp.data());
    vertical_pass(temp.data(), dst_w, row0, cn, vert, dst);
  }
}

}  // namespace vitrt::cpu

namespace vitrt {

void longest_side_shape(int width, int height, int target_length, int* new_width,
                        int* new_height) {
  VITRT_CHECK(width > 0 && height > 0 && target_length > 0, InvalidArgument,
              "longest_side_shape: bad size ", width, "x", height, " or target ", target_length);
  const double scale = target_length * 1.0 / std::max(height, width);
  *new_width = static_cast<int>(width * scale + 0.5);
  *new_height = static_cast<int>(height * scale + 0.5);
}

Image resize_longest_side(const Image& image, int target_length) {
  VITRT_CHECK(!image.empty(), InvalidArgument, "resize_longest_side: empty image");
  Image out;
  longest_side_shape(image.width, image.height, target_length, &out.width, &out.height);
  VITRT_CHECK(out.width > 0 && out.height > 0, InvalidArgument, "resize_longest_side: ",
              image.width, "x", image.height, " is too elongated for target ", target_length,
              " (a side would become 0 pixels)");
  out.channels = image.channels;
  out.pixels.resize(static_cast<size_t>(out.width) * out.height * out.channels);
  cpu::resize_bilinear_antialias_u8(image.pixels.data(), image.width, image.height,
                                    image.channels, out.pixels.data(), out.width, out.height);
  return out;
}

}  // namespace vitrt
