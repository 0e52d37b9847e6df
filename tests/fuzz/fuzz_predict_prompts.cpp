// SamPredictor::predict through the C++ API (what the Python bindings pass on), with prompts made of
// raw floats (NaN, infinities, huge and negative values included), labels outside {-1, 0, 1}, boxes
// and mask inputs of arbitrary small shapes, on a small random SAM with a 40 x 30 image set.
// Layout of the input: byte 0 the point count (bits 0-2, mod 6) and flags (box, mask input, multimask,
// logits), then per point x, y as raw float32 and a label byte, then the box (four float32), then
// the mask input's three dimensions (bytes, 0-39).
#include <cstring>

#include "fuzz/fuzz_util.h"
#include "sam_test_util.h"
#include "vitrt/sam.h"

namespace {

struct Reader {
  const uint8_t* p;
  size_t n;
  uint8_t byte() { return n ? (--n, *p++) : 0; }
  float f32() {
    uint8_t b[4] = {byte(), byte(), byte(), byte()};
    float f;
    std::memcpy(&f, b, 4);
    return f;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const vitrt::Image image = vitrt::test::random_image(40, 30);
  static const vitrt::SamPredictor predictor = [] {
    vitrt::SamPredictor p(vitrt::test::small_model());
    p.set_image(image);
    return p;
  }();
  Reader in{data, size};
  const uint8_t head = in.byte();
  vitrt::Prompt prompt;
  for (int i = 0; i < (head & 7) % 6; ++i) {
    vitrt::Point pt;
    pt.x = in.f32();
    pt.y = in.f32();
    pt.label = static_cast<int>(in.byte() % 5) - 2;
    prompt.points.push_back(pt);
  }
  if (head & 0x08) prompt.box = vitrt::Box{in.f32(), in.f32(), in.f32(), in.f32()};
  if (head & 0x10) {
    const int64_t d0 = in.byte() % 40, d1 = in.byte() % 40, d2 = in.byte() % 40;
    prompt.mask_input = vitrt::fuzz::pattern_tensor({d0, d1, d2});
  }
  vitrt::fuzz::only_vitrt_errors([&] {
    const vitrt::Prediction r = predictor.predict(prompt, (head & 0x20) != 0, (head & 0x40) != 0);
    if (r.masks.dim() != 3 || r.masks.size(1) != image.height || r.masks.size(2) != image.width) std::abort();
  });
  return 0;
}
