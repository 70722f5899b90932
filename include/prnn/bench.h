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

struct LayersBenchOptions {
  // The paper's Figure 1: training step (forward + backward) of GILR-LSTM, SRU, QRNN(2), QRNN(10)
  // with the parallel and the serial scan inside, T·B = 65536, input = hidden.
  bool figure1 = true;
  // The paper's Table 2: GILR-LSTM vs cuDNN LSTM training throughput (T·B / step time), input 32.
  bool table2 = true;
  std::int64_t hidden = 256;
  std::int64_t max_rows = std::int64_t{1} << 22;  // largest T·B run (memory)
  int repeats = 5;
};

// Requires a GPU; throws Unsupported without one.
void run_layers_bench(const LayersBenchOptions& options, const BenchSink& sink);

}  // namespace prnn
