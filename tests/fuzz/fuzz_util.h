// Shared by the fuzz targets (tests/fuzz/fuzz_*.cpp). Each target feeds its input to one parser and
// lets only vitrt errors through: anything else escaping (std::bad_alloc, std::out_of_range, a
// sanitizer report, a crash) is a finding. The same targets build two ways:
//  - with clang's libFuzzer (-DVITRT_BUILD_FUZZERS=ON, scripts/fuzz.sh): coverage-guided search;
//  - with replay_main.cpp (every build): ctests that run each target over its corpus in
//    tests/fuzz/corpus/<target>/ (seeds and every input a fuzzing run found), so a fixed bug stays fixed.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "vitrt/error.h"
#include "vitrt/tensor.h"

namespace vitrt::fuzz {

// The input as a file (the checkpoint and model-file loaders map files), one per process, in the
// RAM-backed /dev/shm when it exists.
inline std::string write_input_file(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [&] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/vitrt_fuzz_" + std::to_string(getpid()) + suffix;
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// Runs `body`; a vitrt::Error is an accepted outcome (a clear refusal), anything else propagates.
// VITRT_FUZZ_VERBOSE=1 prints each refusal and each acceptance (to see what a seed reaches).
template <class F>
void only_vitrt_errors(F&& body) {
  static const bool verbose = std::getenv("VITRT_FUZZ_VERBOSE") != nullptr;
  try {
    body();
    if (verbose) std::fprintf(stderr, "accepted\n");
  } catch (const Error& e) {
    if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
  }
}

// A float32 tensor of `shape` with small deterministic values (not zeros: a zero weight can hide a
// wrong index).
inline Tensor pattern_tensor(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
  return t;
}

}  // namespace vitrt::fuzz
