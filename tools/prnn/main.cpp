// prnn: fast recurrent-network training at small batch sizes. `prnn --help` lists the commands.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "commands.h"
#include "prnn/error.h"

int main(int argc, char** argv) {
  CLI::App app{"prnn: fast recurrent-network training at small mini-batch sizes"};
  app.require_subcommand(1);
  prnn::cli::add_info_command(app);
  prnn::cli::add_demo_command(app);
  prnn::cli::add_plan_command(app);
  prnn::cli::add_train_command(app);
  std::string command_line = "prnn";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  prnn::cli::add_bench_command(app, command_line);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const prnn::Error& e) {
    std::fprintf(stderr, "prnn: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
