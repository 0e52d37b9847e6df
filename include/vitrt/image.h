// 8-bit RGB images: decoding (PNG, JPEG), encoding (PNG) and the size limits that keep a hostile
// file from exhausting memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vitrt {

// Interleaved 8-bit pixels, row-major, HWC. channels is 3 (RGB) unless stated otherwise.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 3;
  std::vector<uint8_t> pixels;  // width * height * channels

  bool empty() const { return width == 0 || height == 0; }
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * channels; }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * channels; }
};

struct ImageLimits {
  // Decoding is refused (ImageError) before any pixel buffer is allocated when the header
  // announces more pixels than this. 20000 x 20000 is over the default.
  int64_t max_pixels = 100'000'000;
};

// Decodes a PNG or JPEG (sniffed from the bytes, not the name) to RGB. Gray and palette images
// are expanded, alpha is dropped, 16-bit PNGs are reduced to 8 bits. Throws ImageError / IoError.
Image read_image(const std::string& path, const ImageLimits& limits = {});
Image decode_image(const uint8_t* data, size_t size, const ImageLimits& limits = {});

// PNG encoding of 1 (gray), 3 (RGB) or 4 (RGBA) channel images. Throws IoError.
std::vector<uint8_t> encode_png(const Image& image);
void write_png(const std::string& path, const Image& image);

}  // namespace vitrt
