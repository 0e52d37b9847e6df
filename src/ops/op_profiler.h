// Per-operator device-time profile of CUDA forwards (`vitrt bench --profile`).
//
// When enabled, every CUDA operator dispatched by ops.cpp records a pair of CUDA events around its
// launches on the current stream; take() synchronises and returns the time per operator label
// (name plus shape, e.g. "linear 4096x3840x1280 +gelu"), aggregated over calls and sorted by time.
// Disabled (the default) it costs one branch per operator. Not for use inside CUDA-graph capture
// (events recorded while capturing would become graph nodes), so profile an eager forward.
#pragma once
#include <string>
#include <vector>

#include "vitrt/error.h"

namespace vitrt::ops::profiler {

void set_enabled(bool on);
bool enabled();

// Times the device work launched between construction and destruction under `label`
// (nothing when the label is empty, which is what the macro below passes when disabled).
class Scope {
 public:
  explicit Scope(std::string label);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  int slot_ = -1;
};

struct Entry {
  std::string label;
  int calls = 0;
  double ms = 0;
};
// Synchronises, aggregates the recorded scopes by label (largest total first) and clears them.
std::vector<Entry> take();

}  // namespace vitrt::ops::profiler

// Profile the rest of the enclosing block under a label built from the arguments (only when enabled).
#define VITRT_PROFILE_OP(...)                                                                                  \
  ::vitrt::ops::profiler::Scope vitrt_profile_scope_(::vitrt::ops::profiler::enabled()                       \
                                                         ? ::vitrt::detail::concat(__VA_ARGS__)               \
                                                         : std::string())
