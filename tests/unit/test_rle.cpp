// COCO RLE against pycocotools and segment_anything (fixtures from make_image_fixtures.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "io/rle.h"
#include "vitrt/error.h"

namespace vitrt {
namespace {

nlohmann::json cases() {
  std::ifstream in(std::string(VITRT_FIXTURES) + "/image/rle.json");
  EXPECT_TRUE(in);
  return nlohmann::json::parse(in);
}

TEST(Rle, MatchesPycocotools) {
  const nlohmann::json all = cases();
  ASSERT_GE(all.size(), 13u);
  for (const auto& c : all) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const int h = c["height"], w = c["width"];
    const auto counts = c["counts"].get<std::vector<uint32_t>>();
    const std::string str = c["string"];

    // Masks too large for the fixture are rebuilt from the reference counts.
    const std::vector<uint8_t> decoded = rle_decode(counts, h, w);
    if (!c["mask"].is_null()) {
      const std::string bits = c["mask"];
      std::vector<uint8_t> mask(bits.size());
      for (size_t i = 0; i < bits.size(); ++i) mask[i] = bits[i] == '1';
      EXPECT_EQ(decoded, mask);
    }
    EXPECT_EQ(rle_counts(decoded.data(), h, w), counts);
    EXPECT_EQ(rle_to_string(counts), str);
    EXPECT_EQ(rle_from_string(str), counts);
    EXPECT_EQ(rle_area(counts), c["area"].get<uint64_t>());
    EXPECT_EQ(mask_area(decoded.data(), h, w), c["area"].get<uint64_t>());
    const auto bbox = mask_bbox_xywh(decoded.data(), h, w);
    EXPECT_EQ(std::vector<double>(bbox.begin(), bbox.end()), c["bbox_xywh"].get<std::vector<double>>());
    const auto box = mask_box_xyxy(decoded.data(), h, w);
    EXPECT_EQ(std::vector<int>(box.begin(), box.end()), c["sam_box_xyxy"].get<std::vector<int>>());
  }
}

TEST(Rle, NonzeroBytesCountAsSet) {
  const uint8_t mask[4] = {0, 7, 255, 0};  // 2x2, column-major: 0, 255, 7, 0
  EXPECT_EQ(rle_counts(mask, 2, 2), (std::vector<uint32_t>{1, 2, 1}));
}

TEST(Rle, RejectsMalformedInput) {
  EXPECT_THROW(rle_decode({1, 2}, 2, 2), InvalidArgument);   // sums to 3, not 4
  EXPECT_THROW(rle_from_string("0`"), InvalidArgument);      // ends inside a count
  EXPECT_THROW(rle_from_string("0 "), InvalidArgument);      // character below '0'
  EXPECT_THROW(rle_from_string("0\x7f"), InvalidArgument);   // character above 'o'
  EXPECT_THROW(rle_from_string("1ZO"), InvalidArgument);     // second count negative
}

}  // namespace
}  // namespace vitrt
