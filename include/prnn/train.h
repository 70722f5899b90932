// Training jobs behind `prnn demo` and `prnn train`: narrow, type-erased entry points that pick the
// best backend available and report progress through a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace prnn {

struct TrainProgress {
  std::int64_t iteration = 0;   // 1-based
  std::int64_t iterations = 0;  // total planned
  double loss = 0.0;            // mean loss of this iteration's batch
  double accuracy = 0.0;        // fraction of this batch classified correctly
  double tokens_per_second = 0.0;  // timesteps × batch processed per second so far
};

struct TrainResult {
  std::string backend;  // e.g. "cpu-reference (f32)"
  std::string task;
  double first_loss = 0.0;
  double final_loss = 0.0;        // mean over the last 10 iterations
  double final_accuracy = 0.0;    // mean over the last 10 iterations
  double tokens_per_second = 0.0;
  double seconds = 0.0;
  std::int64_t iterations = 0;
};

// The demo task: a sequence of one-hot symbols; the class is which half of the alphabet the
// FIRST symbol came from (Hochreiter & Schmidhuber's memory problem 2b, small). An LSTM reads the
// sequence, a dense layer classifies its final hidden state; softmax cross-entropy, Adam.
struct DemoConfig {
  std::int64_t alphabet = 8;     // input size (one-hot)
  std::int64_t hidden = 32;
  std::int64_t steps = 10;       // sequence length T
  std::int64_t batch = 16;
  std::int64_t iterations = 600;
  double learning_rate = 1e-2;
  std::uint64_t seed = 1;
};

// Runs the demo on the best backend available (today: the CPU reference).
TrainResult run_demo(const DemoConfig& config,
                     const std::function<void(const TrainProgress&)>& on_progress = {});

}  // namespace prnn
