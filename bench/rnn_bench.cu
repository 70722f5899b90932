// `prnn bench rnn|lstm|gru`: prnn's persistent RNN, prnn's GEMM-per-step RNN and cuDNN's three
// algorithms side by side, one layer, unidirectional, on the same cases in the same run. One
// harness for every cell: the suite (rnn: vanilla ReLU, lstm, gru) picks the cases (cases_of) and
// names the suite column; everything else is shared.
//   fwd_us_per_step     training-mode forward of T steps / T
//   fwdbwd_us_per_step  forward + backward data + backward weights of T steps / T
//                       (cuDNN: CudnnRnn::forward() + backward(), the same three passes)
//   fwd_tflops          2·T·B·G·H·(I+H) / forward time
//   us_per_sync         (impl cuda-grid_sync) one cooperative grid barrier, see grid_sync.cu
// Maths:   f32 cases run once per RnnBenchOptions::maths: prnn's GEMMs over all timesteps in
//          fp32 or TF32 (RnnDesc::gemm_math), cuDNN with CUDNN_FMA_MATH or its default math
//          (which takes TF32 for fp32 data); the TF32 rows' impl ends in "-tf32".
// Data:    x [T, B, I], y / dy [T, B, H], h0 / hn / dhn / dh0 (LSTM: c too) [1, B, H], params and
//          dparams [rnn_param_count(desc)] in dtype = desc.weight_dtype; x, h0, c0, dy, dhn, dcn
//          uniform in [-1, 1), params in [-1/sqrt(H), 1/sqrt(H)) (never zeros). Every buffer is
//          allocated and filled once per case, before anything is timed.
// Streams: prnn runs and is timed on one created non-blocking stream; cuDNN on the legacy default
//          stream (bench/cudnn_rnn.h). Each time is the median of `repeats` event-timed runs on
//          the stream the work runs on, after warm-up.
// Failure: an implementation that throws Unsupported (or, for cuDNN, InvalidArgument: a cell or
//          dtype it lacks) gives one status row (value 0, unit not_supported); any other prnn
//          error gives one status row with unit error; the reason is logged and the run goes on.
//          The forward rows are written as soon as they are measured, so a status row after them
//          means the backward failed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_fill.cuh"
#include "bench/bench_timer.h"
#include "bench/cudnn_rnn.h"
#include "bench/grid_sync.h"
#include "core/cuda_check.h"
#include "prnn/bench.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/log.h"
#include "prnn/rnn.h"
#include "prnn/tensor.h"

namespace prnn {
namespace {

constexpr int kDeviceIndex = 0;
constexpr int kWarmupRuns = 3;  // the first prnn call also captures its CUDA graph
constexpr int kFillBlocks = 1024;
constexpr int kFillThreads = 256;

// The rnn suite: relu f32 at the paper's sizes, the cases every sweep but Custom draws from.
constexpr std::int64_t kPaperHidden = 1152;
constexpr std::int64_t kLargeHidden = 2048;
constexpr std::int64_t kPaperBatch = 4;
constexpr std::int64_t kPaperSteps = 256;
constexpr std::int64_t kTargetsMaxBatch = 16;
constexpr std::int64_t kFigure3Batches[] = {1, 2, 4, 8, 16, 32, 64};
constexpr std::int64_t kFigure4Steps[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

// The lstm and gru suites: the (H, B) of the GRU/LSTM issue's target rows (T = 256, I = H, as in
// the cuDNN and PyTorch anchors), each run in every dtype; H = 2560 is the on-chip capacity target.
struct HiddenBatch {
  std::int64_t hidden, batch;
};
constexpr HiddenBatch kLstmTargets[] = {{1152, 4}, {2048, 4}, {2560, 4}, {1024, 4}, {1024, 16}};
constexpr HiddenBatch kGruTargets[] = {{1152, 4}};
constexpr std::int64_t kCellFigure3Hidden[] = {1024, 1152};
constexpr DType kCellDefaultDTypes[] = {DType::F32, DType::BF16, DType::F16};

const char* suite_name(RnnBenchSuite s) {
  switch (s) {
    case RnnBenchSuite::Rnn:
      return "rnn";
    case RnnBenchSuite::Lstm:
      return "lstm";
    case RnnBenchSuite::Gru:
      return "gru";
  }
  throw InternalError("suite_name: unknown RnnBenchSuite");
}

struct RnnCase {
  Cell cell = Cell::ReLU;
  DType dtype = DType::F32;
  std::int64_t hidden = 0, batch = 0, steps = 0;
  bool operator==(const RnnCase&) const = default;
};

// The cases of every requested sweep, in order; a case already listed is not repeated.
std::vector<RnnCase> cases_of(const RnnBenchOptions& o) {
  std::vector<RnnCase> cases;
  auto add = [&](const RnnCase& c) {
    if (std::find(cases.begin(), cases.end(), c) == cases.end()) cases.push_back(c);
  };
  if (o.suite == RnnBenchSuite::Rnn) {
    auto relu = [](std::int64_t H, std::int64_t B, std::int64_t T) {
      return RnnCase{Cell::ReLU, DType::F32, H, B, T};
    };
    const std::vector<DType> dtypes =
        o.dtypes.empty() ? std::vector<DType>{DType::F32} : o.dtypes;
    for (RnnBenchSweep sweep : o.sweeps) {
      switch (sweep) {
        case RnnBenchSweep::Targets:
          add(relu(kPaperHidden, kPaperBatch, kPaperSteps));
          add(relu(kLargeHidden, kPaperBatch, kPaperSteps));
          for (std::int64_t B = 1; B <= kTargetsMaxBatch; ++B)
            add(relu(kPaperHidden, B, kPaperSteps));
          break;
        case RnnBenchSweep::Figure3:
          for (std::int64_t B : kFigure3Batches) add(relu(kPaperHidden, B, kPaperSteps));
          break;
        case RnnBenchSweep::Figure4:
          for (std::int64_t T : kFigure4Steps) add(relu(kPaperHidden, kPaperBatch, T));
          break;
        case RnnBenchSweep::Custom:
          for (Cell cell : o.cells)
            for (DType dtype : dtypes)
              for (std::int64_t H : o.hidden)
                for (std::int64_t B : o.batch)
                  for (std::int64_t T : o.steps) add({cell, dtype, H, B, T});
          break;
      }
    }
    return cases;
  }

  const bool lstm = o.suite == RnnBenchSuite::Lstm;
  const Cell cell = lstm ? Cell::LSTM : Cell::GRU;
  const std::vector<DType> dtypes =
      o.dtypes.empty() ? std::vector<DType>(std::begin(kCellDefaultDTypes),
                                            std::end(kCellDefaultDTypes))
                       : o.dtypes;
  std::vector<HiddenBatch> targets;
  if (lstm)
    targets.assign(std::begin(kLstmTargets), std::end(kLstmTargets));
  else
    targets.assign(std::begin(kGruTargets), std::end(kGruTargets));
  for (RnnBenchSweep sweep : o.sweeps) {
    for (DType dtype : dtypes) {
      switch (sweep) {
        case RnnBenchSweep::Targets:
          for (const HiddenBatch& t : targets)
            add({cell, dtype, t.hidden, t.batch, kPaperSteps});
          break;
        case RnnBenchSweep::Figure3:
          for (std::int64_t H : kCellFigure3Hidden)
            for (std::int64_t B : kFigure3Batches) add({cell, dtype, H, B, kPaperSteps});
          break;
        case RnnBenchSweep::Figure4:
          for (std::int64_t T : kFigure4Steps) add({cell, dtype, kPaperHidden, kPaperBatch, T});
          break;
        case RnnBenchSweep::Custom:
          for (std::int64_t H : o.hidden)
            for (std::int64_t B : o.batch)
              for (std::int64_t T : o.steps) add({cell, dtype, H, B, T});
          break;
      }
    }
  }
  return cases;
}

void check_positive_list(const std::vector<std::int64_t>& values, const std::string& what) {
  for (std::int64_t v : values)
    if (v <= 0) throw InvalidArgument(what + ": expected > 0, got " + std::to_string(v));
}

void validate(const RnnBenchOptions& o) {
  const std::string bench = std::string(suite_name(o.suite)) + " bench";
  if (o.repeats <= 0)
    throw InvalidArgument(bench + " repeats: expected > 0, got " + std::to_string(o.repeats));
  if (o.input_size < 0)
    throw InvalidArgument(bench + " input size: expected >= 0 (0: same as hidden), got " +
                          std::to_string(o.input_size));
  check_positive_list(o.hidden, bench + " hidden size");
  check_positive_list(o.batch, bench + " batch");
  check_positive_list(o.steps, bench + " steps");
  if (o.maths.empty())
    throw InvalidArgument(bench + " maths: expected fp32, tf32 or both, got none");
  for (const std::string& name : o.impls) {
    if (std::find_if(std::begin(kRnnBenchImpls), std::end(kRnnBenchImpls), [&](const char* known) {
          return name == known;
        }) == std::end(kRnnBenchImpls)) {
      std::string known;
      for (const char* k : kRnnBenchImpls) known += std::string(known.empty() ? "" : ", ") + k;
      throw InvalidArgument(bench + " impl: expected one of " + known + ", got '" + name + "'");
    }
  }
}

// A created non-blocking stream, destroyed with the object.
class OwnedStream {
 public:
  OwnedStream() { PRNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~OwnedStream() { PRNN_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_)); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

template <class T>
void fill_typed(void* data, std::int64_t n, float lo, float hi, std::uint64_t seed,
                cudaStream_t stream) {
  bench::fill_uniform_kernel<T>
      <<<kFillBlocks, kFillThreads, 0, stream>>>(static_cast<T*>(data), n, lo, hi, seed);
  PRNN_CHECK_LAUNCH();
}

void fill_uniform(const TensorView& t, float lo, float hi, std::uint64_t seed,
                  cudaStream_t stream) {
  switch (t.dtype()) {
    case DType::F64:
      return fill_typed<double>(t.data(), t.numel(), lo, hi, seed, stream);
    case DType::F32:
      return fill_typed<float>(t.data(), t.numel(), lo, hi, seed, stream);
    case DType::F16:
      return fill_typed<__half>(t.data(), t.numel(), lo, hi, seed, stream);
    case DType::BF16:
      return fill_typed<__nv_bfloat16>(t.data(), t.numel(), lo, hi, seed, stream);
  }
}

// Every tensor of one prnn training step, on the GPU. The cell-state tensors are empty views
// unless the cell is LSTM.
class PrnnTensors {
 public:
  PrnnTensors(const RnnDesc& d, std::int64_t T, std::int64_t B, cudaStream_t stream) {
    const std::int64_t I = d.input_size, H = d.hidden_size, np = rnn_param_count(d);
    const bool lstm = has_cell_state(d.cell);
    const Shape seq_in{T, B, I}, seq_out{T, B, H}, state{1, B, H}, flat{np};
    const float w = 1.0f / std::sqrt(static_cast<float>(H));
    x = random(d.weight_dtype, seq_in, -1.0f, 1.0f, 1, stream);
    params = random(d.weight_dtype, flat, -w, w, 2, stream);
    h0 = random(d.weight_dtype, state, -1.0f, 1.0f, 3, stream);
    dy = random(d.weight_dtype, seq_out, -1.0f, 1.0f, 4, stream);
    dhn = random(d.weight_dtype, state, -1.0f, 1.0f, 5, stream);
    y = make(d.weight_dtype, seq_out);
    hn = make(d.weight_dtype, state);
    dx = make(d.weight_dtype, seq_in);
    dh0 = make(d.weight_dtype, state);
    dparams = make(d.weight_dtype, flat);
    if (lstm) {
      c0 = random(d.weight_dtype, state, -1.0f, 1.0f, 6, stream);
      dcn = random(d.weight_dtype, state, -1.0f, 1.0f, 7, stream);
      cn = make(d.weight_dtype, state);
      dc0 = make(d.weight_dtype, state);
    }
    PRNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  TensorView x, params, h0, c0, y, hn, cn;         // forward
  TensorView dy, dhn, dcn, dx, dh0, dc0, dparams;  // backward

 private:
  TensorView make(DType dtype, const Shape& shape) {
    buffers_.emplace_back(static_cast<std::size_t>(shape.numel()) * size_of(dtype));
    return buffers_.back().view(dtype, shape);
  }
  TensorView random(DType dtype, const Shape& shape, float lo, float hi, std::uint64_t seed,
                    cudaStream_t stream) {
    const TensorView t = make(dtype, shape);
    fill_uniform(t, lo, hi, seed, stream);
    return t;
  }

  std::vector<DeviceBuffer> buffers_;
};

// The rows of one (case, impl). Times go out as soon as they are measured; a failure adds one
// status row.
class ImplRows {
 public:
  ImplRows(const BenchSink& sink, const char* suite, std::string case_name, std::string impl,
           std::int64_t steps, double forward_flops_per_step, int repeats)
      : sink_(sink),
        suite_(suite),
        case_(std::move(case_name)),
        impl_(std::move(impl)),
        steps_(static_cast<double>(steps)),
        flops_per_step_(forward_flops_per_step),
        repeats_(repeats) {}

  const std::string& impl() const { return impl_; }

  // Wall time of building the implementation (prnn: the Rnn's constructor, which allocates,
  // plans and for the persistent algorithm times where its exchange sits).
  void setup(double ms) const { row("setup_ms", ms, "ms"); }

  void time_forward(const std::function<void()>& run, cudaStream_t stream) const {
    const double us = bench::median_us(run, repeats_, kWarmupRuns, stream);
    row("fwd_us_per_step", us / steps_, "us");
    row("fwd_tflops", flops_per_step_ * steps_ / (us * 1e6), "TFLOP/s");
  }
  void time_forward_backward(const std::function<void()>& run, cudaStream_t stream) const {
    const double us = bench::median_us(run, repeats_, kWarmupRuns, stream);
    row("fwdbwd_us_per_step", us / steps_, "us");
  }

  // Runs `body` (which builds the implementation and calls the time_* functions); turns what it
  // throws into a status row. `invalid_means_unsupported`: an InvalidArgument means the
  // implementation cannot take the case (cuDNN's answer for a cell or dtype it lacks).
  void guarded(bool invalid_means_unsupported, const std::function<void()>& body) const {
    try {
      body();
    } catch (const Unsupported& e) {
      not_supported(e.what());
    } catch (const InvalidArgument& e) {
      if (invalid_means_unsupported)
        not_supported(e.what());
      else
        failed(e.what());
    } catch (const Error& e) {
      failed(e.what());
    }
  }

 private:
  void row(const char* metric, double value, const char* unit) const {
    sink_({suite_, case_, impl_, metric, value, unit});
  }
  void not_supported(const std::string& why) const {
    log(LogLevel::Info, std::string(suite_) + " " + case_ + " " + impl_ + ": " + why);
    row("status", 0.0, "not_supported");
  }
  void failed(const std::string& why) const {
    log(LogLevel::Warn, std::string(suite_) + " " + case_ + " " + impl_ + " failed: " + why);
    row("status", 0.0, "error");
  }

  const BenchSink& sink_;
  const char* suite_;
  std::string case_, impl_;
  double steps_, flops_per_step_;
  int repeats_;
};

void time_prnn(const ImplRows& rows, const RnnDesc& desc, const RnnCase& c, RnnAlgo algo,
               std::optional<PrnnTensors>& tensors, cudaStream_t stream) {
  rows.guarded(false, [&] {
    const auto start = std::chrono::steady_clock::now();
    Rnn rnn(desc, c.steps, c.batch, Device::cuda(kDeviceIndex), algo);
    PRNN_CUDA_CHECK(cudaDeviceSynchronize());
    rows.setup(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                   .count());
    if (!tensors) tensors.emplace(desc, c.steps, c.batch, stream);
    const PrnnTensors& t = *tensors;
    auto forward = [&] { rnn.forward(t.x, t.params, t.h0, t.c0, t.y, t.hn, t.cn, stream); };
    rows.time_forward(forward, stream);
    rows.time_forward_backward(
        [&] {
          forward();
          rnn.backward_data(t.params, t.dy, t.dhn, t.dcn, t.dx, t.dh0, t.dc0, stream);
          rnn.backward_weights(t.x, t.h0, t.c0, t.dparams, stream);
        },
        stream);
  });
}

void time_cudnn(const ImplRows& rows, bench::CudnnContext& context,
                const bench::CudnnRnnShape& shape, bench::CudnnRnnAlgo algo) {
  constexpr cudaStream_t kLegacyStream = nullptr;  // where CudnnRnn runs
  rows.guarded(true, [&] {
    bench::CudnnRnn rnn(context, shape, algo);
    rows.time_forward([&] { rnn.forward(); }, kLegacyStream);
    rows.time_forward_backward(
        [&] {
          rnn.forward();
          rnn.backward();
        },
        kLegacyStream);
  });
}

void time_grid_sync_floor(const BenchSink& sink, const char* suite, int repeats,
                          cudaStream_t stream) {
  const std::string c = "ctas=" + std::to_string(bench::grid_sync_ctas(kDeviceIndex)) +
                        ";threads=" + std::to_string(bench::kGridSyncThreads);
  const ImplRows rows(sink, suite, c, "cuda-grid_sync", 1, 0.0, repeats);
  rows.guarded(false, [&] {
    const bench::GridSyncResult r =
        bench::time_grid_sync(kDeviceIndex, bench::kGridSyncCount, repeats, stream);
    sink({suite, c, rows.impl(), "us_per_sync", r.us_per_sync, "us"});
  });
}

}  // namespace

void run_rnn_bench(const RnnBenchOptions& o, const BenchSink& sink) {
  validate(o);
  const char* suite = suite_name(o.suite);
  if (device_count() == 0)
    throw Unsupported(std::string("prnn bench ") + suite, "no GPU: " + no_device_reason());
  auto wanted = [&](const std::string& impl) {
    return o.impls.empty() || std::find(o.impls.begin(), o.impls.end(), impl) != o.impls.end();
  };
  const bool any_cudnn = std::any_of(
      std::begin(bench::kCudnnRnnAlgos), std::end(bench::kCudnnRnnAlgos),
      [&](bench::CudnnRnnAlgo a) { return wanted(std::string("cudnn-") + bench::to_string(a)); });
  std::optional<bench::CudnnContext> cudnn;
  if (any_cudnn) {
    log(LogLevel::Info,
        std::string(suite) + ": cuDNN version " + std::to_string(bench::CudnnContext::version()));
    cudnn.emplace();
  }
  const OwnedStream stream;

  if (o.grid_sync_floor) time_grid_sync_floor(sink, suite, o.repeats, stream.get());

  for (const RnnCase& c : cases_of(o)) {
    const std::int64_t I = o.input_size > 0 ? o.input_size : c.hidden;
    std::string name = std::string("cell=") + to_string(c.cell) + ";dtype=" + to_string(c.dtype) +
                       ";H=" + std::to_string(c.hidden) + ";B=" + std::to_string(c.batch) +
                       ";T=" + std::to_string(c.steps);
    if (I != c.hidden) name += ";I=" + std::to_string(I);

    RnnDesc desc;
    desc.cell = c.cell;
    desc.input_size = I;
    desc.hidden_size = c.hidden;
    desc.weight_dtype = c.dtype;
    // Forward flops of one step, both GEMMs: 2·B·G·H·(I+H).
    const double flops_per_step = 2.0 * static_cast<double>(c.batch) *
                                  static_cast<double>(desc.gate_rows()) *
                                  static_cast<double>(I + c.hidden);
    auto rows_for = [&](const std::string& impl) {
      return ImplRows(sink, suite, name, impl, c.steps, flops_per_step, o.repeats);
    };
    // f32: once per math (TF32 rows as "<impl>-tf32"); 16-bit: once, with its fixed maths.
    const std::vector<GemmMath> maths =
        c.dtype == DType::F32 ? o.maths : std::vector<GemmMath>{GemmMath::Tf32};
    for (GemmMath math : maths) {
      const std::string suffix = c.dtype == DType::F32 && math == GemmMath::Tf32 ? "-tf32" : "";
      desc.gemm_math = math;               // 16-bit layers take TF32 GEMMs whatever it says
      std::optional<PrnnTensors> tensors;  // shared by the prnn algorithms of this case
      for (RnnAlgo algo : {RnnAlgo::Persistent, RnnAlgo::GemmPerStep}) {
        const std::string impl = std::string("prnn-") + to_string(algo);
        if (wanted(impl)) time_prnn(rows_for(impl + suffix), desc, c, algo, tensors, stream.get());
      }
      tensors.reset();

      bench::CudnnRnnShape shape{c.cell, c.dtype, I, c.hidden, c.batch, c.steps};
      shape.math = math;
      for (bench::CudnnRnnAlgo algo : bench::kCudnnRnnAlgos) {
        const std::string impl = std::string("cudnn-") + bench::to_string(algo);
        if (wanted(impl)) time_cudnn(rows_for(impl + suffix), *cudnn, shape, algo);
      }
    }
  }
}

}  // namespace prnn
