// The GEMM-RNN (the Persistent RNNs paper's baseline, and the fallback when W_hh does not fit on
// chip): cuBLAS GEMMs plus one elementwise kernel per step, for every cell in fp32; and the
// layer driver of the persistent kernels, which replace the per-step loop.
//
// Forward, per layer l and direction d (time reversed for d = 1), G gates, GH = G·H rows:
//   P[t] = in_t · W_ihᵀ                   all T steps in one GEMM    [T·B, I_l] x [I_l, GH]
//   vanilla, LSTM: P[t] += h_{t-1} · W_hhᵀ   one GEMM per step        [B, H] x [H, GH]
//   GRU:           Q[t]  = h_{t-1} · W_hhᵀ   one GEMM per step (kept apart: n needs r ⊙ it)
//   then the step kernel (step_kernels.h): biases, gate math, h_t into Y[l] (and c_t).
// Backward data, layers top-down, per direction the steps in reverse processing order:
//   dh = dY[t] + dQ[t+1] · W_hh (one GEMM) + the cell's carry, then the step kernel:
//   vanilla dP = dQ = dh ⊙ act'(a_t), act' taken from h_t in Y[l] (activation.cuh); LSTM dP = dQ
//   (4 rows) and the dc carry; GRU dP (da_ih) and dQ (da_hh) and the z ⊙ dh carry (gates.cuh).
//   dh0 = dQ[first] · W_hh (+ the GRU carry), dc0 = the LSTM carry; d(in) = Σ_d dP · W_ih.
// Residual layer l (RnnDesc::residual_at): its output, what layer l+1 reads (the user's y for
// the last layer), is R[l] = Y[l] + in_l (one masked add after the layer), Y[l] keeping the
// hidden states the recurrence and dW_hh use; backward: d(in_l) = dout_l + Σ_d dP · W_ih.
// Sequence lengths (forward's optional lengths, uploaded into a [B] buffer): the step kernels
// and the persistent finishers make padded steps identity steps (step_kernels.h): Y[l] there
// holds the state passed through, so h_{t-1} read from Y (the next step, dW_hh) is right; dP,
// dQ are 0 there, so the weight-gradient GEMMs need no mask. The dh passed through padded
// steps travels in a carry (the GRU's own; carry_h for vanilla and LSTM), added into dh0.
// Backward weights, GEMMs over all T·B rows:
//   dW_ih = dPᵀ · in;  dW_hh = dQᵀ · h_{t-1} (Y[l] shifted by one step, plus h0 at the first);
//   db_ih = Σ_rows dP, db_hh = Σ_rows dQ (GEMVs with ones); dQ is dP except for the GRU.
// The step loops of forward and backward data are captured once into a CUDA graph (on a private
// stream) and replayed on the caller's stream while the tensor pointers stay the same.
//
// Reserve (fp32): P, dP [L·D, T, B, GH] (vanilla: the GEMMs' sums, which the backward does not
// read; LSTM: the full gate pre-activations; GRU: a_ih); GRU: Q, dQ [L·D, T, B, 3H] (a_hh); LSTM: C [L·D, T, B, H] (c_t);
// gated cells: the initial state the backward needs [L·D, B, H] (LSTM c0, GRU h0; zeros when
// absent); Y [L, T, B, D·H] (every layer's output, the last one also written to the user's y);
// two [T, B, D·H] buffers for the gradient flowing between layers (L > 1); residual:
// R [T, B, D·H] for every residual layer but the last.
// Workspace: cuBLAS's, [B, H] for dQ[t+1] · W_hh, [B, H] for the carry (gated cells), [B, H]
// carry_h (vanilla, LSTM), ones, the lengths [B] (int32).
// cuBLAS: PEDANTIC math (fp32, no TF32), its workspace owned here (set after every
// cublasSetStream), so neither calls nor captures allocate. 16-bit layers (f16 / bf16 weights,
// run on fp32 copies) take TF32 tensor cores with fp32 accumulation for the GEMMs over all
// timesteps (P = in · W_ihᵀ, d(in), dW_ih, dW_hh): the 16-bit inputs and weights are exact in
// TF32, the fp32 operands (a lower layer's h, dP, dQ) are rounded to it (2^-11 relative); the
// per-step GEMMs of the recurrence and dh0 stay fp32.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gemm/skinny_gemm.h"
#include "gemm_rnn/step_kernels.h"
#include "persistent/rnn_kernels.h"
#include "prnn/rnn.h"
#include "prnn/tensor.h"

namespace prnn {
class CublasHandle;  // core/cublas.h
}  // namespace prnn

namespace prnn::gemm_rnn {

// Empty when the GEMM-RNN can run the problem (f32, 32-bit cuBLAS sizes);
// otherwise the reason. desc, steps and batch must already be valid.
std::string can_implement(const RnnDesc& desc, std::int64_t steps, std::int64_t batch);

// A CUDA graph captured from a sequence of launches and replayed while the key (the tensor
// pointers the launches bake in) stays the same.
class CachedGraph {
 public:
  using Key = std::array<const void*, 10>;
  CachedGraph() = default;
  ~CachedGraph();
  CachedGraph(const CachedGraph&) = delete;
  CachedGraph& operator=(const CachedGraph&) = delete;

  bool matches(const Key& key) const { return exec_ != nullptr && key == key_; }
  // Ends a capture begun on `capture` and keeps its graph for `key` (updating the executable
  // graph in place when the topology allows, else instantiating a new one).
  void end_capture(cudaStream_t capture, const Key& key);
  // Ends a capture after a failure and forgets the cached graph (nothrow).
  void abandon_capture(cudaStream_t capture) noexcept;
  void launch(cudaStream_t stream) const;

 private:
  void reset() noexcept;
  cudaGraphExec_t exec_ = nullptr;
  Key key_{};
};

// Raw fp32 device pointers, validated by prnn::Rnn; nullable ones as in prnn/rnn.h.
struct ForwardArgs {
  const float* x = nullptr;
  const float* params = nullptr;
  // A 16-bit layer's x and params as given (dtype16 BF16 or F16; else null): layer 0's GEMM over
  // all steps reads them straight (gemm16) instead of their fp32 copies, and so may the
  // persistent kernel its W_hh. Given these, x and layer 0's W_ih in `params` are read in fp32
  // only where forward_reads_f32_input() says so, and W_hh only where forward_reads_f32_w_hh()
  // does (x may be null, and those blocks of params unwritten, elsewhere).
  const void* x16 = nullptr;
  const void* params16 = nullptr;
  DType dtype16 = DType::F32;
  const float* h0 = nullptr;
  const float* c0 = nullptr;  // LSTM
  float* y = nullptr;
  float* hn = nullptr;
  float* cn = nullptr;  // LSTM
  std::span<const std::int32_t> lengths;  // host [B] in [1, T] (checked by prnn::Rnn), or empty
};

struct BackwardDataArgs {
  const float* params = nullptr;
  const float* dy = nullptr;
  const float* dhn = nullptr;
  const float* dcn = nullptr;  // LSTM
  float* dx = nullptr;
  float* dh0 = nullptr;
  float* dc0 = nullptr;  // LSTM
};

struct BackwardWeightsArgs {
  const float* x = nullptr;
  const float* h0 = nullptr;
  float* dparams = nullptr;
};

// How the recurrence of each layer direction runs once the input GEMM is done.
//   PerStepGemm  the GEMM-RNN above: per step one cuBLAS GEMM and the step kernel, in a graph.
//   Persistent   one cooperative launch of the persistent kernel (src/persistent/rnn_kernels.h)
//                per layer direction and pass, W_hh kept in registers; the input GEMM and the
//                launches of a call are replayed from a graph too (PersistentKnobs::graphs), so
//                a short sequence does not wait on the host's launch latency.
enum class Recurrence : std::uint8_t { PerStepGemm, Persistent };

// Debug and safety settings of the persistent kernels (defaults: a 2 s bound on every wait, no
// stall, tensor cores on). Read from the environment by the constructor; a malformed value
// (a whole number: decimal digits within the field's range) is an InvalidArgument naming it:
//   PRNN_PERSISTENT_TIMEOUT_MS=<ms>            bound on one wait
//   PRNN_PERSISTENT_STALL=<cta>:<step>:<ms>    CTA <cta> sleeps <ms> before step <step>
//   PRNN_PERSISTENT_TENSOR_CORES=0|1|forward   the 16-bit GRU/LSTM passes on tensor cores
//                                              (tiling.h): 0 none (both on the FMA kernel, for
//                                              A/B measurements), 1 forward and backward data,
//                                              forward: the forward only; a GRU the
//                                              gated warp rows hold (B <= 4), and an LSTM
//                                              they hold at 2 records per SM (H <= 792 on
//                                              132 SMs), run there whatever this says (0 also
//                                              keeps their forward's product on the FMA pipes)
//   PRNN_PERSISTENT_FINISH_BARRIER=0|1         overrides the tiling's finishers' barrier
//   PRNN_PERSISTENT_GRAPHS=0|1                 0: each call's launches enqueued directly, not
//                                              replayed from a graph
//   PRNN_PERSISTENT_WARP_ROWS=0|1              0: vanilla layers at small batches on the FMA
//                                              direct shapes instead of the warp-rows kernel,
//                                              and GRU / LSTM layers at B <= 4 on the FMA
//                                              staged or tensor-core shape instead of the
//                                              gated warp-rows kernels (both passes; tiling.h),
//                                              for A/B runs
//   PRNN_PERSISTENT_GATED_MMA=0|1|forward      0: the 16-bit gated warp-rows passes' products
//                                              on the FMA pipes (weights widened to fp32)
//                                              instead of tensor cores; forward: the
//                                              forward's only; for A/B runs
//   PRNN_PERSISTENT_INPUT_PROJECTION=0|1       where the warp-rows forward can compute W_ih x
//                                              itself: unset, for T <= 4 (tiling.h); 0 never
//                                              (the input GEMM), 1 at every T; for A/B runs
//   PRNN_PERSISTENT_EXCHANGE_PLACES=<n>        1..64 places of the exchange timed when the
//                                              layer is built, the fastest kept (default 16;
//                                              1: the buffer's start, untimed; for A/B runs)
//   PRNN_PERSISTENT_EXCHANGE_SPACING=<bytes>   bytes between two of those places: a multiple
//                                              of 128 up to 1 MiB (default 256; for A/B runs)
//   PRNN_SKINNY_GEMM=0|1                       the GEMMs of few rows (the input projection and
//                                              d(in) of a short call, dh0): unset, the skinny
//                                              kernel where skinny_auto_takes says
//                                              (gemm/skinny_gemm.h); 0 cuBLAS; 1 the skinny
//                                              kernel at every size; for A/B runs and tests
struct PersistentKnobs {
  std::uint64_t timeout_ns = 2'000'000'000ull;
  std::int32_t stall_cta = -1, stall_step = 0;
  std::uint64_t stall_ns = 0;
  persistent::TensorCores tensor_cores = persistent::TensorCores::ForwardBackward;
  // Overrides persistent::Tiling::finish_barrier (the FMA kernels' CTA barrier after the
  // finishers): -1 keeps the tiling's choice, 0 off, 1 on (PRNN_PERSISTENT_FINISH_BARRIER, for
  // A/B runs).
  std::int32_t finish_barrier = -1;
  // Whether a call's work (the GEMMs and the persistent launches) is captured once into a CUDA
  // graph and replayed (PRNN_PERSISTENT_GRAPHS=0 enqueues it directly, for A/B runs).
  bool graphs = true;
  // Whether layers at small batches may run on the warp-rows kernels, vanilla and gated
  // (PRNN_PERSISTENT_WARP_ROWS=0 keeps them on the other shapes, for A/B runs).
  bool warp_rows = true;
  // Which passes of a 16-bit GRU / LSTM on the gated warp rows may take their product on tensor
  // cores (PRNN_PERSISTENT_GATED_MMA=0 keeps the FMAs in both, =forward in the backward, for A/B
  // runs; persistent::tile).
  persistent::TensorCores gated_mma = persistent::TensorCores::ForwardBackward;
  // Whether a warp-rows forward computes W_ih x itself where it can, instead of an input GEMM
  // before the launch: -1 as persistent::wants_input_in_kernel decides by T, 0 never, 1 always
  // (PRNN_PERSISTENT_INPUT_PROJECTION, for A/B runs).
  std::int32_t input_projection = -1;
  // How many places of the exchange records GemmRnn times at construction, keeping the fastest
  // (GemmRnn::place_exchange; PRNN_PERSISTENT_EXCHANGE_PLACES, 1..64; 1: the buffer's start,
  // untimed, for A/B runs).
  std::int32_t exchange_places = 16;
  // Bytes between two of those places (PRNN_PERSISTENT_EXCHANGE_SPACING, a multiple of 128 up
  // to 1 MiB, for A/B runs).
  std::int32_t exchange_spacing = 256;
  // Which kernel the GEMMs of few rows take (PRNN_SKINNY_GEMM). A GEMM-per-step layer keeps
  // cuBLAS for every GEMM: it is the cuBLAS baseline.
  SkinnyChoice skinny_gemm = SkinnyChoice::Never;
  static PersistentKnobs from_environment();
};

// Empty when the persistent kernels can run the problem on `device`; otherwise the reason.
std::string can_implement_persistent(const RnnDesc& desc, std::int64_t steps, std::int64_t batch,
                                     int device);
// For a problem the persistent kernels can run: empty when Auto keeps them, else why it takes the
// per-step GEMMs (persistent::auto_prefers_gemm_per_step, with the tiling the layer would get).
std::string auto_prefers_gemm_per_step(const RnnDesc& desc, std::int64_t batch, int device);

class GemmRnn {
 public:
  // Allocates the reserve, the cuBLAS handle and workspace and the capture stream on `device`
  // (and, for Persistent, the exchange records and control words).
  GemmRnn(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, int device,
          Recurrence recurrence = Recurrence::PerStepGemm);
  ~GemmRnn();
  GemmRnn(const GemmRnn&) = delete;
  GemmRnn& operator=(const GemmRnn&) = delete;

  void forward(const ForwardArgs& args, cudaStream_t stream);
  // Whether forward() reads x and layer 0's W_ih in fp32 although ForwardArgs gives their 16-bit
  // copies: only where the persistent warp-rows forward projects layer 0's input itself.
  bool forward_reads_f32_input() const {
    return recurrence_ == Recurrence::Persistent && fused_input_.front();
  }
  // Whether forward() reads W_hh in fp32 although ForwardArgs gives the 16-bit params: not where
  // its persistent kernel is the gated warp rows' on tensor cores, which reads W_hh from the
  // 16-bit params (Params::w16). The tensor-core and FMA kernels read the fp32 copy: given W_hh
  // in 16 bits the tensor-core forward measured 1-2 % slower per step
  // (bench/results/h200/ab/w_hh16/).
  bool forward_reads_f32_w_hh() const {
    return !(recurrence_ == Recurrence::Persistent &&
             persistent::pass_kernel(tiling_, true) == persistent::PassKernel::GatedWarpRows &&
             tiling_.gated_warp_rows_mma);
  }
  void backward_data(const BackwardDataArgs& args, cudaStream_t stream);
  void backward_weights(const BackwardWeightsArgs& args, cudaStream_t stream);
  // Throws RuntimeError if a persistent kernel reported a failure (a wait that timed out) since
  // the last check; clears the report. Does not synchronize.
  void throw_if_failed();
  const persistent::Tiling& tiling() const { return tiling_; }
  std::size_t reserve_bytes() const;
  std::size_t workspace_bytes() const;

 private:
  // The launches of one call, in order, on `s` (the capture stream).
  void enqueue_forward(const ForwardArgs& args, cudaStream_t s);
  void enqueue_backward_data(const BackwardDataArgs& args, cudaStream_t s);
  void enqueue_backward_weights(const BackwardWeightsArgs& args, cudaStream_t s);
  // One call's launches, after throw_if_failed(): captured into `graph` (once per key) and
  // replayed on `stream`, or, for the persistent recurrence with graphs turned off, enqueued
  // directly on `stream`.
  void run_pass(CachedGraph& graph, const CachedGraph::Key& key, cudaStream_t stream,
                const std::function<void(cudaStream_t)>& enqueue);
  void bind_blas(cudaStream_t s);
  // The persistent launch of one layer direction (params filled but for the control fields),
  // over `steps` steps (-1: T).
  void launch_persistent(persistent::Pass pass, persistent::Params p, cudaStream_t s,
                         std::int64_t steps = -1);
  // The exchange zeroed and the control words at epoch 1, on `s`.
  void reset_exchange(cudaStream_t s);
  // Picks exchange_offset_ (constructor; knobs_.exchange_places > 1, no stall knob).
  void place_exchange();
  static constexpr std::int64_t kExchangeSteps = 64;    // steps a place is timed over, at most
  static constexpr std::int64_t kExchangeMinSteps = 8;  // ... and at least (T permitting)
  static constexpr int kExchangeRounds = 3;
  static constexpr double kExchangeBudgetSeconds = 8e-3;  // GPU time of all timed launches

  // Time of the s-th step processed by direction d: forward 0..T-1, reverse T-1..0.
  std::int64_t time_of(int d, std::int64_t s) const { return d == 0 ? s : T_ - 1 - s; }
  const RnnParamOffsets& offsets(std::int64_t l, int d) const {
    return offsets_[static_cast<std::size_t>(l * D_ + d)];
  }
  // Layer direction (l, d)'s block of a reserve buffer of `width` values per step and batch row.
  float* block(const DeviceBuffer& buf, std::int64_t l, int d, std::int64_t width) const {
    return buf.data_as<float>() + (l * D_ + d) * T_ * B_ * width;
  }
  float* pre(std::int64_t l, int d) const { return block(pre_, l, d, GH_); }     // P
  float* dpre(std::int64_t l, int d) const { return block(dpre_, l, d, GH_); }   // dP
  // Q, dQ: the W_hh side's pre-activations and gradients (P, dP except for the GRU).
  float* pre_h(std::int64_t l, int d) const { return gru_ ? block(pre_h_, l, d, GH_) : pre(l, d); }
  float* dpre_h(std::int64_t l, int d) const {
    return gru_ ? block(dpre_h_, l, d, GH_) : dpre(l, d);
  }
  float* cell(std::int64_t l, int d) const { return block(cell_, l, d, H_); }  // LSTM c_t
  float* initial(std::int64_t l, int d) const {  // LSTM c0 / GRU h0 (zeros when absent)
    return initial_.data_as<float>() + (l * D_ + d) * B_ * H_;
  }
  // Layer l's outputs Y [T, B, D·H]. y_ holds each layer's between two slots of B·D·H floats,
  // where backward_weights puts h0 so that dW_hh's GEMM reads h_{t-1} of every step as one
  // operand (direction 0: the slot before t = 0; direction 1: the slot after t = T − 1).
  float* layer_out(std::int64_t l) const {
    return y_.data_as<float>() + (l * (T_ + 2) + 1) * B_ * D_ * H_;
  }
  // What layer l reads [T, B, I_l]: x, or the output of layer l-1 (R[l-1] if residual, else Y).
  const float* layer_in(std::int64_t l, const float* x) const {
    if (l == 0) return x;
    const std::int64_t slot = residual_slot_[static_cast<std::size_t>(l - 1)];
    return slot < 0 ? layer_out(l - 1) : residual_.data_as<float>() + slot * T_ * B_ * D_ * H_;
  }
  // The lengths of the last forward on the device, null when every sequence has T steps.
  const std::int32_t* lengths() const {
    return masked_ ? lengths_.data_as<std::int32_t>() : nullptr;
  }

  RnnDesc desc_;
  Activation act_ = Activation::ReLU;  // vanilla cells
  bool lstm_ = false, gru_ = false;
  std::int64_t T_ = 0, B_ = 0, H_ = 0, L_ = 0, GH_ = 0;
  int D_ = 1;
  std::vector<RnnParamOffsets> offsets_;  // [L·D]
  DeviceBuffer pre_, dpre_, pre_h_, dpre_h_, cell_, initial_, y_, dlayer_[2];  // reserve
  DeviceBuffer residual_;                 // reserve: R of the residual layers but the last
  std::vector<std::int64_t> residual_slot_;  // [L] slot of layer l in residual_, -1: none
  DeviceBuffer dh_, carry_, carry_h_, ones_, lengths_;  // workspace
  bool masked_ = false;  // the last forward had a sequence shorter than T
  std::unique_ptr<CublasHandle> blas_;  // with its workspace
  cudaStream_t capture_ = nullptr;
  CachedGraph forward_graph_, backward_graph_, weights_graph_;

  Recurrence recurrence_ = Recurrence::PerStepGemm;
  persistent::Tiling tiling_;
  PersistentKnobs knobs_;
  // [L] whether layer l's persistent forward computes its input projection in the kernel (when
  // the call's input is also 16-byte aligned; persistent::fuses_input_projection).
  std::vector<bool> fused_input_;
  DeviceBuffer exchange_, control_;
  std::size_t exchange_offset_ = 0;  // where in exchange_ the records start (place_exchange)
  unsigned* status_host_ = nullptr;  // mapped pinned word the kernels report failures into
};

}  // namespace prnn::gemm_rnn
