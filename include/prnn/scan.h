// The elementwise linear recurrence h_t = a_t ⊙ h_{t-1} + x_t over a batch of sequences, forward
// and backward, on the CPU (reference) or the GPU (serial or parallel scan).
//
// Layout: a, x, h, dh, da, dx are [T, B, C] (ScanLayout::TimeMajor) or [B, T, C]
// (ScanLayout::BatchMajor), contiguous; h0, h_final, dh0, dh_final are [B, C].
// Direction: Forward runs t = 0..len-1; Reverse runs t = len-1..0 with h_{t+1} as the previous
// state. Lengths (optional, int32 [B] on the tensors' device, each in [0, T]): sequence b has
// len_b valid steps; outputs at t >= len_b are written as zero, h_final[b] is the last valid
// state (h0[b] when len_b = 0). Steps are "logical" in the direction of the scan.
// Backward (Martin & Cundy §2.2), in the scan's own order s: g_s = a_{s+1} ⊙ g_{s+1} + dh_s
// (+ dh_final at the last step); da_s = h_{s-1} ⊙ g_s; dx_s = g_s; dh0 = a_0 ⊙ g_0.
// dtypes: f32, or f16/bf16 tensors with f32 arithmetic (the GPU paths); the CPU reference path
// takes f32 or f64. All tensors of one call share one dtype. Results are deterministic: no
// atomics on data, fixed combination order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "prnn/stream.h"
#include "prnn/tensor.h"

namespace prnn {

enum class ScanLayout : std::uint8_t { TimeMajor, BatchMajor };
enum class ScanDirection : std::uint8_t { Forward, Reverse };
enum class ScanAlgo : std::uint8_t { Auto, Serial, Parallel, Reference };

const char* to_string(ScanAlgo a);
ScanAlgo parse_scan_algo(const std::string& name);

struct ScanDesc {
  std::int64_t steps = 0;     // T
  std::int64_t batch = 1;     // B
  std::int64_t channels = 0;  // C
  ScanLayout layout = ScanLayout::TimeMajor;
  ScanDirection direction = ScanDirection::Forward;
  DType dtype = DType::F32;
  Device device = Device::cuda(0);

  void validate() const;
  Shape sequence_shape() const;  // [T, B, C] or [B, T, C]
  Shape state_shape() const { return {batch, channels}; }
};

struct ScanForwardArgs {
  TensorView a, x;          // inputs
  TensorView h0;            // optional initial state [B, C]
  const std::int32_t* lengths = nullptr;  // optional [B]
  TensorView h;             // output
  TensorView h_final;       // optional output [B, C]
};

struct ScanBackwardArgs {
  TensorView a;             // forward input
  TensorView h;             // forward output
  TensorView h0;            // optional, as in forward
  const std::int32_t* lengths = nullptr;
  TensorView dh;            // gradient at every h_t
  TensorView dh_final;      // optional gradient at h_final
  TensorView da, dx;        // outputs
  TensorView dh0;           // optional output [B, C]
};

// A plan for one problem shape: validates once, picks the algorithm, owns its workspace (so no
// call allocates), and runs forward/backward any number of times.
class LinearScan {
 public:
  explicit LinearScan(const ScanDesc& desc, ScanAlgo algo = ScanAlgo::Auto);
  ~LinearScan();
  LinearScan(LinearScan&&) noexcept;
  LinearScan& operator=(LinearScan&&) noexcept;

  const ScanDesc& desc() const;
  ScanAlgo algo() const;              // the algorithm that runs (Auto resolved)
  const std::string& reason() const;  // why that algorithm was picked
  // Empty when `algo` can run desc on this build/device; otherwise the reason it cannot.
  static std::string can_implement(const ScanDesc& desc, ScanAlgo algo);

  void forward(const ScanForwardArgs& args, cudaStream_t stream = nullptr);
  void backward(const ScanBackwardArgs& args, cudaStream_t stream = nullptr);
  // Synchronizes the stream and throws RuntimeError if a kernel reported a failure (a lookback
  // wait that timed out, a length outside [0, T]).
  void check(cudaStream_t stream = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prnn
