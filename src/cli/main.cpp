// vitrt command line: segment, embed, bench, info, fidelity-check.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "vitrt/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "vitrt: Segment Anything (SAM vit_b/l/h) in C++, loading the official checkpoints as they are.\n"
      "Run `vitrt <command> --help` for the options of each command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vitrt 0.1.0");
  vitrt::cli::add_segment(app);
  vitrt::cli::add_embed(app);
  vitrt::cli::add_bench(app);
  vitrt::cli::add_info(app);
  vitrt::cli::add_fidelity_check(app);
  vitrt::cli::add_everything(app);
  vitrt::cli::add_eval_coco(app);
  vitrt::cli::add_serve(app);
  vitrt::cli::add_classify(app);
  vitrt::cli::add_sparsify(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const vitrt::Error& e) {
    std::fprintf(stderr, "vitrt: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vitrt: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
