// The ViT classifier built from an edited state_dict (fuzz_state_dict_edits.h) of the small
// torchvision fixture (image 112, patch 14, hidden 32, 2 layers), then one forward on the CPU when
// it builds. The first input byte picks the head count (0: hidden / 64).
#include "fuzz/fuzz_state_dict_edits.h"
#include "fuzz/fuzz_util.h"
#include "vitrt/vit.h"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const vitrt::StateDict base = vitrt::load_state_dict(std::string(VITRT_FIXTURES) + "/vit/vit_tiny_p14.pth");
  if (size < 1) return 0;
  vitrt::StateDict sd = base;
  vitrt::fuzz::apply_edits(sd, data + 1, size - 1);
  vitrt::fuzz::only_vitrt_errors([&] {
    const auto model = vitrt::vit_from_state_dict(sd, vitrt::Device::CPU, vitrt::DType::F32, data[0] % 5);
    const int s = vitrt::vit_config(*model).image_size;
    if (s > 256) return;  // (the edits cannot grow it this far; a guard against slow inputs)
    const vitrt::Tensor input = vitrt::fuzz::pattern_tensor({1, s, s, 3});
    const vitrt::Tensor logits = vitrt::vit_logits(*model, input);
    if (logits.dim() != 2 || logits.size(0) != 1 || logits.size(1) != vitrt::vit_config(*model).num_classes) std::abort();
  });
  return 0;
}
