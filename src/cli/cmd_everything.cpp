#include "cli/commands.h"

namespace vitrt::cli {
// Not implemented yet: registers nothing.
void add_everything(CLI::App&) {}
}  // namespace vitrt::cli
