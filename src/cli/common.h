// Shared pieces of the vitrt subcommands: stage timing and the one-line progress messages.
#pragma once
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device_memory.h"
#include "vitrt/error.h"
#include "vitrt/tensor.h"
#include "vitrt/vit.h"

namespace vitrt::cli {

// Prints "[vitrt] <what> ... <ms> ms" around a stage and records the time for the JSON output.
class StageTimer {
 public:
  explicit StageTimer(bool quiet = false) : quiet_(quiet) {}
  template <class F>
  auto run(const std::string& what, F&& f) {
    if (!quiet_) std::fprintf(stderr, "[vitrt] %s ...", what.c_str()), std::fflush(stderr);
    auto t0 = std::chrono::steady_clock::now();
    auto finish = [&] {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      stages_.emplace_back(what, ms);
      if (!quiet_) std::fprintf(stderr, " %.1f ms\n", ms);
    };
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      finish();
    } else {
      auto r = f();
      finish();
      return r;
    }
  }
  const std::vector<std::pair<std::string, double>>& stages() const { return stages_; }

 private:
  bool quiet_;
  std::vector<std::pair<std::string, double>> stages_;
};

// --device auto|cpu|cuda and --dtype fp32|bf16 -> where and how the model runs.
// auto = cuda when this build has the CUDA backend and a GPU is present, else cpu.
// Callers name the two parts (`const Device device = r.first`) rather than bind them: clang before 16
// cannot capture structured bindings in lambdas, and the commands pass them to lambdas.
inline std::pair<Device, DType> parse_device(const std::string& device, const std::string& dtype) {
  Device d;
  if (device == "auto") d = devmem::cuda_available() ? Device::CUDA : Device::CPU;
  else if (device == "cpu") d = Device::CPU;
  else if (device == "cuda") {
    VITRT_CHECK(devmem::cuda_available(), InvalidArgument,
                "device 'cuda' is not available (no CUDA backend in this build, or no GPU found)");
    d = Device::CUDA;
  } else {
    throw InvalidArgument("unknown device '" + device + "': expected auto, cpu or cuda");
  }
  VITRT_CHECK(dtype == "fp32" || dtype == "bf16", InvalidArgument, "unknown dtype '", dtype, "': expected fp32 or bf16");
  const DType t = dtype == "bf16" ? DType::BF16 : DType::F32;
  VITRT_CHECK(d == Device::CUDA || t == DType::F32, InvalidArgument, "the CPU backend computes in fp32 only");
  return {d, t};
}

// --decoder-dtype: "" (the same as --dtype) or fp32 / bf16 for the mask decoder alone.
inline std::optional<DType> parse_decoder_dtype(const std::string& s, Device device) {
  if (s.empty()) return std::nullopt;
  VITRT_CHECK(s == "fp32" || s == "bf16", InvalidArgument, "unknown decoder dtype '", s, "': expected fp32 or bf16");
  VITRT_CHECK(device == Device::CUDA || s == "fp32", InvalidArgument, "the CPU backend computes in fp32 only");
  return s == "bf16" ? DType::BF16 : DType::F32;
}
inline constexpr const char* kDecoderDtypeHelp =
    "fp32 or bf16: the mask decoder's own dtype (default fp32: with --dtype bf16 the masks still agree with "
    "the reference's on >= 99.5% of pixels, with no measurable cost per click on an H200; bf16 is faster for bulk "
    "decoding but misses that bar)";
// Bulk commands (everything, bench) decode thousands of prompts per image: their decoder follows
// --dtype unless told otherwise.
inline constexpr const char* kBulkDecoderDtypeHelp =
    "fp32 or bf16: the mask decoder's own dtype (default: --dtype, for throughput; fp32 with --dtype bf16 "
    "meets the reference-agreement bar, ~2.6x slower for segment-everything)";
inline std::optional<DType> bulk_decoder_dtype(const std::string& s, Device device, DType dtype) {
  const std::optional<DType> d = parse_decoder_dtype(s, device);
  return d ? d : std::optional<DType>(dtype);
}

// The class names of a num_classes-way ViT head (`vitrt classify`, `vitrt serve`): the file
// `requested` (--classes) if given, which must have that many lines; else, for a 1000-way head,
// Debian's opencv-doc ImageNet list when installed, or the copy scripts/make_vit_fixtures.py made
// from it next to this source tree (a build-tree fallback: installs should have opencv-doc or pass
// --classes); else none. *used_path: the file read, "" when none.
inline std::vector<std::string> vit_class_names(const std::string& requested, int num_classes, std::string* used_path) {
  std::string path = requested;
  if (path.empty() && num_classes == 1000) {
    const auto copy = std::filesystem::path(__FILE__).parent_path() / "../../tests/fixtures/vit/imagenet_classes.txt";
    if (std::filesystem::exists(kOpencvDocImagenetClasses)) path = kOpencvDocImagenetClasses;
    else if (std::filesystem::exists(copy)) path = std::filesystem::weakly_canonical(copy).string();
  }
  *used_path = path;
  if (path.empty()) return {};
  std::vector<std::string> names = read_class_names(path);
  VITRT_CHECK(!requested.empty() || names.size() == 1000, IoError, "class names file '", path, "' has ",
              names.size(), " names, expected 1000");
  VITRT_CHECK(static_cast<int>(names.size()) == num_classes, InvalidArgument, "class names file '", path, "' has ",
              names.size(), " names but the model has ", num_classes, " classes");
  return names;
}

inline void note(const std::string& msg) { std::fprintf(stderr, "[vitrt] %s\n", msg.c_str()); }

}  // namespace vitrt::cli
