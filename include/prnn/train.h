// Training jobs behind `prnn demo` and `prnn train`: narrow, type-erased entry points that pick the
// best backend available and report progress through a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prnn/dtype.h"

namespace prnn {

struct TrainProgress {
  std::int64_t iteration = 0;   // 1-based
  std::int64_t iterations = 0;  // total planned
  double loss = 0.0;            // mean loss of this iteration's batch
  double accuracy = 0.0;        // fraction of this batch classified correctly
  double tokens_per_second = 0.0;  // timesteps × batch processed per second so far
  double iterations_per_second = 0.0;  // iterations run by this call per second so far
  double seconds = 0.0;                // since this call's first iteration began
  // L2 norm of this iteration's whole gradient, before any clipping (0 where a trainer does not
  // compute it).
  double grad_norm = 0.0;
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

// The long-memory task of Martin & Cundy (2018) §4.2: Hochreiter & Schmidhuber's (1997) problem 2b
// at long T. Alphabet of 128 one-hot symbols; a sequence of T vectors; the first is ±e_0 and its
// sign is the class (+e_0: class 0, -e_0: class 1); the other T-1 are distractors, uniform over
// symbols 1..127 (never e_0, so the marker channel is nonzero only at t = 0). Batches are drawn
// on the fly from a counter-based generator: batch k of seed s is a pure function of (s, k), so
// the data stream's state is just (seed, batches drawn) and a resumed run sees the same data.
// Model: two GILR-LSTM layers (128 -> H -> H, prnn/layers.h), a dense classifier on layer 2's
// output at the last step, softmax cross-entropy, Adam (β = 0.9, 0.999; ε in the config).
inline constexpr std::int64_t kLongMemoryAlphabet = 128;
inline constexpr std::int64_t kLongMemoryClasses = 2;

enum class TrainBackend : std::uint8_t {
  Auto,  // the GPU when there is one, else the CPU reference
  Gpu,   // LinearLayer on device tensors, the device Adam; throws Unsupported without a GPU
  Cpu,   // LinearLayer on host tensors (the CPU reference), reference Adam; tiny T only
};
const char* to_string(TrainBackend b);

// The defaults are the T = 1024 demo (converges in ~250 iterations). Longer T wants a lower
// learning rate: at T = 8192, 1e-3 converges and 3e-3 stays at chance (measured on an H200).
struct LongMemoryConfig {
  std::int64_t steps = 1024;      // T
  std::int64_t hidden = 128;      // H of both layers
  std::int64_t batch = 32;        // B
  std::int64_t iterations = 3000;  // the last iteration to run, counting those a resume restores
  double learning_rate = 3e-3;
  // Adam's ε. The gradients that carry the first symbol pass through input gates ≈ 1/T at init
  // (chrono init), so at T = 2^20 they are ~1e-10, below the usual 1e-8, which would stall them:
  // use about 1e-12 there.
  double adam_eps = 1e-8;
  std::uint64_t seed = 1;         // parameter init and the data stream
  // Stop once this many consecutive batches are classified 100% correctly (the paper's
  // convergence criterion is 5), and at least kMinPerfectSequences sequences in a row, so that a
  // small batch cannot pass by chance (five perfect batches of 2 are a coin's 1 in 1024; see
  // perfect_batches_needed); 0 never stops early.
  std::int64_t stop_after_perfect = 5;
  std::string checkpoint;         // file to save to (and resume from); empty: no checkpoints
  std::int64_t save_every = 0;    // save every this many iterations as well as at the end; 0: end
  bool resume = false;            // start from `checkpoint` (must exist and match this config)
  TrainBackend backend = TrainBackend::Auto;
  // The GPU layers' GEMMs (prnn/layers.h): Tf32 runs them on tensor cores, most of an iteration's
  // time at long T in fp32. The checkpoint does not record it: a run may resume in either mode
  // (bit-for-bit continuation needs the same one). The CPU backend takes Fp32 only (Unsupported,
  // from its layers, otherwise).
  GemmMath math = GemmMath::Fp32;
  // Clip by global norm (0: off): when the gradient's L2 norm over every parameter exceeds this,
  // the whole gradient is scaled to this norm before the Adam step. Like `math`, the checkpoint
  // does not record it.
  double clip_norm = 0.0;
};

// The streak that counts as convergence: max(stop_after_perfect, ceil(kMinPerfectSequences / B))
// consecutive perfect batches (0 when stop_after_perfect is 0). At B >= 13 that is the paper's 5.
inline constexpr std::int64_t kMinPerfectSequences = 64;
std::int64_t perfect_batches_needed(const LongMemoryConfig& c);

struct LongMemoryResult {
  TrainResult train;                   // over the iterations this call ran
  std::int64_t start_iteration = 0;    // iterations restored from the checkpoint (0: fresh)
  std::int64_t last_iteration = 0;     // the last iteration run (== iterations unless converged)
  bool converged = false;              // perfect_batches_needed consecutive perfect batches seen
  std::int64_t converged_iteration = 0;  // the iteration that completed the streak
  double last_loss = 0.0;              // loss of the last iteration's batch
  double last_accuracy = 0.0;
  double iterations_per_second = 0.0;
};

// Trains the long-memory model; on_progress is called after every iteration. Throws
// InvalidArgument for a bad config or a corrupt / mismatched checkpoint, Unsupported for a
// backend this build or machine cannot run.
LongMemoryResult train_long_memory(const LongMemoryConfig& config,
                                   const std::function<void(const TrainProgress&)>& on_progress = {});

// The content of a long-memory checkpoint file: the config it was trained with (steps, hidden,
// batch, learning_rate, adam_eps, seed; the other fields keep their defaults), the iterations
// completed, the data stream's position and the early-stop streak, and the flat parameters with
// their Adam moments. Layout (little-endian): magic "PRNNLMCK", u32 version, u32 reserved, the
// config, the state, f32 params[n], m[n], v[n], then a u64 FNV-1a checksum of every byte before.
struct LongMemoryCheckpoint {
  LongMemoryConfig config;
  std::int64_t iteration = 0;       // iterations completed (= Adam steps taken)
  std::int64_t batches_drawn = 0;   // the data stream's position: the next batch index
  std::int64_t perfect_streak = 0;  // consecutive 100%-accurate batches ending at `iteration`
  std::vector<float> params, adam_m, adam_v;
};

// Reads and validates a checkpoint (magic, version, sizes, checksum); throws InvalidArgument
// naming what is wrong.
LongMemoryCheckpoint read_long_memory_checkpoint(const std::string& path);

}  // namespace prnn
