// NumPy .npy files (how the CLI takes low-res logits back as a mask prompt).
#include "fuzz/fuzz_util.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = vitrt::fuzz::write_input_file(data, size, ".npy");
  vitrt::fuzz::only_vitrt_errors([&] {
    const vitrt::Tensor t = vitrt::read_npy_f32(path);
    const float* p = t.data<float>();
    volatile float acc = 0;
    for (int64_t i = 0; i < t.numel(); ++i) acc = acc + p[i];
  });
  return 0;
}
