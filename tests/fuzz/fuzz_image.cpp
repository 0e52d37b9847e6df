// PNG / JPEG decoding from memory (what the server does with uploaded images), with a pixel limit
// low enough that a header announcing a large image is refused before its buffer is allocated.
#include "fuzz/fuzz_util.h"
#include "vitrt/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vitrt::ImageLimits limits;
  limits.max_pixels = 1 << 22;
  vitrt::fuzz::only_vitrt_errors([&] {
    const vitrt::Image im = vitrt::decode_image(data, size, limits);
    if (im.pixels.size() != size_t(im.width) * im.height * im.channels) std::abort();
  });
  return 0;
}
