// vitrt model files (safetensors with BSR weights): loading validates every BSR part; folding back to
// dense then walks the blocks, so an index the validation let through would be caught there.
#include "fuzz/fuzz_state_dict.h"
#include "fuzz/fuzz_util.h"
#include "io/vitrt_model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = vitrt::fuzz::write_input_file(data, size, ".vitrt");
  vitrt::fuzz::only_vitrt_errors([&] {
    const vitrt::io::ModelFile f = vitrt::io::load_model_file(path);
    vitrt::fuzz::touch_tensors(f.dense);
    // Folding allocates rows x cols: only for weights of plausible size.
    int64_t elems = 0;
    for (const auto& [name, m] : f.sparse) elems += int64_t(m.rows) * m.cols;
    if (elems <= (int64_t(1) << 24)) vitrt::fuzz::touch_tensors(vitrt::io::fold_to_dense(f));
  });
  return 0;
}
