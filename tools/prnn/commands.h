// Subcommands of the prnn CLI. Each registers its options on the app and returns the handler.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "prnn/train.h"

namespace prnn::cli {

void add_info_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_plan_command(CLI::App& app);
// `prnn train long-memory` (cmd_train.cpp).
void add_train_command(CLI::App& app);
// Runs the long-memory job with a progress bar and a log line every log_every iterations (0:
// none), then prints the result; `prnn demo` uses it on a GPU machine.
void run_long_memory_command(const LongMemoryConfig& config, std::int64_t log_every);
// command_line: the exact invocation, recorded in every CSV header.
void add_bench_command(CLI::App& app, const std::string& command_line);

}  // namespace prnn::cli
