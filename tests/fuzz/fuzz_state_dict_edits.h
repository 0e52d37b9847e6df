// Structure-aware edits of a valid state_dict, for the model fuzz targets (fuzz_vit_model,
// fuzz_sam_model): a byte-level mutation of a checkpoint file mostly lands in tensor data, while
// what a malicious checkpoint can do to the model code is give tensors shapes that disagree with
// each other. Each 4 input bytes are one edit: resize a dimension, drop or add one, delete a
// tensor, give one tensor another's value, or change its dtype. The model must refuse the result
// with a vitrt error or build and run without touching memory it does not own.
#pragma once
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "vitrt/checkpoint.h"

namespace vitrt::fuzz {

// Applies up to `max_edits` edits read from data[0..size) to `sd`; returns the number applied.
inline int apply_edits(StateDict& sd, const uint8_t* data, size_t size, int max_edits = 8) {
  int applied = 0;
  for (size_t at = 0; at + 4 <= size && applied < max_edits; at += 4, ++applied) {
    if (sd.empty()) break;
    const uint8_t op = data[at], a = data[at + 1], b = data[at + 2], c = data[at + 3];
    auto it = std::next(sd.begin(), a % sd.size());
    Shape shape = it->second.shape();
    switch (op % 6) {
      case 0:  // one dimension to 0..31 (a tensor of 0..31 x the rest elements)
        if (shape.empty()) break;
        shape[b % shape.size()] = c % 32;
        if (shape_numel(shape) <= (1 << 22)) it->second = pattern_tensor(shape);
        break;
      case 1:  // one more dimension
        if (shape.size() >= 5) break;
        shape.insert(shape.begin() + b % (shape.size() + 1), 1 + c % 3);
        if (shape_numel(shape) <= (1 << 22)) it->second = pattern_tensor(shape);
        break;
      case 2:  // one dimension fewer
        if (shape.empty()) break;
        shape.erase(shape.begin() + b % shape.size());
        it->second = pattern_tensor(shape);
        break;
      case 3:
        sd.erase(it);
        break;
      case 4: {  // another tensor's value under this name
        auto other = std::next(sd.begin(), b % sd.size());
        it->second = other->second;
        break;
      }
      case 5: {  // same values, another dtype (the loader keeps a checkpoint's dtype)
        const DType dts[] = {DType::F32, DType::BF16, DType::F16, DType::F64, DType::I64, DType::U8};
        const DType to = dts[c % std::size(dts)];
        if (to != DType::F32) {
          Tensor t = Tensor::empty(shape, to);
          std::memset(t.raw(), 0, t.nbytes());
          it->second = t;
        }
        break;
      }
    }
  }
  return applied;
}

}  // namespace vitrt::fuzz
