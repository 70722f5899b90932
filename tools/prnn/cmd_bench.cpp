// `prnn bench <suite>`: runs a benchmark suite and writes tidy CSV (to --out, or stdout), with
// the exact command and the GPU in the header lines, and a readable table on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "prnn/bench.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/log.h"

namespace prnn::cli {
namespace {

struct BenchCommon {
  std::string out;
  std::string command_line;
};

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

// "<cpu model>, <n> cores" of this host, from /proc/cpuinfo where there is one.
std::string host_description() {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::size_t begin = line.find_first_not_of(" \t", colon + 1);
    if (begin != std::string::npos) model = line.substr(begin);
    break;
  }
  // The kernel release tells the host's runtime apart (a sandboxed one adds to every CUDA call,
  // which the host-bound graph benches feel).
  std::string kernel = "unknown kernel";
  if (std::ifstream release("/proc/sys/kernel/osrelease"); release) std::getline(release, kernel);
  return fmt::format("{}, {} cores, kernel {}", model, std::thread::hardware_concurrency(), kernel);
}

void run_with_csv(const BenchCommon& common, const std::function<void(const BenchSink&)>& body) {
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!common.out.empty()) {
    file.open(common.out);
    if (!file) throw InvalidArgument(fmt::format("--out: cannot open '{}' for writing", common.out));
    out = &file;
  }
  const std::string gpu = device_count() > 0 ? device_info(0).name : "no GPU";
  *out << "# cmd: " << common.command_line << "\n# gpu: " << gpu << ", " << today() << "\n";
  *out << "# host: " << host_description() << "\n";
  *out << "suite,case,impl,metric,value,unit\n";
  body([&](const BenchRow& r) {
    *out << fmt::format("{},{},{},{},{:.6g},{}\n", r.suite, r.case_, r.impl, r.metric, r.value, r.unit);
    out->flush();
    std::fprintf(stderr, "%-44s %-18s %-20s %12.4g %s\n", r.case_.c_str(), r.impl.c_str(),
                 r.metric.c_str(), r.value, r.unit.c_str());
  });
}

// `prnn bench rnn|lstm|gru`: one harness (run_rnn_bench), the suite picks the cell and the cases.
void add_rnn_bench_suite(CLI::App& bench, const std::shared_ptr<BenchCommon>& common,
                         RnnBenchSuite suite) {
  const bool vanilla = suite == RnnBenchSuite::Rnn;
  const char* command = vanilla ? "rnn" : suite == RnnBenchSuite::Lstm ? "lstm" : "gru";
  auto rnn_bench_opts = std::make_shared<RnnBenchOptions>();
  rnn_bench_opts->suite = suite;
  struct RnnBenchNames {
    std::vector<std::string> sweeps{"targets"}, cells{"relu"}, dtypes, impls, maths{"fp32", "tf32"};
    bool no_floor = false, verbose = false;
  };
  auto rnn_bench_names = std::make_shared<RnnBenchNames>();
  rnn_bench_names->dtypes = vanilla ? std::vector<std::string>{"f32"}
                                    : std::vector<std::string>{"f32", "bf16", "f16"};
  auto* rnn_cmd = bench.add_subcommand(
      command, vanilla ? "prnn persistent / gemm_per_step vs cuDNN's three algorithms, fwd, fwd+bwd, "
                      "side by side"
                    : fmt::format("{}: prnn persistent / gemm_per_step vs cuDNN's three "
                                  "algorithms per dtype, fwd, fwd+bwd, side by side",
                                  suite == RnnBenchSuite::Lstm ? "LSTM" : "GRU"));
  rnn_cmd
      ->add_option(
          "--sweep", rnn_bench_names->sweeps,
          vanilla ? "Cases, comma-separated: targets (H=1152 B=1..16 and H=2048 B=4, T=256), figure3 "
                    "(B=1..64), figure4 (T=1..1024), custom (--cells x --dtypes x --hidden x "
                    "--batch x --steps)"
          : suite == RnnBenchSuite::Lstm
              ? "Cases per dtype, comma-separated: targets (H=1152,2048,2560,1024 at B=4 and "
                "H=1024 B=16, T=256), figure3 (H=1024,1152, B=1..64), figure4 (H=1152 B=4, "
                "T=1..1024), custom (--hidden x --batch x --steps)"
              : "Cases per dtype, comma-separated: targets (H=1152 B=4 T=256), figure3 "
                "(H=1024,1152, B=1..64), figure4 (H=1152 B=4, T=1..1024), custom (--hidden x "
                "--batch x --steps)")
      ->delimiter(',')
      ->check(CLI::IsMember({"targets", "figure3", "figure4", "custom"}))
      ->capture_default_str();
  if (vanilla) {
    rnn_cmd
        ->add_option("--cells", rnn_bench_names->cells,
                     "custom: cells, comma-separated: relu,tanh,gru,lstm")
        ->delimiter(',')
        ->capture_default_str();
  }
  rnn_cmd
      ->add_option("--dtypes", rnn_bench_names->dtypes,
                   vanilla ? "custom: data types, comma-separated: f32,f16,bf16"
                           : "Data types of every sweep, comma-separated: f32,f16,bf16 (prnn "
                             "weight dtype; cuDNN data with fp32 math)")
      ->delimiter(',')
      ->capture_default_str();
  rnn_cmd->add_option("--hidden", rnn_bench_opts->hidden, "custom: hidden sizes, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  rnn_cmd->add_option("--batch", rnn_bench_opts->batch, "custom: batch sizes, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  rnn_cmd->add_option("--steps", rnn_bench_opts->steps, "custom: sequence lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  rnn_cmd->add_option("--input-size", rnn_bench_opts->input_size, "Input size (0: same as hidden)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  rnn_cmd->add_option("--repeats", rnn_bench_opts->repeats, "Timed runs per measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  rnn_cmd
      ->add_option("--impls", rnn_bench_names->impls,
                   "Only these implementations, comma-separated (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(
          std::vector<std::string>(std::begin(kRnnBenchImpls), std::end(kRnnBenchImpls))));
  rnn_cmd
      ->add_option("--math", rnn_bench_names->maths,
                   "f32 cases: GEMM maths, each its own rows: fp32 (prnn fp32 GEMMs, cuDNN "
                   "CUDNN_FMA_MATH), tf32 (prnn TF32 GEMMs, cuDNN default math; impl <name>-tf32)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "tf32"}))
      ->capture_default_str();
  rnn_cmd->add_flag("--no-floor", rnn_bench_names->no_floor,
                    "Skip the grid-sync floor (cuda-grid_sync)");
  rnn_cmd->add_flag("--verbose", rnn_bench_names->verbose,
                    "Log why an implementation rejects a case");
  rnn_cmd->callback([common, rnn_bench_opts, rnn_bench_names, rnn_cmd, vanilla] {
    RnnBenchOptions o = *rnn_bench_opts;
    const RnnBenchNames& n = *rnn_bench_names;
    o.sweeps.clear();
    for (const std::string& name : n.sweeps) {
      if (name == "targets") o.sweeps.push_back(RnnBenchSweep::Targets);
      if (name == "figure3") o.sweeps.push_back(RnnBenchSweep::Figure3);
      if (name == "figure4") o.sweeps.push_back(RnnBenchSweep::Figure4);
      if (name == "custom") o.sweeps.push_back(RnnBenchSweep::Custom);
    }
    const bool custom =
        std::find(o.sweeps.begin(), o.sweeps.end(), RnnBenchSweep::Custom) != o.sweeps.end();
    // rnn: --cells and --dtypes select custom cases; lstm, gru: --dtypes applies to every sweep.
    std::vector<std::string> custom_flags{"--hidden", "--batch", "--steps"};
    if (vanilla) custom_flags.insert(custom_flags.begin(), {"--cells", "--dtypes"});
    for (const std::string& flag : custom_flags)
      if (!custom && rnn_cmd->count(flag) > 0)
        throw InvalidArgument(
            fmt::format("{} selects the cases of --sweep custom, which was not asked for", flag));
    o.cells.clear();
    for (const std::string& name : n.cells) o.cells.push_back(parse_cell(name));
    o.dtypes.clear();
    for (const std::string& name : n.dtypes) o.dtypes.push_back(parse_dtype(name));
    o.impls = n.impls;
    o.maths.clear();
    for (const std::string& m : n.maths) o.maths.push_back(parse_gemm_math(m));
    o.grid_sync_floor = !n.no_floor;
    if (n.verbose) set_log_level(LogLevel::Info);
    run_with_csv(*common, [&](const BenchSink& sink) { run_rnn_bench(o, sink); });
  });
}

}  // namespace

void add_bench_command(CLI::App& app, const std::string& command_line) {
  auto* bench = app.add_subcommand("bench", "Run a benchmark suite, write tidy CSV");
  bench->require_subcommand(1);
  auto common = std::make_shared<BenchCommon>();
  common->command_line = command_line;
  bench->add_option("--out", common->out, "CSV file (default: stdout)");

  auto opts = std::make_shared<ScanBenchOptions>();
  auto* scan = bench->add_subcommand("scan", "Linear recurrence: PLR vs SLR vs CUB, bandwidth sweep");
  scan->add_option("--repeats", opts->repeats, "Timed runs per measurement")->check(CLI::PositiveNumber);
  scan->add_option("--max-elements", opts->max_elements, "Largest problem in the sweep");
  scan->add_option("--steps", opts->only_steps, "Only this shape: steps (with --batch, --channels)");
  scan->add_option("--batch", opts->only_batch, "Only this shape: batch");
  scan->add_option("--channels", opts->only_channels, "Only this shape: channels");
  auto quick = std::make_shared<bool>(false);
  scan->add_flag("--quick", *quick, "Small sweep (up to 2^24 elements)");
  scan->callback([common, opts, quick] {
    ScanBenchOptions o = *opts;
    if (*quick) o.max_elements = std::min<std::int64_t>(o.max_elements, 1 << 24);
    run_with_csv(*common, [&](const BenchSink& sink) { run_scan_bench(o, sink); });
  });

  auto rnn_opts = std::make_shared<CudnnRnnBenchOptions>();
  struct RnnNames {
    std::vector<std::string> cells{"relu", "gru", "lstm"}, dtypes{"f32"};
    bool verbose = false;
  };
  auto rnn_names = std::make_shared<RnnNames>();
  auto* cudnn = bench->add_subcommand(
      "cudnn-rnn", "cuDNN RNN baseline: standard / persist_static / persist_dynamic, fwd, fwd+bwd");
  cudnn->add_option("--cells", rnn_names->cells, "Cells, comma-separated: relu,tanh,gru,lstm")
      ->delimiter(',')
      ->capture_default_str();
  cudnn->add_option("--dtypes", rnn_names->dtypes, "Data types: f32,f16,bf16 (fp32 math)")
      ->delimiter(',')
      ->capture_default_str();
  cudnn->add_option("--hidden", rnn_opts->hidden, "Hidden sizes, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cudnn->add_option("--batch", rnn_opts->batch, "Batch sizes, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cudnn->add_option("--steps", rnn_opts->steps, "Sequence lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cudnn->add_option("--input-size", rnn_opts->input_size, "Input size (0: same as hidden)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cudnn->add_option("--repeats", rnn_opts->repeats, "Timed runs per measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cudnn->add_flag("--verbose", rnn_names->verbose, "Log why cuDNN rejects a combination");
  cudnn->callback([common, rnn_opts, rnn_names] {
    CudnnRnnBenchOptions o = *rnn_opts;
    o.cells.clear();
    for (const std::string& name : rnn_names->cells) o.cells.push_back(parse_cell(name));
    o.dtypes.clear();
    for (const std::string& name : rnn_names->dtypes) o.dtypes.push_back(parse_dtype(name));
    if (rnn_names->verbose) set_log_level(LogLevel::Info);
    run_with_csv(*common, [&](const BenchSink& sink) { run_cudnn_rnn_bench(o, sink); });
  });

  add_rnn_bench_suite(*bench, common, RnnBenchSuite::Rnn);
  add_rnn_bench_suite(*bench, common, RnnBenchSuite::Lstm);
  add_rnn_bench_suite(*bench, common, RnnBenchSuite::Gru);

  auto layer_opts = std::make_shared<LayersBenchOptions>();
  auto* layers = bench->add_subcommand(
      "layers", "GILR-LSTM / SRU / QRNN: PLR vs SLR (Figure 1), GILR-LSTM vs cuDNN LSTM (Table 2)");
  auto only = std::make_shared<std::string>();
  layers->add_option("--only", *only, "Run one part: figure1 or table2")
      ->check(CLI::IsMember({"figure1", "table2"}));
  layers->add_option("--hidden", layer_opts->hidden, "Hidden size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  layers->add_option("--max-rows", layer_opts->max_rows, "Largest T*B in Table 2")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  layers->add_option("--repeats", layer_opts->repeats, "Timed runs per measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto layer_dtype = std::make_shared<std::string>("f32");
  layers->add_option("--dtype", *layer_dtype, "Figure 1 tensors: f32, f16 or bf16 (fp32 math)")
      ->capture_default_str();
  auto layer_maths = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"fp32"});
  layers->add_option("--math", *layer_maths,
                     "GEMM maths of prnn's layers, each its own impl: fp32, tf32 (e.g. fp32,tf32)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "tf32"}))
      ->capture_default_str();
  layers->callback([common, layer_opts, only, layer_dtype, layer_maths] {
    LayersBenchOptions o = *layer_opts;
    if (*only == "figure1") o.table2 = false;
    if (*only == "table2") o.figure1 = false;
    o.dtype = parse_dtype(*layer_dtype);
    o.maths.clear();
    for (const std::string& m : *layer_maths) o.maths.push_back(parse_gemm_math(m));
    run_with_csv(*common, [&](const BenchSink& sink) { run_layers_bench(o, sink); });
  });

  auto graph_opts = std::make_shared<GraphBenchOptions>();
  auto graph_full = std::make_shared<bool>(false);
  auto* graph_cmd = bench->add_subcommand(
      "graph",
      "Dynamic-graph models (Tree-LSTM on SST, BiLSTM tagger on WikiNER, ...): training "
      "throughput per executor (CPU reference, autobatching)");
  graph_cmd
      ->add_option("--data", graph_opts->data, "Directory holding sst/ and wikiner/ (train.txt)")
      ->required();
  graph_cmd
      ->add_option("--models", graph_opts->models,
                   "Models, comma-separated: tree-lstm, bilstm-tagger, rvnn, td-rnn, td-lstm, "
                   "bilstm-char-tagger")
      ->delimiter(',')
      ->check(CLI::IsMember(
          std::vector<std::string>(std::begin(kGraphBenchModels), std::end(kGraphBenchModels))))
      ->capture_default_str();
  graph_cmd
      ->add_option("--hidden", graph_opts->hidden,
                   "Hidden sizes H (= embedding size), comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  graph_cmd->add_option("--batch", graph_opts->batch, "Sentences per mini-batch, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  graph_cmd
      ->add_option("--sentences", graph_opts->sentences, "Training sentences per measured pass")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  graph_cmd->add_option("--repeats", graph_opts->repeats, "Timed passes per measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  graph_cmd
      ->add_option("--impls", graph_opts->impls,
                   "Only these executors, comma-separated (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(
          std::vector<std::string>(std::begin(kGraphBenchImpls), std::end(kGraphBenchImpls))));
  graph_cmd->add_flag("--full", *graph_full,
                      "The whole grid: hidden 128,256,384,512 and batch 1,2,4,...,128 (unless "
                      "--hidden / --batch are given)");
  graph_cmd->callback([common, graph_opts, graph_full, graph_cmd] {
    GraphBenchOptions o = *graph_opts;
    if (*graph_full && graph_cmd->count("--hidden") == 0) o.hidden = {128, 256, 384, 512};
    if (*graph_full && graph_cmd->count("--batch") == 0) o.batch = {1, 2, 4, 8, 16, 32, 64, 128};
    run_with_csv(*common, [&](const BenchSink& sink) { run_graph_bench(o, sink); });
  });
}

}  // namespace prnn::cli
