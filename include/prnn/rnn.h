// Recurrent layers: cells, the layer descriptor, and the PyTorch-compatible parameter layout.
//
// Conventions (DESIGN.md):
//   x [T, B, I] time-major; y [T, B, D*H] (forward direction first, then reverse);
//   h0/hn/c0/cn [L*D, B, H] with index layer*D + direction.
//   Per layer l and direction d the parameters are W_ih [G*H, I_l], W_hh [G*H, H], b_ih [G*H],
//   b_hh [G*H] (I_0 = input_size, I_l = D*H for l > 0), stored back to back in one flat array in
//   PyTorch's order: for l: for d: W_ih, W_hh, b_ih, b_hh.
//   Gate order: LSTM i,f,g,o; GRU r,z,n with n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)) and
//   h' = (1 - z) ⊙ n + z ⊙ h.
//   Vanilla cells: h' = act(W_ih x + b_ih + W_hh h + b_hh), act = relu, min(max(x,0),20) or tanh.
//
// Residual connections (RnnDesc::residual_every = k >= 1; 0: none): every layer l >= 1 with
// l % k == 0 adds its input to its output, out_l = rnn_l(out_{l-1}) + out_{l-1} (the shapes match:
// I_l = D*H for l >= 1), as in the Persistent RNNs paper's deep speech stacks. The recurrence
// (h_{t-1} fed back, hn) runs on the layer's own hidden state, not on the sum; the backward adds
// dout_l to d(in_l) along the identity path.
//
// Variable-length sequences (the optional `lengths` of Rnn::forward, lengths[b] in [1, T]):
// positions t >= lengths[b] are padding, an identity step for batch row b in every layer and
// direction: the state passes through unchanged (h_t = h_{t-1}, LSTM c_t = c_{t-1}), y_t = 0
// there, and x_t there has no effect (dx_t = 0, dy_t ignored). So the forward direction's hn/cn
// are the state after step lengths[b] - 1, and the reverse direction (t = T-1 .. 0) starts from
// h0 at t = lengths[b] - 1: PyTorch's packed-sequence semantics (pack_padded_sequence). In the
// backward a padded step passes dh (and dc) through unchanged and adds nothing to the parameter
// gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "prnn/dtype.h"
#include "prnn/stream.h"
#include "prnn/tensor.h"

namespace prnn {

enum class Cell : std::uint8_t { ReLU, ClippedReLU, Tanh, GRU, LSTM };

// The clipped-ReLU ceiling: min(max(x, 0), kClippedReluCeiling).
inline constexpr double kClippedReluCeiling = 20.0;

const char* to_string(Cell c);
// Parses "relu", "clipped_relu", "tanh", "gru", "lstm"; throws InvalidArgument.
Cell parse_cell(const std::string& name);
// Gates per cell: 1 for vanilla cells, 3 for GRU, 4 for LSTM.
int gate_count(Cell c);
inline bool has_cell_state(Cell c) { return c == Cell::LSTM; }

enum class Direction : std::uint8_t { Unidirectional, Bidirectional };

struct RnnDesc {
  Cell cell = Cell::LSTM;
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t layers = 1;
  Direction direction = Direction::Unidirectional;
  DType weight_dtype = DType::F32;
  // Residual connection every k layers (see above); 0: none.
  std::int64_t residual_every = 0;
  // The math of the GEMMs over all timesteps on the GPU (input projection, d(in), dW_ih, dW_hh)
  // of an f32 layer: Fp32 (fp32 FMA, the default) or Tf32 (TF32 tensor cores with fp32
  // accumulation: both operands rounded to 10 mantissa bits, several times the rate; what cuDNN
  // does for fp32 data under its default math). The recurrence stays fp32 either way. 16-bit
  // layers run these GEMMs on TF32 whatever this says (their inputs and weights are exact in
  // it). The CPU reference takes Fp32 only.
  GemmMath gemm_math = GemmMath::Fp32;

  int directions() const { return direction == Direction::Bidirectional ? 2 : 1; }
  std::int64_t gate_rows() const { return gate_count(cell) * hidden_size; }
  // Input width of layer l.
  std::int64_t layer_input_size(std::int64_t layer) const {
    return layer == 0 ? input_size : directions() * hidden_size;
  }
  // Whether layer l adds its input to its output (residual_every k >= 1, l >= 1, l % k == 0).
  bool residual_at(std::int64_t layer) const {
    return residual_every > 0 && layer >= 1 && layer % residual_every == 0;
  }
  // Throws InvalidArgument naming the field when a size is not positive, residual_every < 0 or
  // gemm_math is not a GemmMath.
  void validate() const;
};

// Offsets (in elements) of one layer/direction's tensors inside the flat parameter array.
struct RnnParamOffsets {
  std::int64_t w_ih = 0;  // [G*H, I_l]
  std::int64_t w_hh = 0;  // [G*H, H]
  std::int64_t b_ih = 0;  // [G*H]
  std::int64_t b_hh = 0;  // [G*H]
  std::int64_t input_size = 0;  // I_l
};

RnnParamOffsets rnn_param_offsets(const RnnDesc& desc, std::int64_t layer, int direction);
std::int64_t rnn_param_count(const RnnDesc& desc);

// ---- The recurrent layer ------------------------------------------------------------------------
//
// Algorithms:
//   Persistent   W_ih·x for all T in one cuBLAS GEMM, then one cooperative kernel per layer
//                direction runs every step with W_hh held in registers across the SMs, the h
//                exchange between SMs doubling as the step's only synchronization
//                (src/persistent/); backward data the same with W_hhᵀ in reverse time, backward
//                weights as GEMMs over all T·B rows. Every cell; H up to what the chip holds
//                (prnn plan says; on 132 SMs: vanilla 2304, GRU and LSTM 1152, and with f16 /
//                bf16 weights on tensor cores, W_hh partly in shared memory, 2048 at B ≤ 32);
//                every wait is bounded (a timeout surfaces as RuntimeError from check() or the
//                next call).
//   GemmPerStep  the GEMM-RNN baseline (src/gemm_rnn/): W_ih·x for all T in one cuBLAS GEMM, then
//                per step one GEMM h_{t-1}·W_hhᵀ and a fused bias + gate-math kernel, the step
//                loop captured once into a CUDA graph and replayed; backward data per step in
//                reverse, backward weights as GEMMs over all T·B rows. Every cell.
//   Reference    the CPU reference (src/reference/rnn.h), host tensors, f32 or f64.
//   Auto         host tensors: Reference; device tensors: Persistent when it can run the
//                problem, else GemmPerStep; also GemmPerStep where a persistent pass would run
//                on the FMA kernels with so much work per SM and step that the per-step GEMMs
//                train faster (measured: src/persistent/tiling.h, auto_prefers_gemm_per_step;
//                e.g. fp32 LSTM / GRU at H ≥ 1024 from B = 32); reason() says which and why.
// Device dtypes: f32, and f16 / bf16 tensors (weights, data and states alike) with fp32
// accumulation: the 16-bit tensors are converted to fp32 on the way in and rounded (to nearest
// even) on the way out. For them the GEMMs over all timesteps run on TF32 tensor cores (the
// 16-bit inputs and weights exact, fp32 operands such as a lower layer's h and the gate gradients
// rounded to TF32), and the persistent GRU / LSTM kernels from batch 4 on 16-bit mma fragments
// (W_hh exact; h and the gate gradients as two 16-bit halves, about 2^-16 relative); otherwise
// the persistent kernels hold the weights as two 16-bit values per register where a packed shape
// exists (GRU and LSTM at 9 units per SM), else in fp32. f32 layers run those GEMMs in fp32
// FMA unless RnnDesc::gemm_math asks for TF32.
enum class RnnAlgo : std::uint8_t { Auto, Persistent, GemmPerStep, Reference };

const char* to_string(RnnAlgo a);
// Parses "auto", "persistent", "gemm_per_step", "reference"; throws InvalidArgument.
RnnAlgo parse_rnn_algo(const std::string& name);

// A multi-layer, optionally bidirectional RNN for one problem shape (steps T, batch B), on the
// host (CPU reference) or one GPU. dtype = desc.weight_dtype for every tensor of every call.
//   x, dx [T, B, I]; y, dy [T, B, D*H]; params, dparams [rnn_param_count(desc)];
//   h0, hn, dhn, dh0 (and LSTM's c0, cn, dcn, dc0) [L*D, B, H].
// Optional (an empty TensorView): h0 / c0 (zeros), hn / cn (not written), dhn / dcn (zeros),
// dx / dh0 / dc0 (not computed). c0, cn, dcn, dc0 must be empty unless the cell is LSTM.
// Gradient outputs are overwritten, not accumulated.
// lengths (forward, optional): [B] host int32, lengths[b] in [1, T] (see "Variable-length
// sequences" above); empty: every sequence has T steps. backward_data and backward_weights use
// the lengths of the forward they follow. Device calls upload them into a buffer the
// constructor allocated (no allocation; the host array may be reused when forward returns).
// Training protocol: forward() keeps a reserve (pre-activations and the hidden states of every
// layer); backward_data() is the backward of the most recent forward() and must get the same
// params; it leaves the gradients of the pre-activations in the reserve, which
// backward_weights() turns into dparams, given the same x and h0 (and c0) as that forward.
// The constructor allocates everything (the reserve, a cuBLAS handle and its workspace, a
// capture stream); calls do not allocate device memory. With the persistent algorithm it also
// times where in its exchange buffer the kernels' per-step records go (a short forward on zero
// weights at 16 places, about 7–13 ms on an H200; PRNN_PERSISTENT_EXCHANGE_PLACES in the README),
// since the place moves the step by up to 13 %; it synchronizes the device's default stream. A GPU
// call captures its launches (the GEMMs, and the step loop or the persistent kernel's cooperative
// launches) into a CUDA graph the first time it sees a set of tensor pointers and replays it while
// they stay the same (new pointers: one re-capture). Calls are asynchronous on `stream` (host
// tensors: synchronous, `stream` unused). Calls on one Rnn must not overlap; results are
// deterministic. Throws InvalidArgument for bad arguments (naming the argument, expected and
// given), Unsupported when the algorithm cannot run the problem (the reason of can_implement).
class Rnn {
 public:
  Rnn(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, Device device,
      RnnAlgo algo = RnnAlgo::Auto);
  ~Rnn();
  Rnn(Rnn&&) noexcept;
  Rnn& operator=(Rnn&&) noexcept;

  // Empty when `algo` can run this problem on `device` in this build; otherwise the reason.
  // Throws InvalidArgument for a bad desc, steps or batch.
  static std::string can_implement(const RnnDesc& desc, std::int64_t steps, std::int64_t batch,
                                   Device device, RnnAlgo algo);

  const RnnDesc& desc() const;
  std::int64_t steps() const;
  std::int64_t batch() const;
  Device device() const;
  RnnAlgo algo() const;               // the algorithm that runs (Auto resolved)
  const std::string& reason() const;  // why it was picked
  // Memory the constructor allocated, in bytes: the reserve a forward() leaves for the backward
  // (pre-activations, every layer's outputs, their gradients; host path: the copies of x, h0,
  // c0 and dparams) and the workspace (cuBLAS workspace, scratch, the persistent kernels'
  // exchange records and control words).
  std::size_t reserve_bytes() const;
  std::size_t workspace_bytes() const;

  // Training-mode forward: y (and hn, cn) from x, params, h0 (c0); keeps the reserve.
  // lengths: per-sequence lengths (see above), empty for all T; InvalidArgument names a bad entry.
  void forward(const TensorView& x, const TensorView& params, const TensorView& h0,
               const TensorView& c0, const TensorView& y, const TensorView& hn,
               const TensorView& cn, cudaStream_t stream = nullptr,
               std::span<const std::int32_t> lengths = {});
  // dx, dh0 (dc0) from dy, dhn (dcn) through the reserve of the last forward (same params and
  // lengths).
  void backward_data(const TensorView& params, const TensorView& dy, const TensorView& dhn,
                     const TensorView& dcn, const TensorView& dx, const TensorView& dh0,
                     const TensorView& dc0, cudaStream_t stream = nullptr);
  // dparams (overwritten) of the last forward / backward_data pair (same x, h0, c0).
  void backward_weights(const TensorView& x, const TensorView& h0, const TensorView& c0,
                        const TensorView& dparams, cudaStream_t stream = nullptr);
  // Synchronizes `stream` and throws RuntimeError if a kernel of this Rnn reported a failure
  // since the last check (a persistent kernel's wait that timed out: the outputs of that call
  // are not valid). Every call also throws for a failure already reported when it starts.
  void check(cudaStream_t stream = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prnn
