// torch.save archives (zip + restricted pickle + storages), read through the memory-mapped loader.
#include "fuzz/fuzz_state_dict.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = vitrt::fuzz::write_input_file(data, size, ".pth");
  vitrt::fuzz::only_vitrt_errors([&] { vitrt::fuzz::touch_tensors(vitrt::load_torch_checkpoint(path)); });
  return 0;
}
