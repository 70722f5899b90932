// `prnn bench scan`: the linear recurrence on the GPU.
//   table1: PLR vs SLR vs CUB InclusiveScanByKey, B = 1, T × C (the paper's Table 1)
//   sweep:  forward / backward G elements/s and % of measured copy bandwidth over T × C
//           (fwd f32 moves 12 B/elem, bwd f32 20 B/elem, fwd bf16 6 B/elem)
//   tiny:   2^16-element problems, µs per call (one launch): fwd_us times one call alone (the
//           host's launch latency included), fwd_us_stream 20 back-to-back calls on a stream
//           (each call's launch overlaps the previous call's kernel), fwd_us_graph 20 calls
//           replayed from a CUDA graph
// Every time is the median of `repeats` event-timed runs after warm-up.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/bench_fill.cuh"
#include "bench/bench_timer.h"
#include "bench/cub_scan.h"
#include "core/cuda_check.h"
#include "prnn/bench.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/scan.h"

namespace prnn {
namespace {

struct Tensors {
  DType dtype;
  std::int64_t n;
  DeviceBuffer a, x, h, dh, da, dx;
};

template <class T>
void fill(DeviceBuffer& b, std::int64_t n, float lo, float hi, std::uint64_t seed) {
  bench::fill_uniform_kernel<T><<<1024, 256>>>(b.data_as<T>(), n, lo, hi, seed);
  PRNN_CHECK_LAUNCH();
}

void fill_any(DeviceBuffer& b, DType t, std::int64_t n, float lo, float hi, std::uint64_t seed) {
  switch (t) {
    case DType::F32: return fill<float>(b, n, lo, hi, seed);
    case DType::F16: return fill<__half>(b, n, lo, hi, seed);
    case DType::BF16: return fill<__nv_bfloat16>(b, n, lo, hi, seed);
    case DType::F64: break;
  }
  throw Unsupported("scan bench", "f64");
}

Tensors make_tensors(DType t, std::int64_t n, bool backward) {
  const auto bytes = static_cast<std::size_t>(n) * size_of(t);
  Tensors s{t, n, DeviceBuffer(bytes), DeviceBuffer(bytes), DeviceBuffer(bytes), {}, {}, {}};
  fill_any(s.a, t, n, 0.5f, 1.0f, 1);
  fill_any(s.x, t, n, -1.0f, 1.0f, 2);
  if (backward) {
    s.dh = DeviceBuffer(bytes);
    s.da = DeviceBuffer(bytes);
    s.dx = DeviceBuffer(bytes);
    fill_any(s.dh, t, n, -1.0f, 1.0f, 3);
    fill_any(s.h, t, n, -1.0f, 1.0f, 4);
  }
  return s;
}

std::string shape_case(DType t, std::int64_t T, std::int64_t B, std::int64_t C) {
  return std::string("dtype=") + to_string(t) + ";T=" + std::to_string(T) +
         ";B=" + std::to_string(B) + ";C=" + std::to_string(C);
}

double time_scan(LinearScan& scan, Tensors& s, bool backward, int repeats) {
  const ScanDesc& d = scan.desc();
  const Shape seq = d.sequence_shape();
  const Device dev = d.device;
  if (!backward) {
    ScanForwardArgs f;
    f.a = TensorView(s.a.data(), d.dtype, seq, dev);
    f.x = TensorView(s.x.data(), d.dtype, seq, dev);
    f.h = TensorView(s.h.data(), d.dtype, seq, dev);
    const double us = bench::median_us([&] { scan.forward(f); }, repeats);
    scan.check();
    return us;
  }
  ScanBackwardArgs bw;
  bw.a = TensorView(s.a.data(), d.dtype, seq, dev);
  bw.h = TensorView(s.h.data(), d.dtype, seq, dev);
  bw.dh = TensorView(s.dh.data(), d.dtype, seq, dev);
  bw.da = TensorView(s.da.data(), d.dtype, seq, dev);
  bw.dx = TensorView(s.dx.data(), d.dtype, seq, dev);
  const double us = bench::median_us([&] { scan.backward(bw); }, repeats);
  scan.check();
  return us;
}

double copy_bandwidth_gbps(int repeats) {
  const std::size_t bytes = std::size_t{1} << 31;
  DeviceBuffer src(bytes), dst(bytes);
  src.fill_bytes(1);
  const double us = bench::median_us(
      [&] { PRNN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice)); },
      repeats);
  return 2.0 * double(bytes) / (us * 1e3);  // read + write, GB/s
}

}  // namespace

void run_scan_bench(const ScanBenchOptions& o, const BenchSink& sink) {
  if (device_count() == 0) throw Unsupported("prnn bench scan", "no GPU: " + no_device_reason());
  auto row = [&](const std::string& c, const std::string& impl, const std::string& metric,
                 double v, const std::string& unit) { sink({"scan", c, impl, metric, v, unit}); };

  const double copy = copy_bandwidth_gbps(o.repeats);
  row("bytes=4294967296", "cuda-memcpy", "copy_bandwidth", copy, "GB/s");

  auto measure = [&](DType t, std::int64_t T, std::int64_t B, std::int64_t C, ScanAlgo algo,
                     bool backward, Tensors& s) {
    ScanDesc d{T, B, C, ScanLayout::TimeMajor, ScanDirection::Forward, t, Device::cuda(0)};
    LinearScan scan(d, algo);
    return time_scan(scan, s, backward, o.repeats);
  };

  if (o.table1 && o.only_steps == 0) {
    for (std::int64_t T : {16, 256, 4096, 65536}) {
      for (std::int64_t C : {4, 32, 128}) {
        const std::string c = shape_case(DType::F32, T, 1, C);
        Tensors s = make_tensors(DType::F32, T * C, false);
        const double plr = measure(DType::F32, T, 1, C, ScanAlgo::Parallel, false, s);
        const double slr = measure(DType::F32, T, 1, C, ScanAlgo::Serial, false, s);
        bench::CubScan cub(C, T);
        DeviceBuffer pairs(static_cast<std::size_t>(T * C) * 8), out(pairs.bytes());
        fill<float>(pairs, 2 * T * C, 0.5f, 1.0f, 5);
        const double cub_us =
            bench::median_us([&] { cub.run(pairs.data(), out.data(), nullptr); }, o.repeats);
        const double n = double(T * C);
        row(c, "prnn-plr", "fwd_us", plr, "us");
        row(c, "prnn-slr", "fwd_us", slr, "us");
        row(c, "cub-scan-by-key", "fwd_us", cub_us, "us");
        row(c, "prnn-plr", "throughput", n / plr / 1e3, "Gelem/s");
        row(c, "prnn-slr", "throughput", n / slr / 1e3, "Gelem/s");
        row(c, "cub-scan-by-key", "throughput", n / cub_us / 1e3, "Gelem/s");
        row(c, "prnn-plr", "speedup_over_slr", slr / plr, "x");
      }
    }
  }

  if (o.sweep || o.only_steps > 0) {
    struct Shape3 {
      std::int64_t T, B, C;
    };
    std::vector<Shape3> shapes;
    for (std::int64_t C : {4, 8, 32, 128, 1024, 8192})
      for (int log_n : {20, 24, 26, 28})
        if ((std::int64_t{1} << log_n) <= o.max_elements && (std::int64_t{1} << log_n) / C >= 1)
          shapes.push_back({(std::int64_t{1} << log_n) / C, 1, C});
    shapes.push_back({std::int64_t{1} << 22, 1, 4});   // few channels, long sequence
    shapes.push_back({65536, 8, 1536});                 // accelerated-scan's favourite shape
    shapes.push_back({65536, 4, 256});
    if (o.only_steps > 0) shapes = {{o.only_steps, o.only_batch, o.only_channels}};
    for (const Shape3& sh : shapes) {
      const std::int64_t n = sh.T * sh.B * sh.C;
      if (n > 2 * o.max_elements * 2) continue;
      for (DType t : {DType::F32, DType::BF16}) {
        const std::string c = shape_case(t, sh.T, sh.B, sh.C);
        Tensors s = make_tensors(t, n, t == DType::F32);
        const double fwd = measure(t, sh.T, sh.B, sh.C, ScanAlgo::Parallel, false, s);
        const double fwd_bytes = 3.0 * double(size_of(t));
        row(c, "prnn-plr", "fwd_throughput", double(n) / fwd / 1e3, "Gelem/s");
        row(c, "prnn-plr", "fwd_pct_of_copy", 100.0 * double(n) * fwd_bytes / (fwd * 1e3) / copy, "%");
        if (t == DType::F32) {
          const double bwd = measure(t, sh.T, sh.B, sh.C, ScanAlgo::Parallel, true, s);
          row(c, "prnn-plr", "bwd_throughput", double(n) / bwd / 1e3, "Gelem/s");
          row(c, "prnn-plr", "bwd_pct_of_copy", 100.0 * double(n) * 20.0 / (bwd * 1e3) / copy, "%");
        }
      }
    }
  }

  if (o.tiny && o.only_steps == 0) {
    // 2^16 elements: one launch. Timed three ways: one stream launch per timing (includes the
    // host's launch latency), 20 back-to-back stream launches per timing (the host launches the
    // next call while the GPU runs the last), and CUDA-graph replays (the kernel's own time plus
    // the graph launch).
    for (std::int64_t C : {1, 16, 256}) {
      const std::int64_t T = (std::int64_t{1} << 16) / C;
      const std::string c = shape_case(DType::F32, T, 1, C);
      Tensors s = make_tensors(DType::F32, T * C, false);
      ScanDesc d{T, 1, C, ScanLayout::TimeMajor, ScanDirection::Forward, DType::F32,
                 Device::cuda(0)};
      LinearScan scan(d, ScanAlgo::Parallel);
      row(c, "prnn-plr", "fwd_us", time_scan(scan, s, false, o.repeats), "us");
      ScanForwardArgs f;
      f.a = TensorView(s.a.data(), d.dtype, d.sequence_shape(), d.device);
      f.x = TensorView(s.x.data(), d.dtype, d.sequence_shape(), d.device);
      f.h = TensorView(s.h.data(), d.dtype, d.sequence_shape(), d.device);
      cudaStream_t stream;
      PRNN_CUDA_CHECK(cudaStreamCreate(&stream));
      constexpr int kReplaysPerTiming = 20;
      const double stream_us = bench::median_us(
          [&] {
            for (int i = 0; i < kReplaysPerTiming; ++i) scan.forward(f, stream);
          },
          o.repeats, 3, stream);
      scan.check(stream);
      row(c, "prnn-plr", "fwd_us_stream", stream_us / kReplaysPerTiming, "us");
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      PRNN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kReplaysPerTiming; ++i) scan.forward(f, stream);
      PRNN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      PRNN_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      const double us = bench::median_us(
          [&] { PRNN_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, o.repeats, 3, stream);
      scan.check(stream);
      row(c, "prnn-plr", "fwd_us_graph", us / kReplaysPerTiming, "us");
      PRNN_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec));
      PRNN_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
      PRNN_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream));
    }
  }
}

}  // namespace prnn
