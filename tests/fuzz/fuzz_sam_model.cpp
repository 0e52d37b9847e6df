// SAM built from an edited state_dict (fuzz_state_dict_edits.h) of the small official-layout
// fixture (tests/fixtures/sam/interp256: image 256, width 32, 4 blocks, its config from the JSON next
// to it), then, when it builds, one image embedded and one point prompt decoded on the CPU.
#include "fuzz/fuzz_state_dict_edits.h"
#include "fuzz/fuzz_util.h"
#include "models/sam/sam_model.h"
#include "sam_test_util.h"
#include "vitrt/sam.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = std::string(VITRT_FIXTURES) + "/sam/";
  static const vitrt::StateDict base = vitrt::load_state_dict(dir + "interp256.pth");
  static const vitrt::SamConfig cfg = [] {
    vitrt::SamConfig c = vitrt::sam::config_from_state_dict(base);
    vitrt::sam::apply_config_json(dir + "interp256.json", c);
    return c;
  }();
  static const vitrt::Image image = vitrt::test::random_image(40, 30);
  vitrt::StateDict sd = base;
  vitrt::fuzz::apply_edits(sd, data, size);
  vitrt::fuzz::only_vitrt_errors([&] {
    vitrt::SamPredictor predictor(vitrt::SamModel::from_state_dict(sd, cfg));
    predictor.set_image(image);
    vitrt::Prompt p;
    p.points = {{10.f, 12.f, 1}};
    const vitrt::Prediction r = predictor.predict(p, /*multimask_output=*/true);
    if (r.masks.dim() != 3 || r.masks.size(1) != image.height || r.masks.size(2) != image.width) std::abort();
  });
  return 0;
}
