// Strict access to a state_dict: every tensor the model takes is checked for shape, and
// whatever the model did not take is reported, so a checkpoint either matches exactly or fails
// with a message naming the key and the shapes.
#pragma once
#include <set>
#include <string>

#include "vitrt/checkpoint.h"
#include "vitrt/error.h"

namespace vitrt::sam {

class WeightReader {
 public:
  explicit WeightReader(const StateDict& sd) : sd_(sd) {}

  bool has(const std::string& key) const { return sd_.count(key) != 0; }

  // The tensor `key` as float32, which must have shape `expected`.
  Tensor take(const std::string& key, const Shape& expected) {
    Tensor t = take_any(key);
    VITRT_CHECK(t.shape() == expected, CheckpointError, "checkpoint tensor '", key, "' has shape ",
                shape_str(t.shape()), ", the model expects ", shape_str(expected));
    return t;
  }
  // The tensor `key` as float32, any shape (caller checks what it needs).
  Tensor take_any(const std::string& key) {
    auto it = sd_.find(key);
    VITRT_CHECK(it != sd_.end(), CheckpointError, "checkpoint is missing tensor '", key, "'");
    used_.insert(key);
    const Tensor& t = it->second;
    VITRT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F16 || t.dtype() == DType::BF16 ||
                    t.dtype() == DType::F64,
                CheckpointError, "checkpoint tensor '", key, "' has dtype ", dtype_name(t.dtype()),
                ", expected a floating point type");
    return t.to_f32();
  }
  // Throws if the checkpoint holds tensors the model has no place for.
  void expect_all_used() const {
    std::string extra;
    int n = 0;
    for (const auto& [key, t] : sd_) {
      if (used_.count(key)) continue;
      if (n < 8) extra += (n ? ", '" : "'") + key + "' " + shape_str(t.shape());
      ++n;
    }
    VITRT_CHECK(n == 0, CheckpointError, "checkpoint has ", n, " unexpected tensor(s) for this model: ", extra,
                n > 8 ? ", ..." : "");
  }

 private:
  const StateDict& sd_;
  std::set<std::string> used_;
};

}  // namespace vitrt::sam
