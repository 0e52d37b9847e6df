// safetensors files (JSON header + raw tensor bytes), read through the memory-mapped loader.
#include "fuzz/fuzz_state_dict.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = vitrt::fuzz::write_input_file(data, size, ".safetensors");
  vitrt::fuzz::only_vitrt_errors([&] { vitrt::fuzz::touch_tensors(vitrt::load_safetensors(path)); });
  return 0;
}
