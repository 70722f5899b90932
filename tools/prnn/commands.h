// Subcommands of the prnn CLI. Each registers its options on the app and returns the handler.
#pragma once

#include <CLI/CLI.hpp>

namespace prnn::cli {

void add_info_command(CLI::App& app);
void add_demo_command(CLI::App& app);

}  // namespace prnn::cli
