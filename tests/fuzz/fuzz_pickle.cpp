// The restricted unpickler on arbitrary bytes (the pickle inside a torch.save archive).
#include <span>

#include "fuzz/fuzz_util.h"
#include "io/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vitrt::fuzz::only_vitrt_errors([&] { vitrt::io::unpickle_torch(std::span<const uint8_t>(data, size), "fuzz"); });
  return 0;
}
