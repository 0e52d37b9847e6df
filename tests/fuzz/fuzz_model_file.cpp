// vitrt model files (safetensors with BSR weights): loading validates every BSR part; folding back to
// dense then walks the blocks, so an index the validation let through would be caught there; and
// ops::simplify_bsr_mlp runs on every pair of the file's BSR weights.
#include "fuzz/fuzz_state_dict.h"
#include "fuzz/fuzz_util.h"
#include "io/vitrt_model_file.h"
#include "ops/ops.h"

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
  // The MLP simplification a ViT applies at load, on every pair of BSR weights that could be an MLP
  // (it validates both and the chain itself: a pair that does not chain is an error, not a crash).
  vitrt::fuzz::only_vitrt_errors([&] {
    const vitrt::io::ModelFile f = vitrt::io::load_model_file(path);
    for (const auto& e1 : f.sparse)
      for (const auto& e2 : f.sparse)
        vitrt::fuzz::only_vitrt_errors([&] {
          const vitrt::BsrMatrix &fc1 = e1.second, &fc2 = e2.second;
          if (fc1.rows > (1 << 16) || fc2.rows > (1 << 16)) return;
          const vitrt::Tensor b1 = vitrt::Tensor::zeros({fc1.rows}), b2 = vitrt::Tensor::zeros({fc2.rows});
          const vitrt::ops::SimplifiedBsrMlp s = vitrt::ops::simplify_bsr_mlp(fc1, b1, fc2, b2);
          if (s.fc1.nnz_blocks() + s.fc1_blocks_dropped != fc1.nnz_blocks() ||
              s.fc2.nnz_blocks() + s.fc2_blocks_folded != fc2.nnz_blocks())
            std::abort();
          vitrt::validate(s.fc1);
          vitrt::validate(s.fc2);
        });
  });
  return 0;
}
