// Subcommands of the prnn CLI. Each registers its options on the app and returns the handler.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace prnn::cli {

void add_info_command(CLI::App& app);
void add_demo_command(CLI::App& app);
// command_line: the exact invocation, recorded in every CSV header.
void add_bench_command(CLI::App& app, const std::string& command_line);

}  // namespace prnn::cli
