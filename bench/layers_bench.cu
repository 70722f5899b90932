// `prnn bench layers`: the linear-recurrence layers on the GPU.
//   figure1: training step (forward + backward, µs) of GILR-LSTM, SRU, QRNN(2), QRNN(10) with the
//            parallel (PLR) and serial (SLR) scan inside, T·B = 65536, I = H (the paper's
//            Figure 1: PLR-over-SLR speedup), tensors of options.dtype (16-bit: the layer's
//            conversions to and from fp32 are part of the step);
//   table2:  training throughput (T·B elements per second of forward + backward) of GILR-LSTM-H
//            against cuDNN LSTM-H, input 32, batch 1..256 × T 256..131072 (the paper's Table 2);
//            cuDNN: all three algorithms, and the best of them. cuDNN's f32 runs with
//            CUDNN_DEFAULT_MATH, which lets it use TF32 tensor cores on Ampere and later; prnn's
//            layers run in each of options.maths (fp32: PEDANTIC cuBLAS; tf32: impl
//            "<impl>-tf32").
// Medians of `repeats` event-timed training steps after warm-up; random inputs and weights.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/bench_fill.cuh"
#include "bench/bench_timer.h"
#include "bench/cudnn_rnn.h"
#include "core/cuda_check.h"
#include "prnn/bench.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/layers.h"

namespace prnn {
namespace {

// n random elements of `dtype` (f32, f16 or bf16) in [lo, hi).
DeviceBuffer random_buffer(std::int64_t n, DType dtype, float lo, float hi, std::uint64_t seed) {
  DeviceBuffer b(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * size_of(dtype));
  if (dtype == DType::F16)
    bench::fill_uniform_kernel<__half><<<1024, 256>>>(b.data_as<__half>(), n, lo, hi, seed);
  else if (dtype == DType::BF16)
    bench::fill_uniform_kernel<__nv_bfloat16>
        <<<1024, 256>>>(b.data_as<__nv_bfloat16>(), n, lo, hi, seed);
  else
    bench::fill_uniform_kernel<float><<<1024, 256>>>(b.data_as<float>(), n, lo, hi, seed);
  PRNN_CHECK_LAUNCH();
  return b;
}

// One training step of a layer: forward, then backward with a random dy. Returns µs (median).
double layer_train_us(const LinearLayerDesc& desc, std::int64_t T, std::int64_t B, ScanAlgo algo,
                      GemmMath math, int repeats, DType dtype = DType::F32) {
  const Device dev = Device::cuda(0);
  LinearLayer layer(desc, T, B, dtype, dev, algo, math);
  const std::int64_t I = desc.input_size, H = desc.hidden_size, np = desc.param_count();
  const float w = 1.0f / std::sqrt(static_cast<float>(std::max(I, H)));
  const auto bytes = [&](std::int64_t n) { return static_cast<std::size_t>(n) * size_of(dtype); };
  DeviceBuffer x = random_buffer(T * B * I, dtype, -1.0f, 1.0f, 1);
  DeviceBuffer params = random_buffer(np, dtype, -w, w, 2);
  DeviceBuffer y(bytes(T * B * H)), dx(bytes(T * B * I)), dparams(bytes(np));
  DeviceBuffer dy = random_buffer(T * B * H, dtype, -1.0f, 1.0f, 3);
  const TensorView tx(x.data(), dtype, {T, B, I}, dev), tp(params.data(), dtype, {np}, dev);
  const TensorView ty(y.data(), dtype, {T, B, H}, dev), tdy(dy.data(), dtype, {T, B, H}, dev);
  const TensorView tdx(dx.data(), dtype, {T, B, I}, dev);
  const TensorView tdp(dparams.data(), dtype, {np}, dev);
  return bench::median_us(
      [&] {
        layer.forward(tx, tp, {}, ty, {});
        layer.backward(tx, tp, {}, tdy, {}, tdx, tdp, {});
      },
      repeats, 2);
}

// The impl name of prnn's `base` run in `math`.
std::string impl_name(const std::string& base, GemmMath math) {
  return math == GemmMath::Fp32 ? base : base + "-" + to_string(math);
}

std::string layer_name(const LinearLayerDesc& d) {
  return d.kind == LinearLayerKind::Qrnn ? "qrnn" + std::to_string(d.window) : to_string(d.kind);
}

}  // namespace

void run_layers_bench(const LayersBenchOptions& o, const BenchSink& sink) {
  if (device_count() == 0) throw Unsupported("prnn bench layers", "no GPU: " + no_device_reason());
  auto row = [&](const std::string& c, const std::string& impl, const std::string& metric,
                 double v, const std::string& unit) { sink({"layers", c, impl, metric, v, unit}); };
  const std::int64_t H = o.hidden;

  if (o.figure1) {
    const std::vector<LinearLayerDesc> layers = {{LinearLayerKind::GilrLstm, H, H, 1},
                                                 {LinearLayerKind::Sru, H, H, 1},
                                                 {LinearLayerKind::Qrnn, H, H, 2},
                                                 {LinearLayerKind::Qrnn, H, H, 10}};
    for (const LinearLayerDesc& d : layers) {
      for (std::int64_t T : {16, 256, 4096, 65536}) {
        const std::int64_t B = 65536 / T;
        const std::string c = "layer=" + layer_name(d) + ";dtype=" + to_string(o.dtype) +
                              ";I=" + std::to_string(H) + ";H=" + std::to_string(H) +
                              ";T=" + std::to_string(T) + ";B=" + std::to_string(B);
        for (GemmMath m : o.maths) {
          const double plr = layer_train_us(d, T, B, ScanAlgo::Parallel, m, o.repeats, o.dtype);
          const double slr =
              layer_train_us(d, T, B, ScanAlgo::Serial, m, std::min(o.repeats, 3), o.dtype);
          row(c, impl_name("prnn-plr", m), "train_us", plr, "us");
          row(c, impl_name("prnn-slr", m), "train_us", slr, "us");
          row(c, impl_name("prnn-plr", m), "speedup_over_slr", slr / plr, "x");
        }
      }
    }
  }

  if (o.table2) {
    constexpr std::int64_t kInput = 32;
    const LinearLayerDesc gilr{LinearLayerKind::GilrLstm, kInput, H, 1};
    bench::CudnnContext cudnn;
    for (std::int64_t B : {1, 4, 16, 64, 256}) {
      for (std::int64_t T : {256, 1024, 4096, 16384, 65536, 131072}) {
        if (T * B > o.max_rows) continue;
        const std::string c = "model=lstm;dtype=f32;I=32;H=" + std::to_string(H) +
                              ";T=" + std::to_string(T) + ";B=" + std::to_string(B);
        const double elems = static_cast<double>(T * B);
        std::vector<double> ours;  // elem/s per math
        for (GemmMath m : o.maths) {
          const double us = layer_train_us(gilr, T, B, ScanAlgo::Parallel, m, o.repeats);
          ours.push_back(elems / us * 1e6);
          row(c, impl_name("prnn-gilr_lstm", m), "train_throughput", ours.back(), "elem/s");
        }
        // cuDNN's throughput does not depend on T (its time is per step); it is measured up to
        // T = 16384, and at T = 65536 for batch 1 (the target row).
        if (T > 16384 && !(B == 1 && T == 65536)) continue;
        double best = 0.0;
        for (bench::CudnnRnnAlgo algo : bench::kCudnnRnnAlgos) {
          const std::string impl = std::string("cudnn-") + bench::to_string(algo);
          try {
            bench::CudnnRnn rnn(cudnn, {Cell::LSTM, DType::F32, kInput, H, B, T}, algo);
            const double t = bench::median_us(
                [&] {
                  rnn.forward();
                  rnn.backward();
                },
                T >= 16384 ? 2 : o.repeats, 1);
            row(c, impl, "train_throughput", elems / t * 1e6, "elem/s");
            best = std::max(best, elems / t * 1e6);
          } catch (const Unsupported&) {
            row(c, impl, "status", 0.0, "not_supported");
          }
        }
        if (best > 0.0) {
          row(c, "cudnn-best", "train_throughput", best, "elem/s");
          for (std::size_t i = 0; i < o.maths.size(); ++i)
            row(c, impl_name("prnn-gilr_lstm", o.maths[i]), "speedup_over_cudnn_best",
                ours[i] / best, "x");
        }
      }
    }
  }
}

}  // namespace prnn
