// Benchmark drivers behind `prnn bench ...`. Each writes tidy CSV rows
//   suite,case,impl,metric,value,unit
// (case = key=value pairs joined by ';'), timing with CUDA events, medians of repeated runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

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

}  // namespace prnn
