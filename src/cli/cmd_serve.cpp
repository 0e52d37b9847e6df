#include "cli/commands.h"

namespace vitrt::cli {
// Not implemented yet: registers nothing.
void add_serve(CLI::App&) {}
}  // namespace vitrt::cli
