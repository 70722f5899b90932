// Persistent-RNN kernel lab: times prnn::Rnn forward and forward+backward (µs per step, CUDA
// events, median of repeats) for the persistent kernels and the GEMM-RNN on a few shapes, through
// the public API only, each call timed alone and back to back (20 calls between two events).
// Built by hand on the GPU machine (bench/persistent/lab.sh); the committed benchmark is
// `prnn bench rnn`.
//   lab [H B T]...   default: 1152 4 256, 2048 4 256, 1152 1 256, 1152 16 256
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "prnn/rnn.h"
#include "prnn/tensor.h"

namespace {

// µs per call: `calls` calls between two events (1: a call alone; more: back to back, the host
// enqueuing ahead of the GPU), the median of `repeats` such measurements after 3 warm-up calls.
float time_us(prnn::Rnn& rnn, const std::function<void()>& run, int calls, int repeats) {
  for (int i = 0; i < 3; ++i) run();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> v;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(a);
    for (int c = 0; c < calls; ++c) run();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    v.push_back(ms * 1000.0f / static_cast<float>(calls));
  }
  rnn.check();
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

prnn::DeviceBuffer random_buffer(std::size_t n, float scale, std::mt19937& gen) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> h(n);
  for (float& e : h) e = d(gen);
  prnn::DeviceBuffer b(n * sizeof(float));
  b.copy_from_host(h.data(), n * sizeof(float));
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::array<long, 3>> shapes;
  for (int i = 1; i + 2 < argc; i += 3) shapes.push_back({atol(argv[i]), atol(argv[i + 1]), atol(argv[i + 2])});
  if (shapes.empty()) shapes = {{1152, 4, 256}, {2048, 4, 256}, {1152, 1, 256}, {1152, 16, 256}, {1152, 4, 16}};
  std::mt19937 gen(7);
  std::printf("%-22s %-14s %10s %10s %10s %10s\n", "shape", "algo", "fwd_us/st", "fb_us/st",
              "fwd_b2b", "fb_b2b");
  for (auto [H, B, T] : shapes) {
    prnn::RnnDesc d{prnn::Cell::ReLU, H, H, 1, prnn::Direction::Unidirectional, prnn::DType::F32};
    const auto P = prnn::rnn_param_count(d);
    auto x = random_buffer(T * B * H, 1.0f, gen), params = random_buffer(P, 1.0f / std::sqrt(float(H)), gen);
    auto dy = random_buffer(T * B * H, 1.0f, gen), y = random_buffer(T * B * H, 1.0f, gen);
    auto dx = random_buffer(T * B * H, 1.0f, gen), dparams = random_buffer(P, 1.0f, gen);
    const prnn::Device dev = prnn::Device::cuda(0);
    auto view = [&](prnn::DeviceBuffer& b, prnn::Shape s) { return prnn::TensorView(b.data(), prnn::DType::F32, s, dev); };
    for (prnn::RnnAlgo algo : {prnn::RnnAlgo::Persistent, prnn::RnnAlgo::GemmPerStep}) {
      const std::string why = prnn::Rnn::can_implement(d, T, B, dev, algo);
      char shape[64];
      std::snprintf(shape, sizeof(shape), "H%ld B%ld T%ld", H, B, T);
      if (!why.empty()) { std::printf("%-22s %-14s %s\n", shape, prnn::to_string(algo), why.c_str()); continue; }
      prnn::Rnn rnn(d, T, B, dev, algo);
      auto fwd = [&] { rnn.forward(view(x, {T, B, H}), view(params, {P}), {}, {}, view(y, {T, B, H}), {}, {}); };
      auto fb = [&] {
        fwd();
        rnn.backward_data(view(params, {P}), view(dy, {T, B, H}), {}, {}, view(dx, {T, B, H}), {}, {});
        rnn.backward_weights(view(x, {T, B, H}), {}, {}, view(dparams, {P}));
      };
      const float f = time_us(rnn, fwd, 1, 20) / T, fbt = time_us(rnn, fb, 1, 20) / T;
      const float f2 = time_us(rnn, fwd, 20, 5) / T, fb2 = time_us(rnn, fb, 20, 5) / T;
      std::printf("%-22s %-14s %10.3f %10.3f %10.3f %10.3f\n", shape, prnn::to_string(algo), f, fbt,
                  f2, fb2);
    }
  }
  return 0;
}
