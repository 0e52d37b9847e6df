// Runs the `vitrt` binary as a user would (VITRT_CLI is its path, set by tests/CMakeLists.txt) and
// returns its exit code with stdout and stderr together.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace vitrt::test {

struct CliResult {
  int code;
  std::string out;
};

inline CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(VITRT_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed for: " + cmd};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace vitrt::test
