// A re-implementation of the 8-bit path of Pillow's libImaging/Resample.c for the bilinear
// ("triangle") filter. Every step that affects rounding follows Pillow: coefficients in double,
// normalised per output pixel, then converted to 22-bit fixed point; int32 accumulation seeded
// with one half; the same choice of pass order and of intermediate rows.
#include "ops/cpu/resize_antialias.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
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

// Resamples rows [0, rows) of `in` (in_stride bytes apart) along x into `out` (out_stride bytes
// apart), one output pixel per coefficient entry. CN channels, a compile-time count so that the
// channel loop unrolls.
template <int CN>
void horizontal_pass(const uint8_t* in, size_t in_stride, int rows, const Coefficients& co, uint8_t* out,
                     size_t out_stride) {
  const int out_w = static_cast<int>(co.first.size());
#pragma omp parallel for schedule(static) if (int64_t(rows) * out_w > 65536)
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in_row = in + static_cast<size_t>(y) * in_stride;
    uint8_t* out_row = out + static_cast<size_t>(y) * out_stride;
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &co.weights[static_cast<size_t>(xx) * co.ksize];
      const uint8_t* p = in_row + static_cast<size_t>(co.first[xx]) * CN;
      int32_t acc[CN];
      for (int c = 0; c < CN; ++c) acc[c] = kHalf;
      const int n = co.count[xx];
      for (int x = 0; x < n; ++x)
        for (int c = 0; c < CN; ++c) acc[c] += p[x * CN + c] * k[x];
      for (int c = 0; c < CN; ++c) out_row[xx * CN + c] = clip8(acc[c]);
    }
  }
}

// Resamples along y: output row yy from the rows co.first[yy] - first_row ... of `in` (in_stride
// bytes apart; the horizontal pass may have produced only the rows that are needed), `bytes`
// bytes of each (width x channels), into `out` (out_stride bytes apart).
void vertical_pass(const uint8_t* in, size_t in_stride, size_t bytes, int first_row, const Coefficients& co,
                   uint8_t* out, size_t out_stride) {
  const int out_h = static_cast<int>(co.first.size());
  // A row of int32 sums per thread, filled tap by tap: the inner loop runs along the row, so it
  // vectorises (the sums are exact integers, so their order does not matter: Pillow's bytes).
#pragma omp parallel if (int64_t(out_h) * int64_t(bytes) > 3 * 65536)
  {
    std::vector<int32_t> acc(bytes);
#pragma omp for schedule(static)
    for (int yy = 0; yy < out_h; ++yy) {
      const int32_t* k = &co.weights[static_cast<size_t>(yy) * co.ksize];
      const uint8_t* base = in + static_cast<size_t>(co.first[yy] - first_row) * in_stride;
      uint8_t* out_row = out + static_cast<size_t>(yy) * out_stride;
      const int n = co.count[yy];
      int32_t* a = acc.data();
      std::fill(a, a + bytes, kHalf);
      for (int y = 0; y < n; ++y) {
        const uint8_t* row = base + static_cast<size_t>(y) * in_stride;
        const int32_t w = k[y];
        for (size_t i = 0; i < bytes; ++i) a[i] += row[i] * w;
      }
      for (size_t i = 0; i < bytes; ++i) out_row[i] = clip8(a[i]);
    }
  }
}

void horizontal(int cn, const uint8_t* in, size_t in_stride, int rows, const Coefficients& co, uint8_t* out,
                size_t out_stride) {
  switch (cn) {
    case 1: return horizontal_pass<1>(in, in_stride, rows, co, out, out_stride);
    case 2: return horizontal_pass<2>(in, in_stride, rows, co, out, out_stride);
    case 3: return horizontal_pass<3>(in, in_stride, rows, co, out, out_stride);
    default: return horizontal_pass<4>(in, in_stride, rows, co, out, out_stride);
  }
}

// Entries [begin, begin + n) of c, their first source index moved by -shift.
Coefficients slice(const Coefficients& c, int begin, int n, int shift = 0) {
  Coefficients s;
  s.ksize = c.ksize;
  s.first.assign(c.first.begin() + begin, c.first.begin() + begin + n);
  for (int& f : s.first) f -= shift;
  s.count.assign(c.count.begin() + begin, c.count.begin() + begin + n);
  s.weights.assign(c.weights.begin() + static_cast<ptrdiff_t>(begin) * c.ksize,
                   c.weights.begin() + static_cast<ptrdiff_t>(begin + n) * c.ksize);
  return s;
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

void resize_bilinear_antialias_u8_crop(const uint8_t* src, int src_w, int src_h, int channels, int dst_w, int dst_h,
                                       int x0, int y0, int out_w, int out_h, uint8_t* dst) {
  VITRT_CHECK(src_w > 0 && src_h > 0 && dst_w > 0 && dst_h > 0, InvalidArgument,
              "resize: empty image (", src_w, "x", src_h, " -> ", dst_w, "x", dst_h, ")");
  VITRT_CHECK(channels >= 1 && channels <= 4, InvalidArgument, "resize: ", channels,
              " channels (1 to 4 supported)");
  VITRT_CHECK(x0 >= 0 && y0 >= 0 && out_w > 0 && out_h > 0 && x0 + out_w <= dst_w && y0 + out_h <= dst_h,
              InvalidArgument, "resize: the window ", out_w, "x", out_h, " at (", x0, ", ", y0, ") is not inside ",
              dst_w, "x", dst_h);
  const int cn = channels;
  const size_t src_stride = static_cast<size_t>(src_w) * cn, out_stride = static_cast<size_t>(out_w) * cn;
  const bool need_h = dst_w != src_w;
  const bool need_v = dst_h != src_h;
  if (!need_h && !need_v) {
    for (int y = 0; y < out_h; ++y)
      std::copy_n(src + (y0 + y) * src_stride + static_cast<size_t>(x0) * cn, out_stride, dst + y * out_stride);
    return;
  }
  // Every output pixel below is computed as the whole resize computes it (the same coefficients,
  // pass order and intermediate rows); only the pixels outside the window are not computed.
  if (!need_h) {
    const Coefficients vert = slice(resize_coefficients(src_h, dst_h), y0, out_h);
    return vertical_pass(src + static_cast<size_t>(x0) * cn, src_stride, out_stride, 0, vert, dst, out_stride);
  }
  if (!need_v) {
    const Coefficients horiz = slice(resize_coefficients(src_w, dst_w), x0, out_w);
    return horizontal(cn, src + y0 * src_stride, src_stride, out_h, horiz, dst, out_stride);
  }
  const Coefficients horiz_all = resize_coefficients(src_w, dst_w);
  const Coefficients vert = slice(resize_coefficients(src_h, dst_h), y0, out_h);
  std::vector<uint8_t> temp;
  // Pillow 13 runs the vertical pass first when the height shrinks, by more than twice as many
  // pixels as the width does (earlier Pillow always went horizontal first). The order changes
  // the intermediate rounding, so it is followed exactly (decided on the whole resize's sizes).
  if (dst_h < src_h && src_h - dst_h > 2 * (src_w - dst_w)) {
    // The source columns [col0, col1) that feed the window's output columns.
    const int col0 = horiz_all.first[x0];
    const int col1 = horiz_all.first[x0 + out_w - 1] + horiz_all.count[x0 + out_w - 1];
    const size_t temp_stride = static_cast<size_t>(col1 - col0) * cn;
    temp.resize(static_cast<size_t>(out_h) * temp_stride);
    vertical_pass(src + static_cast<size_t>(col0) * cn, src_stride, temp_stride, 0, vert, temp.data(), temp_stride);
    horizontal(cn, temp.data(), temp_stride, out_h, slice(horiz_all, x0, out_w, col0), dst, out_stride);
  } else {
    // Only source rows [row0, row1) feed the window's output rows.
    const int row0 = vert.first.front();
    const int row1 = vert.first.back() + vert.count.back();
    temp.resize(static_cast<size_t>(row1 - row0) * out_stride);
    horizontal(cn, src + static_cast<size_t>(row0) * src_stride, src_stride, row1 - row0, slice(horiz_all, x0, out_w),
               temp.data(), out_stride);
    vertical_pass(temp.data(), out_stride, out_stride, row0, vert, dst, out_stride);
  }
}

void resize_bilinear_antialias_u8(const uint8_t* src, int src_w, int src_h, int channels,
                                  uint8_t* dst, int dst_w, int dst_h) {
  resize_bilinear_antialias_u8_crop(src, src_w, src_h, channels, dst_w, dst_h, 0, 0, dst_w, dst_h, dst);
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
