// Hostile and broken image files must fail with ImageError / IoError and a message that says
// what is wrong, never crash, exit or allocate what the header claims.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "error_test_util.h"
#include "vitrt/error.h"
#include "vitrt/image.h"

namespace vitrt {
namespace {

using test::expect_error;

const std::string kDir = std::string(VITRT_FIXTURES) + "/image/";
const std::string kTmp = std::string(VITRT_TEST_TMP) + "/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}


TEST(BadImage, ZeroByteFile) {
  write_bytes(kTmp + "empty.png", {});
  expect_error<ImageError>([] { read_image(kTmp + "empty.png"); }, {"empty.png", "empty"});
  expect_error<ImageError>([] { decode_image(nullptr, 0); }, {"empty"});
}

TEST(BadImage, MissingPathAndDirectory) {
  expect_error<IoError>([] { read_image(kTmp + "does_not_exist.jpg"); },
                        {"does_not_exist.jpg", "No such file"});
  expect_error<IoError>([] { read_image(kTmp); }, {"directory"});
}

TEST(BadImage, GarbageAndWrongContent) {
  std::mt19937 rng(5);
  std::vector<uint8_t> junk(4096);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  junk[0] = 'G';
  write_bytes(kTmp + "garbage.png", junk);  // an image extension does not make it an image
  expect_error<ImageError>([] { read_image(kTmp + "garbage.png"); },
                           {"garbage.png", "not a PNG or JPEG"});
  // The right magic bytes followed by junk.
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  png.insert(png.end(), junk.begin(), junk.end());
  expect_error<ImageError>([&] { decode_image(png.data(), png.size()); }, {"PNG"});
  std::vector<uint8_t> jpg = {0xFF, 0xD8, 0xFF};
  jpg.insert(jpg.end(), junk.begin(), junk.end());
  expect_error<ImageError>([&] { decode_image(jpg.data(), jpg.size()); }, {"JPEG"});
}

TEST(BadImage, HugeHeadersRefusedBeforeAllocating) {
  for (const char* f : {"huge_20000.png", "huge_20000.jpg"})
    expect_error<ImageError>([&] { read_image(kDir + f); },
                             {f, "20000x20000", "400000000 pixels", "max_pixels"});
  // The limit is the caller's: a tiny limit refuses a small image too.
  expect_error<ImageError>([] { read_image(kDir + "rgb_37x23.png", ImageLimits{100}); },
                           {"37x23", "limit of 100"});
}

TEST(BadImage, ZeroSizeHeaders) {
  expect_error<ImageError>([] { read_image(kDir + "zero_width.png"); }, {"zero_width.png", "PNG"});
  expect_error<ImageError>([] { read_image(kDir + "zero_height.jpg"); }, {"zero_height.jpg", "JPEG"});
}

TEST(BadImage, TruncatedFiles) {
  // A cut in the middle of the pixel data must be reported, not padded.
  const auto png = read_bytes(kDir + "rgb_37x23.png");
  const auto jpg = read_bytes(kDir + "rgb420_37x23.jpg");
  expect_error<ImageError>([&] { decode_image(png.data(), png.size() / 2); }, {"PNG"});
  expect_error<ImageError>([&] { decode_image(jpg.data(), jpg.size() / 2); }, {"JPEG", "truncated"});
  expect_error<ImageError>([&] { decode_image(png.data(), 20); }, {"PNG"});
  expect_error<ImageError>([&] { decode_image(jpg.data(), 20); }, {"JPEG"});
  write_bytes(kTmp + "truncated.jpg", std::vector<uint8_t>(jpg.begin(), jpg.begin() + 600));
  expect_error<ImageError>([] { read_image(kTmp + "truncated.jpg"); }, {"truncated.jpg", "truncated"});
}

TEST(BadImage, EveryTruncationEitherDecodesCorrectlyOrThrows) {
  for (const char* f : {"rgb_37x23.png", "palette_33x21.png", "rgb420_37x23.jpg",
                        "progressive_45x29.jpg", "cmyk_21x15.jpg"}) {
    const auto bytes = read_bytes(kDir + f);
    const Image full = decode_image(bytes.data(), bytes.size());
    int decoded = 0;
    for (size_t n = 1; n < bytes.size(); ++n) {
      try {
        const Image img = decode_image(bytes.data(), n);
        ASSERT_EQ(img.pixels, full.pixels) << f << " cut at " << n;  // only trailing bytes cut
        ++decoded;
      } catch (const ImageError&) {
      }
    }
    // Only the last 16 bytes may go missing: a PNG's final IDAT CRC and IEND, a JPEG's EOI.
    EXPECT_LE(decoded, 16) << f;
  }
}

TEST(BadImage, CorruptedBytesNeverCrash) {
  std::mt19937 rng(11);
  for (const char* f : {"rgb_37x23.png", "rgb420_37x23.jpg", "progressive_45x29.jpg"}) {
    const auto bytes = read_bytes(kDir + f);
    for (int trial = 0; trial < 300; ++trial) {
      auto broken = bytes;
      for (int k = 0; k < 4; ++k) broken[rng() % broken.size()] = static_cast<uint8_t>(rng());
      try {
        const Image img = decode_image(broken.data(), broken.size());
        EXPECT_EQ(img.pixels.size(), static_cast<size_t>(img.width) * img.height * 3);
      } catch (const ImageError&) {
      }
    }
  }
}

}  // namespace
}  // namespace vitrt
