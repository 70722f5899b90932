// prnn: fast recurrent-network training at small batch sizes. `prnn --help` lists the commands.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.h"
#include "prnn/error.h"

int main(int argc, char** argv) {
  CLI::App app{"prnn: fast recurrent-network training at small mini-batch sizes"};
  app.require_subcommand(1);
  prnn::cli::add_info_command(app);
  prnn::cli::add_demo_command(app);
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
