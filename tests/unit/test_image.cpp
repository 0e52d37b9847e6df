// Image decoding, resizing and overlays against references written by
// scripts/make_image_fixtures.py (Pillow decodes, Pillow / segment_anything resizes).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "io/overlay.h"
#include "ops/cpu/resize_antialias.h"
#include "vitrt/error.h"
#include "vitrt/image.h"

namespace vitrt {
namespace {

const std::string kDir = std::string(VITRT_FIXTURES) + "/image/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// By reference: range-for over manifest()["..."] would otherwise iterate a destroyed temporary.
const nlohmann::json& manifest() {
  static const nlohmann::json m = nlohmann::json::parse(read_bytes(kDir + "manifest.json"));
  return m;
}

// Mirrors pattern() in make_image_fixtures.py: gradient + hashed noise + inverted blocks.
std::vector<uint8_t> pattern(int w, int h, int ch, uint32_t seed) {
  std::vector<uint8_t> out(static_cast<size_t>(w) * h * ch);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < ch; ++c) {
        uint32_t v = (uint32_t(x) * 73856093u) ^ (uint32_t(y) * 19349663u) ^
                     (uint32_t(c) * 83492791u) ^ seed;
        v ^= v >> 13;
        v *= 0x5BD1E995u;
        v ^= v >> 15;
        const int64_t noise = int64_t(v & 63) - 32;
        const int64_t base = c == 0   ? int64_t(x) * 255 / std::max(w - 1, 1)
                             : c == 1 ? int64_t(y) * 255 / std::max(h - 1, 1)
                                      : int64_t(x + y) * 255 / std::max(w + h - 2, 1);
        int64_t val = std::clamp<int64_t>(base + noise, 0, 255);
        if ((x / 8 + y / 8) % 5 == 0) val = 255 - val;
        out[(static_cast<size_t>(y) * w + x) * ch + c] = static_cast<uint8_t>(val);
      }
  return out;
}

std::string fnv1a64(const std::vector<uint8_t>& data) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint8_t b : data) h = (h ^ b) * 0x100000001B3ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Empty when equal, else where the first difference is.
std::string first_difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                             int w, int ch) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      const size_t px = i / ch;
      return "first difference at x=" + std::to_string(px % w) + " y=" + std::to_string(px / w) +
             " c=" + std::to_string(i % ch) + ": " + std::to_string(got[i]) + " vs " +
             std::to_string(want[i]);
    }
  return "";
}

TEST(ImageDecode, DecodeMatchesPillow) {
  ASSERT_GE(manifest()["decode"].size(), 20u);
  for (const auto& c : manifest()["decode"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file);
    const Image img = read_image(kDir + file);
    ASSERT_EQ(img.width, c["width"].get<int>());
    ASSERT_EQ(img.height, c["height"].get<int>());
    ASSERT_EQ(img.channels, 3);
    EXPECT_EQ(first_difference(img.pixels, read_bytes(kDir + c["expected_rgb"].get<std::string>()),
                               img.width, 3),
              "");
  }
}

TEST(ImageDecode, DecodeFromMemoryEqualsFile) {
  const auto bytes = read_bytes(kDir + "rgb420_37x23.jpg");
  EXPECT_EQ(decode_image(bytes.data(), bytes.size()).pixels,
            read_image(kDir + "rgb420_37x23.jpg").pixels);
}

TEST(ImageDecode, NonImageExtensionIsSniffed) {
  const std::string path = std::string(VITRT_TEST_TMP) + "/png_named.txt";
  std::filesystem::copy_file(kDir + "rgb_37x23.png", path,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(read_image(path).pixels, read_image(kDir + "rgb_37x23.png").pixels);
}

TEST(ImageResize, BitExactWithPillow) {
  ASSERT_GE(manifest()["resize"].size(), 300u);
  for (const auto& c : manifest()["resize"]) {
    const int sw = c["src"][0], sh = c["src"][1], dw = c["dst"][0], dh = c["dst"][1];
    const int ch = c["channels"];
    SCOPED_TRACE(std::to_string(sw) + "x" + std::to_string(sh) + " -> " + std::to_string(dw) +
                 "x" + std::to_string(dh) + " c" + std::to_string(ch));
    const auto src = pattern(sw, sh, ch, c["seed"].get<uint32_t>());
    std::vector<uint8_t> out(static_cast<size_t>(dw) * dh * ch);
    cpu::resize_bilinear_antialias_u8(src.data(), sw, sh, ch, out.data(), dw, dh);
    if (c.contains("fnv1a64")) {
      EXPECT_EQ(fnv1a64(out), c["fnv1a64"].get<std::string>());
    } else if (c.contains("expected_png")) {
      const Image want = read_image(kDir + c["expected_png"].get<std::string>());
      ASSERT_EQ(want.width, dw);
      ASSERT_EQ(want.height, dh);
      EXPECT_EQ(first_difference(out, want.pixels, dw, ch), "");
    } else {
      EXPECT_EQ(first_difference(out, read_bytes(kDir + c["expected_raw"].get<std::string>()),
                                 dw, ch),
                "");
    }
    if (!c["longest_side"].is_null()) {  // the Image-level entry point gives the same bytes
      Image img;
      img.width = sw;
      img.height = sh;
      img.pixels = src;
      const Image r = resize_longest_side(img, c["longest_side"].get<int>());
      EXPECT_EQ(r.width, dw);
      EXPECT_EQ(r.height, dh);
      EXPECT_EQ(r.pixels, out);
    }
  }
}

// A window of the resize (what the ViT's Resize + CenterCrop computes) is exactly that crop of the
// whole resize, for every Pillow case above (both pass orders, 1 to 4 channels, up- and
// downscaling, one axis only) and windows at the edges, in the middle and of one pixel.
TEST(ImageResize, WindowIsTheCropOfTheWholeResize) {
  std::mt19937 rng(17);
  int windows = 0;
  for (const auto& c : manifest()["resize"]) {
    const int sw = c["src"][0], sh = c["src"][1], dw = c["dst"][0], dh = c["dst"][1];
    const int ch = c["channels"];
    const auto src = pattern(sw, sh, ch, c["seed"].get<uint32_t>());
    std::vector<uint8_t> full(static_cast<size_t>(dw) * dh * ch);
    cpu::resize_bilinear_antialias_u8(src.data(), sw, sh, ch, full.data(), dw, dh);
    for (int t = 0; t < 4; ++t) {
      // t = 0: the whole image; 1: one pixel; 2: a corner; 3: random.
      int x0 = 0, y0 = 0, w = dw, h = dh;
      if (t == 1) x0 = static_cast<int>(rng() % dw), y0 = static_cast<int>(rng() % dh), w = h = 1;
      if (t == 2) w = 1 + static_cast<int>(rng() % dw), h = 1 + static_cast<int>(rng() % dh), x0 = dw - w, y0 = dh - h;
      if (t == 3) {
        x0 = static_cast<int>(rng() % dw), y0 = static_cast<int>(rng() % dh);
        w = 1 + static_cast<int>(rng() % (dw - x0)), h = 1 + static_cast<int>(rng() % (dh - y0));
      }
      SCOPED_TRACE(::testing::Message() << sw << "x" << sh << " -> " << dw << "x" << dh << " c" << ch << " window "
                                        << w << "x" << h << " at " << x0 << "," << y0);
      std::vector<uint8_t> win(static_cast<size_t>(w) * h * ch);
      cpu::resize_bilinear_antialias_u8_crop(src.data(), sw, sh, ch, dw, dh, x0, y0, w, h, win.data());
      for (int y = 0; y < h; ++y)
        ASSERT_TRUE(std::equal(win.begin() + static_cast<ptrdiff_t>(y) * w * ch,
                               win.begin() + static_cast<ptrdiff_t>(y + 1) * w * ch,
                               full.begin() + (static_cast<ptrdiff_t>(y0 + y) * dw + x0) * ch))
            << "row " << y;
      ++windows;
    }
  }
  EXPECT_GE(windows, 1200);
  uint8_t px[12] = {};
  EXPECT_THROW(cpu::resize_bilinear_antialias_u8_crop(px, 2, 2, 3, 4, 4, 3, 0, 2, 1, px), InvalidArgument);
  EXPECT_THROW(cpu::resize_bilinear_antialias_u8_crop(px, 2, 2, 3, 4, 4, 0, 0, 0, 1, px), InvalidArgument);
}

TEST(ImageResize, LongestSideShapeMatchesSegmentAnything) {
  ASSERT_GE(manifest()["longest_side_shapes"].size(), 2000u);
  for (const auto& row : manifest()["longest_side_shapes"]) {
    int nw = 0, nh = 0;
    longest_side_shape(row[0], row[1], row[2], &nw, &nh);
    ASSERT_EQ(nw, row[3].get<int>()) << row.dump();
    ASSERT_EQ(nh, row[4].get<int>()) << row.dump();
  }
}

TEST(ImageResize, RejectsBadArguments) {
  uint8_t px[3] = {};
  EXPECT_THROW(cpu::resize_bilinear_antialias_u8(px, 1, 1, 3, px, 0, 1), InvalidArgument);
  EXPECT_THROW(cpu::resize_bilinear_antialias_u8(px, 1, 1, 5, px, 1, 1), InvalidArgument);
  Image thin;
  thin.width = 1;
  thin.height = 5000;
  thin.pixels.resize(5000 * 3);
  EXPECT_THROW(resize_longest_side(thin, 1024), InvalidArgument);  // width would round to 0
}

TEST(ImagePng, RoundTripAllChannelCounts) {
  for (int ch : {1, 3, 4}) {
    Image img;
    img.width = 23;
    img.height = 17;
    img.channels = ch;
    img.pixels = pattern(23, 17, ch, 40 + ch);
    const auto png = encode_png(img);
    const Image back = decode_image(png.data(), png.size());
    ASSERT_EQ(back.width, 23);
    ASSERT_EQ(back.height, 17);
    for (size_t p = 0; p < 23 * 17; ++p)
      for (int c = 0; c < 3; ++c)  // gray is replicated, alpha dropped
        ASSERT_EQ(back.pixels[p * 3 + c], img.pixels[p * ch + (ch == 1 ? 0 : c)]) << ch;
  }
  Image rgb;
  rgb.width = 5;
  rgb.height = 3;
  rgb.pixels = pattern(5, 3, 3, 7);
  const std::string path = std::string(VITRT_TEST_TMP) + "/round_trip.png";
  write_png(path, rgb);
  EXPECT_EQ(read_image(path).pixels, rgb.pixels);
}

TEST(ImagePng, EncodeRejectsMalformedImages) {
  Image img;
  img.width = 2;
  img.height = 2;
  img.channels = 2;
  img.pixels.resize(8);
  EXPECT_THROW(encode_png(img), InvalidArgument);
  img.channels = 3;  // pixel buffer too small for 2x2x3
  EXPECT_THROW(encode_png(img), InvalidArgument);
  EXPECT_THROW(encode_png(Image{}), InvalidArgument);
  img.pixels.resize(12);
  EXPECT_THROW(write_png(std::string(VITRT_TEST_TMP) + "/no/such/dir/x.png", img), IoError);
}

TEST(ImageOverlay, MaskToImage) {
  const uint8_t mask[6] = {0, 1, 1, 0, 0, 1};
  const Image img = mask_to_image(mask, 3, 2);
  EXPECT_EQ(img.channels, 1);
  EXPECT_EQ(img.pixels, (std::vector<uint8_t>{0, 255, 255, 0, 0, 255}));
}

TEST(ImageOverlay, BlendsInsideDrawsContourLeavesOutside) {
  Image rgb;
  rgb.width = 8;
  rgb.height = 8;
  rgb.pixels.assign(8 * 8 * 3, 100);
  std::vector<uint8_t> a(64, 0), b(64, 0);
  for (int y = 1; y < 6; ++y)
    for (int x = 1; x < 6; ++x) a[y * 8 + x] = 1;  // 5x5 square: interior 3x3
  b[7 * 8 + 7] = 1;
  const Image out = overlay_masks(rgb, {a.data(), b.data()}, 0.5f);
  const auto ca = mask_color(0), cb = mask_color(1);
  EXPECT_NE(ca, cb);
  auto px = [&](int x, int y) {
    const uint8_t* p = out.row(y) + x * 3;
    return std::array<uint8_t, 3>{p[0], p[1], p[2]};
  };
  EXPECT_EQ(px(0, 0), (std::array<uint8_t, 3>{100, 100, 100}));  // outside
  EXPECT_EQ(px(3, 3)[0], static_cast<uint8_t>(std::lround(50 + 0.5 * ca[0])));  // interior
  EXPECT_EQ(px(1, 3), (std::array<uint8_t, 3>{uint8_t(ca[0] * 3 / 5), uint8_t(ca[1] * 3 / 5),
                                               uint8_t(ca[2] * 3 / 5)}));  // contour
  EXPECT_EQ(px(7, 7)[2], uint8_t(cb[2] * 3 / 5));  // a single pixel is all contour
  // The palette is deterministic and its first colours are distinct.
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < i; ++j) EXPECT_NE(mask_color(i), mask_color(j)) << i << " " << j;
}

}  // namespace
}  // namespace vitrt
