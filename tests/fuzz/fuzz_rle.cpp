// COCO compact RLE strings (read from annotation files by `vitrt eval-coco`): parse, then decode
// at a size taken from the first input byte where the counts can fill it.
#include "fuzz/fuzz_util.h"
#include "io/rle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int h = 1 + data[0] % 64;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  vitrt::fuzz::only_vitrt_errors([&] {
    const std::vector<uint32_t> counts = vitrt::rle_from_string(text);
    uint64_t total = 0;
    for (uint32_t c : counts) total += c;
    if (total % h == 0 && total / h <= 4096) {
      const auto mask = vitrt::rle_decode(counts, h, static_cast<int>(total / h));
      if (vitrt::rle_counts(mask.data(), h, static_cast<int>(total / h)).empty() && total) std::abort();
    }
  });
  return 0;
}
