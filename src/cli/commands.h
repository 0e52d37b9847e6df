#pragma once
#include <CLI/CLI.hpp>

namespace vitrt::cli {
void add_segment(CLI::App& app);
void add_embed(CLI::App& app);
void add_bench(CLI::App& app);
void add_info(CLI::App& app);
void add_fidelity_check(CLI::App& app);
}  // namespace vitrt::cli
