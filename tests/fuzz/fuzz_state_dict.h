// Reads every byte of every tensor a loader returned and converts it to F32: a tensor whose view
// runs past its storage or its mapping shows up here (under AddressSanitizer, or as a fault).
#pragma once
#include "vitrt/checkpoint.h"

namespace vitrt::fuzz {

inline unsigned touch_tensors(const StateDict& sd) {
  unsigned acc = 0;
  for (const auto& [name, t] : sd) {
    const auto* p = static_cast<const unsigned char*>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i) acc += p[i];
    if (t.numel() > 0 && t.numel() < (int64_t(1) << 20)) acc += static_cast<unsigned>(t.to_f32().numel());
  }
  return acc;
}

}  // namespace vitrt::fuzz
