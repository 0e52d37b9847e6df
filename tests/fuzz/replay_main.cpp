// Runs a fuzz target (LLVMFuzzerTestOneInput) over files and directories given on the command line,
// the way libFuzzer replays a corpus, for builds without libFuzzer: the ctests fuzz_replay_<target>.
// Exits non-zero when an input escapes the target (an exception other than vitrt::Error); a crash
// ends the process, which ctest reports as a failure too.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "no such input: %s\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs\n");
    return 2;
  }
  int failed = 0;
  for (const auto& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAIL %s: %s\n", p.c_str(), e.what());
      ++failed;
    }
  }
  std::printf("%zu inputs, %d failed\n", inputs.size(), failed);
  return failed ? 1 : 0;
}
