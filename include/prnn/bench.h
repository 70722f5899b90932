// Benchmark drivers behind `prnn bench ...`. Each writes tidy CSV rows
//   suite,case,impl,metric,value,unit
// (case = key=value pairs joined by ';'), timing with CUDA events, medians of repeated runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prnn/dtype.h"
#include "prnn/rnn.h"

namespace prnn {

struct BenchRow {
  std::string suite, case_, impl, metric;
  double value = 0.0;
  std::string unit;
};
using BenchSink = std::function<void(const BenchRow&)>;

struct ScanBenchOptions {
  bool table1 = true;      // PLR vs SLR vs CUB scan-by-key, batch 1 (the paper's Table 1)
  bool sweep = true;       // G elements/s over a T × C grid up to max_elements, fwd and bwd
  bool tiny = true;        // 2^16-element problems: one launch, latency
  std::int64_t max_elements = std::int64_t{1} << 28;
  int repeats = 20;        // timed runs per measurement (median reported)
  // When steps > 0: only the sweep, at this one shape (for profiling a single kernel).
  std::int64_t only_steps = 0, only_batch = 1, only_channels = 1;
};

// Requires a GPU; throws Unsupported without one.
void run_scan_bench(const ScanBenchOptions& options, const BenchSink& sink);

// cuDNN's RNN (one layer, unidirectional) over cells × dtypes × hidden × batch × steps, each with
// the standard, persist_static and persist_dynamic algorithms (impl cudnn-<algo>, suite rnn):
// fwd_us_per_step, fwdbwd_us_per_step, fwd_tflops; a combination cuDNN does not support gives one
// row with metric status, value 0, unit not_supported.
struct CudnnRnnBenchOptions {
  std::vector<Cell> cells{Cell::ReLU, Cell::GRU, Cell::LSTM};  // any of relu, tanh, gru, lstm
  std::vector<DType> dtypes{DType::F32};  // f32; f16/bf16 data always with fp32 math
  std::vector<std::int64_t> hidden{1152};
  std::vector<std::int64_t> batch{4};
  std::vector<std::int64_t> steps{256};
  std::int64_t input_size = 0;  // 0: same as hidden
  int repeats = 10;             // timed runs per measurement (median reported)
};

// Requires a GPU; throws Unsupported without one.
void run_cudnn_rnn_bench(const CudnnRnnBenchOptions& options, const BenchSink& sink);

// `prnn bench rnn`, `prnn bench lstm`, `prnn bench gru` (suites rnn, lstm, gru): one layer,
// unidirectional, input size = hidden unless set; per case (cell, dtype, H, B, T) every
// implementation of kRnnBenchImpls side by side in one run:
//   fwd_us_per_step     training-mode forward of T steps / T
//   fwdbwd_us_per_step  forward + backward data + backward weights of T steps / T
//   fwd_tflops          2·T·B·G·H·(I+H) / forward time
//   setup_ms            (prnn only) wall time of constructing the Rnn for the case, in ms
// f32 cases run once per RnnBenchOptions::maths (impl suffix "-tf32" for TF32; see there).
// An implementation that cannot run a case gives one row metric status, value 0, unit
// not_supported (it said Unsupported) or error (it failed); the run goes on.
// Unless grid_sync_floor is off, the run starts with the cost of one cooperative grid-wide barrier
// (one CTA per SM, 256 threads): case ctas=<n>;threads=256, impl cuda-grid_sync, metric
// us_per_sync, the floor under any persistent kernel that syncs the grid every step.
inline constexpr const char* kRnnBenchImpls[] = {"prnn-persistent", "prnn-gemm_per_step",
                                                 "cudnn-standard", "cudnn-persist_static",
                                                 "cudnn-persist_dynamic"};

// Which cell the sweeps are about; also the suite column of every row.
enum class RnnBenchSuite : std::uint8_t {
  Rnn,   // suite rnn: vanilla ReLU f32 (the persistent RNN issue and the paper's figures)
  Lstm,  // suite lstm: LSTM in every dtype of RnnBenchOptions::dtypes
  Gru,   // suite gru: GRU in every dtype of RnnBenchOptions::dtypes
};

// The cases of a sweep, per suite (T = 256 unless the sweep varies T):
//   rnn:       relu f32 only; Custom takes cells × dtypes × hidden × batch × steps.
//   lstm, gru: every listed case in every dtype of `dtypes`; Custom takes dtypes × hidden × batch
//              × steps of the suite's cell.
enum class RnnBenchSweep : std::uint8_t {
  Targets,  // rnn:  H=1152 B=4; H=2048 B=4; H=1152 B=1..16
            // lstm: H=1152 B=4; H=2048 B=4; H=2560 B=4; H=1024 B=4; H=1024 B=16
            // gru:  H=1152 B=4
  Figure3,  // rnn: H=1152; lstm, gru: H in {1024, 1152}; B in {1,2,4,...,64} (µs/step vs batch)
  Figure4,  // H=1152 B=4, T in {1,2,4,...,1024} (µs/step against sequence length)
  Custom,   // every combination of the lists below
};

struct RnnBenchOptions {
  RnnBenchSuite suite = RnnBenchSuite::Rnn;
  std::vector<RnnBenchSweep> sweeps{RnnBenchSweep::Targets};  // a case in two sweeps runs once
  std::vector<Cell> cells{Cell::ReLU};                        // rnn suite, Custom only
  // prnn gets weight_dtype = dtype. rnn suite: Custom only, empty = {f32}. lstm, gru: every
  // sweep, empty = {f32, bf16, f16} (f16: cuDNN's persistent algorithms take 16-bit data as f16
  // with fp32 math, the 16-bit cuDNN anchors).
  std::vector<DType> dtypes;
  std::vector<std::int64_t> hidden{1152};  // Custom only
  std::vector<std::int64_t> batch{4};      // Custom only
  std::vector<std::int64_t> steps{256};    // Custom only
  std::int64_t input_size = 0;             // 0: same as hidden
  int repeats = 10;                        // timed runs per measurement (median reported)
  std::vector<std::string> impls;          // names from kRnnBenchImpls; empty: all of them
  // f32 cases run once per math: prnn with RnnDesc::gemm_math = math, cuDNN with CUDNN_FMA_MATH
  // (Fp32: no TF32 anywhere) or its default math (Tf32: cuDNN takes TF32 tensor cores for fp32
  // data on Ampere and later); the Tf32 rows' impl is "<impl>-tf32". 16-bit cases run once
  // (prnn's GEMMs are TF32 and cuDNN's math is tensor-op math either way).
  std::vector<GemmMath> maths{GemmMath::Fp32, GemmMath::Tf32};
  bool grid_sync_floor = true;
};

// Requires a GPU; throws Unsupported without one, InvalidArgument for bad options.
void run_rnn_bench(const RnnBenchOptions& options, const BenchSink& sink);

struct LayersBenchOptions {
  // The paper's Figure 1: training step (forward + backward) of GILR-LSTM, SRU, QRNN(2), QRNN(10)
  // with the parallel and the serial scan inside, T·B = 65536, input = hidden.
  bool figure1 = true;
  // The paper's Table 2: GILR-LSTM vs cuDNN LSTM training throughput (T·B / step time), input 32.
  bool table2 = true;
  std::int64_t hidden = 256;
  std::int64_t max_rows = std::int64_t{1} << 22;  // largest T·B run (memory)
  int repeats = 5;
  // The layers' tensors in Figure 1 (f32, f16 or bf16; fp32 math); Table 2 runs f32 like cuDNN.
  DType dtype = DType::F32;
  // The GEMM maths to run prnn's layers in, each its own impl (Tf32: "<impl>-tf32").
  std::vector<GemmMath> maths{GemmMath::Fp32};
};

// Requires a GPU; throws Unsupported without one.
void run_layers_bench(const LayersBenchOptions& options, const BenchSink& sink);

// `prnn bench graph` (suite graph): training throughput of the dynamic-graph models of
// prnn/models.h per executor, timed with std::chrono (the CPU executors need no GPU). A measurement is
// one epoch over the first `sentences` training sentences (SST trees or WikiNER sentences, the
// vocabulary is theirs), Adam, seed 1, no dev pass; the model is built afresh for every pass, so
// every pass computes the same losses. Per case model=<m>;hidden=<H>;batch=<B> (E = H; the taggers'
// MLP keeps its default) and executor, medians over `repeats` passes of:
//   sentences_per_s    sentences / epoch time                                  sentences/s
//   words_per_s        tokens / epoch time (taggers only)                      words/s
//   host_us_per_node   (graph building + autobatch planning) / graph nodes    us
//   exec_us_per_batch  executor forward + backward + update per mini-batch,   us
//                      planning excluded
//   batches_per_graph  autobatches run by forward per mini-batch graph        batches
//   nodes_per_batch    graph nodes per autobatch                              nodes
//   train_loss         mean loss per loss term of the pass, the same for every nats
//                      executor up to summation order (a check, not a timing)
//   gpu_us_per_batch   device time of forward + backward per mini-batch,       us
//                      CUDA events (GPU executors only; graph::DeviceTimes)
//   build_us_per_batch host time forward + backward spend deciding what to    us
//                      issue (layout, launch tables, checks) before issuing it
//                      (GPU executors only; graph::DeviceTimes)
//   issue_us_per_batch host time forward + backward spend in the CUDA/cuBLAS   us
//                      calls that issue it; near gpu_us_per_batch, the GPU
//                      waits on the host (GPU executors only)
//   launches_per_graph GPU operations (kernels, cuBLAS calls, memsets, copies) launches
//                      of forward + backward per mini-batch graph (GPU executors
//                      only; graph::DeviceTimes; the trainer's update not counted)
// batches_per_graph and nodes_per_batch only for the autobatch executors. The prnn-*gpu* impls
// need a GPU; with `impls` empty they run only when one is present.
inline constexpr const char* kGraphBenchModels[] = {
    "tree-lstm", "bilstm-tagger", "rvnn", "td-rnn", "td-lstm", "bilstm-char-tagger"};
// The autobatching impls fuse elementwise batches (graph::Fusion::Elementwise); the "-unfused"
// ones run every batch on its own (graph::Fusion::None), for comparison.
inline constexpr const char* kGraphBenchImpls[] = {"prnn-cpu",
                                                   "prnn-autobatch-cpu-depth",
                                                   "prnn-autobatch-cpu-agenda",
                                                   "prnn-gpu",
                                                   "prnn-autobatch-gpu-depth",
                                                   "prnn-autobatch-gpu-agenda",
                                                   "prnn-autobatch-gpu-depth-unfused",
                                                   "prnn-autobatch-gpu-agenda-unfused"};

struct GraphBenchOptions {
  std::vector<std::string> models{"tree-lstm", "bilstm-tagger"};  // from kGraphBenchModels
  std::vector<std::int64_t> hidden{128};
  std::vector<std::int64_t> batch{1, 16, 64};
  std::int64_t sentences = 256;    // training sentences per measured pass
  int repeats = 3;                 // timed passes per measurement (median reported)
  std::vector<std::string> impls;  // names from kGraphBenchImpls; empty: all of them
  std::string data;                // directory holding sst/train.txt and wikiner/train.txt
  std::string sst_file;            // overrides <data>/sst/train.txt when set
  std::string wikiner_file;        // overrides <data>/wikiner/train.txt when set
};

// Throws InvalidArgument for bad options or unreadable data.
void run_graph_bench(const GraphBenchOptions& options, const BenchSink& sink);

}  // namespace prnn
