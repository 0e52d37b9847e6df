// SuperBlock Supermask folding (vitrt/supermask.h) on an edited state_dict (fuzz_state_dict_edits.h)
// of the float32 Supermask fixture: scores, weights, scale / shift resized, dropped, swapped or
// retyped. The first input byte picks the sparsity (byte / 256), the second the tile (0: inferred
// from the shapes). fold_supermasks must refuse with a vitrt error or fold: no scores left, every
// weight its old shape and dtype.
#include "fuzz/fuzz_state_dict_edits.h"
#include "fuzz/fuzz_util.h"
#include "vitrt/supermask.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const vitrt::StateDict base =
      vitrt::load_state_dict(std::string(VITRT_FIXTURES) + "/supermask/state_dict_f32.pth");
  if (size < 2) return 0;
  vitrt::StateDict sd = base;
  vitrt::fuzz::apply_edits(sd, data + 2, size - 2);
  vitrt::fuzz::only_vitrt_errors([&] {
    const vitrt::StateDict folded = vitrt::fold_supermasks(sd, data[0] / 256.0, data[1] % 70);
    if (vitrt::has_supermasks(folded)) std::abort();
    for (const auto& [name, t] : folded) {
      auto it = sd.find(name);
      if (it == sd.end() || it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) std::abort();
    }
  });
  return 0;
}
