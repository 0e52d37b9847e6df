#pragma once
#include <CLI/CLI.hpp>

namespace vitrt::cli {
void add_segment(CLI::App& app);
void add_embed(CLI::App& app);
void add_bench(CLI::App& app);
void add_info(CLI::App& app);
void add_fidelity_check(CLI::App& app);
void add_everything(CLI::App& app);   // cmd_everything.cpp
void add_eval_coco(CLI::App& app);    // cmd_eval_coco.cpp
void add_serve(CLI::App& app);        // cmd_serve.cpp
void add_classify(CLI::App& app);     // cmd_classify.cpp
void add_sparsify(CLI::App& app);     // cmd_sparsify.cpp
}  // namespace vitrt::cli
