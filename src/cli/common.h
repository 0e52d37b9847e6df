// Shared pieces of the vitrt subcommands: stage timing and the one-line progress messages.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

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

inline void note(const std::string& msg) { std::fprintf(stderr, "[vitrt] %s\n", msg.c_str()); }

}  // namespace vitrt::cli
