#include "cli/commands.h"

namespace vitrt::cli {
// Not implemented yet: registers nothing.
void add_eval_coco(CLI::App&) {}
}  // namespace vitrt::cli
