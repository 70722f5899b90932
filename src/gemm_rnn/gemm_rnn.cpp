// The GEMM-RNN's host side: the reserve, the cuBLAS calls of every step, the step-kernel
// launches, and the CUDA graphs they are captured into (algorithm in gemm_rnn.h).
#if PRNN_WITH_CUDA

#include "gemm_rnn/gemm_rnn.h"

#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cublas.h"
#include "core/cuda_check.h"
#include "core/event_timer.h"
#include "core/knob.h"
#include "persistent/tiling.h"
#include "prnn/device.h"

namespace prnn::gemm_rnn {
namespace {

std::size_t f32_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); }

Activation activation_of(Cell cell) {
  switch (cell) {
    case Cell::ReLU: return Activation::ReLU;
    case Cell::ClippedReLU: return Activation::ClippedReLU;
    case Cell::Tanh: return Activation::Tanh;
    case Cell::GRU:
    case Cell::LSTM: break;
  }
  return Activation::ReLU;  // unused by the gated cells
}

// The GEMMs over all timesteps (input projection, d(in), dW_ih, dW_hh): TF32 for 16-bit layers,
// whose inputs and weights TF32 holds exactly; the desc's choice for f32 layers. A 16-bit layer
// 0's input projection reads its 16-bit x and W_ih straight instead (gemm16, the same products:
// H200, bf16, T = 256, 0.1–4.9 % faster forward at B = 2, 1.6–4.9 % at B = 4,
// bench/results/h200/ab/prepared2/, `gemm16`).
GemmMath all_steps_math(const RnnDesc& desc) {
  return desc.weight_dtype == DType::F32 ? desc.gemm_math : GemmMath::Tf32;
}

}  // namespace

std::string can_implement(const RnnDesc& desc, std::int64_t steps, std::int64_t batch) {
  if (desc.weight_dtype == DType::F64)
    return "f64 runs on the CPU reference only (host tensors); the GPU takes f32, f16 or bf16";
  const std::int64_t H = desc.hidden_size, DH = desc.directions() * H, GH = desc.gate_rows();
  const std::int64_t widest = std::max({desc.input_size, DH, GH});
  if (steps * batch > INT32_MAX || batch * GH > INT32_MAX || widest > INT32_MAX)
    return fmt::format("cuBLAS takes 32-bit sizes: steps x batch = {}, batch x gates x hidden = "
                       "{}, widest input or gate rows = {} (each must be < 2^31)",
                       steps * batch, batch * GH, widest);
  return {};
}

namespace {

constexpr std::uint64_t kMostKnob = std::numeric_limits<std::uint64_t>::max();

// A whole number from `least` to `most` and a multiple of `step`: decimal digits only (no sign,
// no spaces), else an InvalidArgument naming the knob, what it expects and what it got.
std::uint64_t parse_knob(const char* name, const std::string& text, const std::string& what,
                         std::uint64_t least = 0, std::uint64_t most = kMostKnob,
                         std::uint64_t step = 1) {
  bool digits = !text.empty();
  for (const char c : text) digits = digits && c >= '0' && c <= '9';
  unsigned long long v = 0;
  if (digits) {
    try {
      v = std::stoull(text);
    } catch (const std::out_of_range&) {
      digits = false;
    }
  }
  PRNN_EXPECT(digits && v >= least && v <= most && v % step == 0, "{}: expected {}, got '{}'", name,
              what, text);
  return v;
}

// The knob `name` as parse_knob reads it; unset or empty: nullopt.
std::optional<std::uint64_t> number_knob(const char* name, const std::string& what,
                                         std::uint64_t least = 0, std::uint64_t most = kMostKnob,
                                         std::uint64_t step = 1) {
  const char* t = std::getenv(name);
  if (t == nullptr || *t == '\0') return std::nullopt;
  return parse_knob(name, t, what, least, most, step);
}

// The persistent kernels' tiling of a layer of `desc` at `batch` on `device` under `knobs`: the
// one call behind the check, Auto's choice and the layer itself.
persistent::Tiling layer_tiling(const RnnDesc& desc, std::int64_t batch, int device,
                                const PersistentKnobs& knobs) {
  return persistent::tile(gate_count(desc.cell), desc.hidden_size, batch,
                          device_info(device).sm_count, desc.weight_dtype, knobs.tensor_cores,
                          knobs.warp_rows, knobs.gated_mma);
}

// A knob of which passes take something on tensor cores: 0 none, 1 both, forward the forward
// only; unset or empty: nullopt.
std::optional<persistent::TensorCores> passes_knob(const char* name) {
  const char* t = std::getenv(name);
  if (t == nullptr || *t == '\0') return std::nullopt;
  const std::string text = t;
  using persistent::TensorCores;
  PRNN_EXPECT(text == "0" || text == "1" || text == "forward",
              "{}: expected 0, 1 or forward, got '{}'", name, text);
  return text == "0"   ? TensorCores::Off
         : text == "1" ? TensorCores::ForwardBackward
                       : TensorCores::Forward;
}

}  // namespace

PersistentKnobs PersistentKnobs::from_environment() {
  PersistentKnobs k;
  if (const auto ms = number_knob("PRNN_PERSISTENT_TIMEOUT_MS", "a whole number of milliseconds", 0,
                                  kMostKnob / 1'000'000ull))
    k.timeout_ns = *ms * 1'000'000ull;
  if (const auto passes = passes_knob("PRNN_PERSISTENT_TENSOR_CORES")) k.tensor_cores = *passes;
  if (const std::optional<bool> on = switch_knob("PRNN_PERSISTENT_FINISH_BARRIER"))
    k.finish_barrier = *on ? 1 : 0;
  if (const std::optional<bool> on = switch_knob("PRNN_PERSISTENT_GRAPHS")) k.graphs = *on;
  if (const std::optional<bool> on = switch_knob("PRNN_PERSISTENT_WARP_ROWS")) k.warp_rows = *on;
  if (const auto passes = passes_knob("PRNN_PERSISTENT_GATED_MMA")) k.gated_mma = *passes;
  if (const std::optional<bool> on = switch_knob("PRNN_PERSISTENT_INPUT_PROJECTION"))
    k.input_projection = *on ? 1 : 0;
  if (const auto n = number_knob("PRNN_PERSISTENT_EXCHANGE_PLACES",
                                 "a whole number of places from 1 to 64", 1, 64))
    k.exchange_places = static_cast<std::int32_t>(*n);
  if (const auto n = number_knob("PRNN_PERSISTENT_EXCHANGE_SPACING",
                                 "a whole number of bytes from 128 to 1048576, a multiple of 128",
                                 128, 1u << 20, 128))
    k.exchange_spacing = static_cast<std::int32_t>(*n);
  k.skinny_gemm = skinny_choice_from_environment();
  if (const char* t = std::getenv("PRNN_PERSISTENT_STALL"); t != nullptr && *t != '\0') {
    const std::string text = t, what = "<cta>:<step>:<milliseconds>";
    const std::size_t a = text.find(':'), b = a == std::string::npos ? a : text.find(':', a + 1);
    PRNN_EXPECT(b != std::string::npos, "PRNN_PERSISTENT_STALL: expected {}, got '{}'", what, text);
    constexpr std::uint64_t kMostInt = std::numeric_limits<std::int32_t>::max();
    k.stall_cta = static_cast<std::int32_t>(
        parse_knob("PRNN_PERSISTENT_STALL", text.substr(0, a), what, 0, kMostInt));
    k.stall_step = static_cast<std::int32_t>(
        parse_knob("PRNN_PERSISTENT_STALL", text.substr(a + 1, b - a - 1), what, 0, kMostInt));
    k.stall_ns =
        parse_knob("PRNN_PERSISTENT_STALL", text.substr(b + 1), what, 0, kMostKnob / 1'000'000ull) *
        1'000'000ull;
  }
  return k;
}

std::string can_implement_persistent(const RnnDesc& desc, std::int64_t steps, std::int64_t batch,
                                     int device) {
  if (std::string why = can_implement(desc, steps, batch); !why.empty()) return why;
  if (steps > INT32_MAX)
    return fmt::format("the persistent kernels take steps < 2^31, got {}", steps);
  const persistent::Tiling t =
      layer_tiling(desc, batch, device, PersistentKnobs::from_environment());
  if (!t.runs()) return t.reason;
  for (persistent::Pass pass : {persistent::Pass::Forward, persistent::Pass::BackwardData})
    if (std::string why = persistent::prepare(pass, t, activation_of(desc.cell), device);
        !why.empty())
      return why;
  return {};
}

std::string auto_prefers_gemm_per_step(const RnnDesc& desc, std::int64_t batch, int device) {
  const persistent::Tiling t =
      layer_tiling(desc, batch, device, PersistentKnobs::from_environment());
  PRNN_ASSERT(t.runs());  // can_implement_persistent said so
  return persistent::auto_prefers_gemm_per_step(t, desc.hidden_size, batch,
                                                device_info(device).sm_count);
}

// ---- CachedGraph ---------------------------------------------------------------------------

CachedGraph::~CachedGraph() { reset(); }

void CachedGraph::reset() noexcept {
  if (exec_ != nullptr) PRNN_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec_));
  exec_ = nullptr;
  key_ = {};
}

void CachedGraph::end_capture(cudaStream_t capture, const Key& key) {
  cudaGraph_t graph = nullptr;
  PRNN_CUDA_CHECK(cudaStreamEndCapture(capture, &graph));
  bool updated = false;
  if (exec_ != nullptr) {
    // Same topology (same T, L, D; cuBLAS picked the same kernels): patch the parameters.
    cudaGraphExecUpdateResultInfo info{};
    updated = cudaGraphExecUpdate(exec_, graph, &info) == cudaSuccess;
    if (!updated) {
      (void)cudaGetLastError();  // the failed update is not an error: instantiate instead
      reset();
    }
  }
  if (!updated) {
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    if (err != cudaSuccess) {
      exec_ = nullptr;
      PRNN_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
      PRNN_CUDA_CHECK(err);
    }
  }
  PRNN_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
  key_ = key;
}

void CachedGraph::abandon_capture(cudaStream_t capture) noexcept {
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(capture, &graph) == cudaSuccess && graph != nullptr)
    (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  reset();
}

void CachedGraph::launch(cudaStream_t stream) const {
  PRNN_ASSERT(exec_ != nullptr);
  PRNN_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

// ---- GemmRnn -------------------------------------------------------------------------------

GemmRnn::GemmRnn(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, int device,
                 Recurrence recurrence)
    : desc_(desc),
      act_(activation_of(desc.cell)),
      lstm_(desc.cell == Cell::LSTM),
      gru_(desc.cell == Cell::GRU),
      T_(steps),
      B_(batch),
      H_(desc.hidden_size),
      L_(desc.layers),
      GH_(desc.gate_rows()),
      D_(desc.directions()),
      recurrence_(recurrence) {
  PRNN_CUDA_CHECK(cudaSetDevice(device));
  for (std::int64_t l = 0; l < L_; ++l)
    for (int d = 0; d < D_; ++d) offsets_.push_back(rnn_param_offsets(desc, l, d));
  const std::int64_t TBH = T_ * B_ * H_, LD = L_ * D_;
  pre_ = DeviceBuffer(f32_bytes(LD * T_ * B_ * GH_));
  dpre_ = DeviceBuffer(f32_bytes(LD * T_ * B_ * GH_));
  if (gru_) {
    pre_h_ = DeviceBuffer(f32_bytes(LD * T_ * B_ * GH_));
    dpre_h_ = DeviceBuffer(f32_bytes(LD * T_ * B_ * GH_));
  }
  if (lstm_) cell_ = DeviceBuffer(f32_bytes(LD * TBH));
  if (lstm_ || gru_) {
    initial_ = DeviceBuffer(f32_bytes(LD * B_ * H_));
    carry_ = DeviceBuffer(f32_bytes(B_ * H_));
  }
  if (!gru_) carry_h_ = DeviceBuffer(f32_bytes(B_ * H_));
  lengths_ = DeviceBuffer(static_cast<std::size_t>(B_) * sizeof(std::int32_t));
  y_ = DeviceBuffer(f32_bytes(L_ * (T_ + 2) * B_ * D_ * H_));  // layer_out: the outputs, slots
  std::int64_t residual_layers = 0;
  for (std::int64_t l = 0; l < L_; ++l)
    residual_slot_.push_back(desc.residual_at(l) && l < L_ - 1 ? residual_layers++ : -1);
  if (residual_layers > 0) residual_ = DeviceBuffer(f32_bytes(residual_layers * D_ * TBH));
  if (L_ > 1)
    for (DeviceBuffer& b : dlayer_) b = DeviceBuffer(f32_bytes(D_ * TBH));
  dh_ = DeviceBuffer(f32_bytes(B_ * H_));
  ones_ = DeviceBuffer(f32_bytes(T_ * B_));
  const std::vector<float> host_ones(static_cast<std::size_t>(T_ * B_), 1.0f);
  ones_.copy_from_host(host_ones.data(), f32_bytes(T_ * B_));

  // PEDANTIC math keeps fp32 GEMMs in fp32 (no TF32, no emulation, whatever the environment
  // says); the workspace is ours, so neither calls nor graph captures allocate.
  blas_ = std::make_unique<CublasHandle>(GemmMath::Fp32);
  blas_->own_workspace(device);
  PRNN_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking));

  if (recurrence_ == Recurrence::Persistent) {
    knobs_ = PersistentKnobs::from_environment();
    tiling_ = layer_tiling(desc, B_, device, knobs_);
    PRNN_ASSERT(tiling_.runs());  // can_implement_persistent said so
    if (knobs_.finish_barrier >= 0) tiling_.finish_barrier = knobs_.finish_barrier != 0;
    for (std::int64_t l = 0; l < L_; ++l)
      fused_input_.push_back(
          persistent::wants_input_in_kernel(T_, knobs_.input_projection) &&
          persistent::fuses_input_projection(tiling_, desc.layer_input_size(l), act_, device));
    exchange_ = DeviceBuffer(persistent::exchange_bytes(tiling_, B_) +
                             static_cast<std::size_t>(knobs_.exchange_places - 1) *
                                 static_cast<std::size_t>(knobs_.exchange_spacing));
    control_ = DeviceBuffer(persistent::kControlWords * sizeof(unsigned));
    PRNN_CUDA_CHECK(cudaHostAlloc(&status_host_, sizeof(unsigned), cudaHostAllocMapped));
    *status_host_ = 0;
    if (knobs_.exchange_places > 1 && knobs_.stall_cta < 0) place_exchange();
    reset_exchange(nullptr);
    PRNN_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
}

void GemmRnn::reset_exchange(cudaStream_t s) {
  PRNN_CUDA_CHECK(cudaMemsetAsync(exchange_.data(), 0, exchange_.bytes(), s));
  static const unsigned control[persistent::kControlWords] = {0, 1, 0, 0};  // epoch 1: tags never 0
  PRNN_CUDA_CHECK(
      cudaMemcpyAsync(control_.data(), control, sizeof(control), cudaMemcpyHostToDevice, s));
}

// Every CTA reads all of a step's records each step, and where they sit in L2 moves the step by
// up to 13 % (bench/results/h200/ab/placement/). The exchange alone, placed at every 128 B of a
// 2 MiB page, steps in 1.75–2.47 µs with no address bit worth more than 1 % of it
// (ab/exchange_places/lab/), so no fixed offset is right everywhere. So the place is measured:
// a forward of layer 0 on zero weights and inputs, at each of exchange_places offsets
// exchange_spacing bytes apart (kExchangeRounds rounds, each offset's fastest kept), from a
// zeroed exchange each time; the fastest offset is kept. (The lab's step varies in bands several
// KiB wide, ab/exchange_places/lab/exchange_place.png, so 16 places 256 B apart may all sit in
// one band; PRNN_PERSISTENT_EXCHANGE_SPACING is there to measure wider spacings.) A first launch at
// the buffer's start (which also warms the weights' and the code's caches) gives the step's length,
// and the timed launches then take as many steps, from kExchangeMinSteps to kExchangeSteps (and T
// at most), as keep all of them within about kExchangeBudgetSeconds: a layer of long steps, whose
// step the exchange's place moves least, is not held up for long. It writes only the reserve's
// first layer (rewritten by every forward). Not under the stall knob (a debug run's CTA would stall
// in every timed launch).
void GemmRnn::place_exchange() {
  const std::int64_t most = std::min<std::int64_t>(T_, kExchangeSteps);
  DeviceBuffer zeros(f32_bytes(GH_ * H_ + 2 * GH_));  // W_hh, b_ih, b_hh
  PRNN_CUDA_CHECK(cudaMemsetAsync(zeros.data(), 0, zeros.bytes(), capture_));
  PRNN_CUDA_CHECK(cudaMemsetAsync(pre(0, 0), 0, f32_bytes(most * B_ * GH_), capture_));
  if (lstm_ || gru_)
    PRNN_CUDA_CHECK(cudaMemsetAsync(initial(0, 0), 0, f32_bytes(B_ * H_), capture_));
  persistent::Params p;
  p.t_first = 0;
  p.t_step = 1;
  p.w = zeros.data_as<const float>();
  p.b_ih = p.w + GH_ * H_;
  p.b_hh = p.b_ih + GH_;
  p.pre = pre(0, 0);
  p.out = layer_out(0);
  p.out_stride = D_ * H_;
  if (lstm_ || gru_) p.initial = initial(0, 0);
  if (lstm_) p.cell = cell(0, 0);
  if (gru_) p.pre_h = pre_h(0, 0);
  EventTimer timer(capture_);
  // One launch of `steps` steps at `place`; its seconds, or nothing if it timed out (CTAs not
  // co-resident: the status word stays set and the first call reports it).
  auto time_place = [&](int place, std::int64_t steps) -> std::optional<double> {
    exchange_offset_ =
        static_cast<std::size_t>(place) * static_cast<std::size_t>(knobs_.exchange_spacing);
    reset_exchange(capture_);
    timer.start();
    launch_persistent(persistent::Pass::Forward, p, capture_, steps);
    timer.stop();
    const double seconds = timer.seconds();
    if (*static_cast<volatile unsigned*>(status_host_) != 0) return std::nullopt;
    return seconds;
  };
  // The fastest place, or nothing once a launch timed out (the buffer's start is kept then).
  auto fastest = [&]() -> std::optional<std::ptrdiff_t> {
    const std::optional<double> first = time_place(0, most);
    if (!first) return std::nullopt;
    const double launches = static_cast<double>(kExchangeRounds * knobs_.exchange_places);
    const double step_seconds = std::max(*first / static_cast<double>(most), 1e-9);
    const auto fitting =
        static_cast<std::int64_t>(kExchangeBudgetSeconds / (launches * step_seconds));
    const std::int64_t steps = std::min(most, std::max(kExchangeMinSteps, fitting));
    std::vector<double> best(static_cast<std::size_t>(knobs_.exchange_places), 1e30);
    for (int round = 0; round < kExchangeRounds; ++round)
      for (int place = 0; place < knobs_.exchange_places; ++place) {
        const std::optional<double> seconds = time_place(place, steps);
        if (!seconds) return std::nullopt;
        double& b = best[static_cast<std::size_t>(place)];
        b = std::min(b, *seconds);
      }
    return std::min_element(best.begin(), best.end()) - best.begin();
  };
  exchange_offset_ = static_cast<std::size_t>(fastest().value_or(0)) *
                     static_cast<std::size_t>(knobs_.exchange_spacing);
}

GemmRnn::~GemmRnn() {
  if (capture_ != nullptr) PRNN_CUDA_CHECK_NOTHROW(cudaStreamDestroy(capture_));
  if (status_host_ != nullptr) PRNN_CUDA_CHECK_NOTHROW(cudaFreeHost(status_host_));
}

std::size_t GemmRnn::reserve_bytes() const {
  return pre_.bytes() + dpre_.bytes() + pre_h_.bytes() + dpre_h_.bytes() + cell_.bytes() +
         initial_.bytes() + y_.bytes() + dlayer_[0].bytes() + dlayer_[1].bytes() +
         residual_.bytes();
}

std::size_t GemmRnn::workspace_bytes() const {
  return blas_->workspace_bytes() + dh_.bytes() + carry_.bytes() + carry_h_.bytes() +
         ones_.bytes() + lengths_.bytes() + exchange_.bytes() + control_.bytes();
}

void GemmRnn::throw_if_failed() {
  if (status_host_ == nullptr) return;
  volatile unsigned* word = status_host_;
  const unsigned status = *word;
  if (status == 0) return;
  *word = 0;
  throw RuntimeError(
      "persistent RNN kernel",
      fmt::format("a CTA waited more than {} ms for another CTA's step (a CTA that was not "
                  "co-resident or stalled); the outputs of that call are not valid",
                  knobs_.timeout_ns / 1'000'000ull),
      __FILE__, __LINE__);
}

void GemmRnn::launch_persistent(persistent::Pass pass, persistent::Params p, cudaStream_t s,
                                std::int64_t steps) {
  p.hidden = static_cast<std::int32_t>(H_);
  p.batch = static_cast<std::int32_t>(B_);
  p.steps = static_cast<std::int32_t>(steps < 0 ? T_ : steps);
  p.act = act_;
  p.exchange =
      reinterpret_cast<float4*>(static_cast<std::byte*>(exchange_.data()) + exchange_offset_);
  p.control = control_.data_as<unsigned>();
  p.status_host = status_host_;
  p.timeout_ns = knobs_.timeout_ns;
  p.stall_cta = knobs_.stall_cta;
  p.stall_step = knobs_.stall_step;
  p.stall_ns = knobs_.stall_ns;
  p.finish_barrier = tiling_.finish_barrier;
  persistent::launch(pass, tiling_, p, s);
}

void GemmRnn::bind_blas(cudaStream_t s) {
  blas_->bind(s);
}

void GemmRnn::enqueue_forward(const ForwardArgs& a, cudaStream_t s) {
  const std::int64_t BH = B_ * H_, DH = D_ * H_, BGH = B_ * GH_;
  CublasHandle& h = *blas_;
  for (std::int64_t l = 0; l < L_; ++l) {
    const std::int64_t I = desc_.layer_input_size(l);
    const float* in = layer_in(l, a.x);  // [T, B, I]
    float* Y = layer_out(l);              // [T, B, D·H]
    const bool residual = desc_.residual_at(l);
    // The user's y straight from the step (last layer), else written by the residual add below.
    float* user_y = l == L_ - 1 && !residual ? a.y : nullptr;
    for (int d = 0; d < D_; ++d) {
      const RnnParamOffsets& o = offsets(l, d);
      float* P = pre(l, d);  // [T, B, GH]
      // The persistent warp-rows forward computes W_ih x itself (and P stays unwritten: the
      // vanilla backward does not read it), else one GEMM over all steps.
      const bool fused = recurrence_ == Recurrence::Persistent &&
                         fused_input_[static_cast<std::size_t>(l)] &&
                         reinterpret_cast<std::uintptr_t>(in) % 16 == 0;
      if (!fused && l == 0 && a.x16 != nullptr && a.params16 != nullptr)
        gemm16(h, false, true, T_ * B_, GH_, I, a.x16, I,
               static_cast<const std::uint16_t*>(a.params16) + o.w_ih, I, a.dtype16, 0.0f, P, GH_);
      else if (!fused)
        rows_gemm(h, knobs_.skinny_gemm, true, T_ * B_, GH_, I, in, I, a.params + o.w_ih, I,
                  0.0f, P, GH_, all_steps_math(desc_));
      // The gated cells' initial state the backward needs: LSTM c0, GRU h0 (zeros if absent).
      const float* user_init = lstm_ ? a.c0 : gru_ ? a.h0 : nullptr;
      if (lstm_ || gru_) {
        if (user_init != nullptr)
          PRNN_CUDA_CHECK(cudaMemcpyAsync(initial(l, d), user_init + (l * D_ + d) * BH,
                                          f32_bytes(BH), cudaMemcpyDeviceToDevice, s));
        else
          PRNN_CUDA_CHECK(cudaMemsetAsync(initial(l, d), 0, f32_bytes(BH), s));
      }
      if (recurrence_ == Recurrence::Persistent) {
        persistent::Params p;
        p.t_first = d == 0 ? 0 : static_cast<std::int32_t>(T_ - 1);
        p.t_step = d == 0 ? 1 : -1;
        p.w = a.params + o.w_hh;
        if (a.params16 != nullptr && !forward_reads_f32_w_hh()) {
          p.w16 = static_cast<const std::uint16_t*>(a.params16) + o.w_hh;
          p.w16_type = a.dtype16;
        }
        p.pre = P;
        if (fused) {
          p.x = in;
          p.w_ih = a.params + o.w_ih;
          p.input_size = static_cast<std::int32_t>(I);
        }
        p.b_ih = a.params + o.b_ih;
        p.b_hh = a.params + o.b_hh;
        p.h0 = a.h0 != nullptr ? a.h0 + (l * D_ + d) * BH : nullptr;
        p.out = Y + d * H_;
        p.out2 = user_y != nullptr ? user_y + d * H_ : nullptr;
        p.out_stride = DH;
        p.lengths = lengths();
        p.hn = a.hn != nullptr ? a.hn + (l * D_ + d) * BH : nullptr;
        if (lstm_ || gru_) p.initial = initial(l, d);
        if (lstm_) {
          p.cell = cell(l, d);
          p.cn = a.cn != nullptr ? a.cn + (l * D_ + d) * BH : nullptr;
        }
        if (gru_) p.pre_h = pre_h(l, d);
        launch_persistent(persistent::Pass::Forward, p, s);
        continue;
      }
      for (std::int64_t step = 0; step < T_; ++step) {
        const std::int64_t t = time_of(d, step);
        const float* h_prev = nullptr;  // [B, H] rows ld apart; null: zeros
        std::int64_t ld = DH;
        if (step > 0) {
          h_prev = Y + time_of(d, step - 1) * B_ * DH + d * H_;
        } else if (a.h0 != nullptr) {
          h_prev = a.h0 + (l * D_ + d) * BH;
          ld = H_;
        }
        float* out = Y + t * B_ * DH + d * H_;
        float* out2 = user_y != nullptr ? user_y + t * B_ * DH + d * H_ : nullptr;
        const bool last = step == T_ - 1;
        if (!lstm_ && !gru_) {
          if (h_prev != nullptr)
            gemm(h, false, true, B_, H_, H_, h_prev, ld, a.params + o.w_hh, H_, 1.0f, P + t * BH,
                 H_);
          ForwardStepParams p;
          p.batch = static_cast<std::int32_t>(B_);
          p.hidden = static_cast<std::int32_t>(H_);
          p.pre = P + t * BH;
          p.b_ih = a.params + o.b_ih;
          p.b_hh = a.params + o.b_hh;
          p.out = out;
          p.out2 = out2;
          p.out_stride = DH;
          p.hn = last && a.hn != nullptr ? a.hn + (l * D_ + d) * BH : nullptr;
          p.lengths = lengths();
          p.t = static_cast<std::int32_t>(t);
          p.h_prev = h_prev;
          p.h_prev_stride = ld;
          launch_forward_step(act_, p, s);
          continue;
        }
        // Gated cells: LSTM adds W_hh h_{t-1} into P; the GRU keeps it apart in Q.
        float* target = gru_ ? pre_h(l, d) + t * BGH : P + t * BGH;
        if (h_prev != nullptr)
          gemm(h, false, true, B_, GH_, H_, h_prev, ld, a.params + o.w_hh, H_, gru_ ? 0.0f : 1.0f,
               target, GH_);
        GatedForwardStepParams p;
        p.batch = static_cast<std::int32_t>(B_);
        p.hidden = static_cast<std::int32_t>(H_);
        p.pre = P + t * BGH;
        p.pre_h = gru_ ? target : nullptr;
        p.has_h = h_prev != nullptr;
        p.b_ih = a.params + o.b_ih;
        p.b_hh = a.params + o.b_hh;
        p.h_prev = h_prev;
        p.h_prev_stride = ld;
        if (lstm_) {
          p.c_prev = step == 0 ? initial(l, d) : cell(l, d) + time_of(d, step - 1) * BH;
          p.c = cell(l, d) + t * BH;
          p.cn = last && a.cn != nullptr ? a.cn + (l * D_ + d) * BH : nullptr;
        }
        p.out = out;
        p.out2 = out2;
        p.out_stride = DH;
        p.hn = last && a.hn != nullptr ? a.hn + (l * D_ + d) * BH : nullptr;
        p.lengths = lengths();
        p.t = static_cast<std::int32_t>(t);
        launch_gated_forward_step(lstm_, p, s);
      }
    }
    if (residual) {  // R[l] = Y[l] + in_l (0 at padding); the last layer's goes to the user's y
      MaskedAddParams p;
      p.rows = T_ * B_;
      p.batch = static_cast<std::int32_t>(B_);
      p.width = static_cast<std::int32_t>(DH);
      p.a = Y;
      p.b = in;
      p.out = l == L_ - 1 ? a.y : const_cast<float*>(layer_in(l + 1, a.x));
      p.lengths = lengths();
      launch_masked_add(p, s);
    }
  }
}

void GemmRnn::enqueue_backward_data(const BackwardDataArgs& a, cudaStream_t s) {
  const std::int64_t BH = B_ * H_, DH = D_ * H_, BGH = B_ * GH_;
  CublasHandle& h = *blas_;
  const float* dout = a.dy;  // dL/d(output of layer l), [T, B, D·H]
  for (std::int64_t l = L_ - 1; l >= 0; --l) {
    const std::int64_t I = desc_.layer_input_size(l);
    // dL/d(input of layer l): the user's dx for layer 0 (null: not wanted), else a buffer.
    float* din = l == 0 ? a.dx : dlayer_[l % 2].data_as<float>();
    for (int d = 0; d < D_; ++d) {
      const RnnParamOffsets& o = offsets(l, d);
      const float* P = pre(l, d);
      float* dP = dpre(l, d);
      float* dQ = dpre_h(l, d);
      const float* Y = layer_out(l);
      if (recurrence_ == Recurrence::Persistent) {
        persistent::Params p;
        p.t_first = d == 0 ? static_cast<std::int32_t>(T_ - 1) : 0;  // reverse processing order
        p.t_step = d == 0 ? -1 : 1;
        p.w = a.params + o.w_hh;
        p.pre = const_cast<float*>(P);  // read only in this pass
        p.dy = dout + d * H_;
        p.dy_stride = DH;
        p.dhn = a.dhn != nullptr ? a.dhn + (l * D_ + d) * BH : nullptr;
        p.dpre = dP;
        if (lstm_ || gru_) {
          p.initial = initial(l, d);
          p.carry = carry_.data_as<float>();
        }
        p.lengths = lengths();
        if (!gru_) p.carry_h = carry_h_.data_as<float>();
        if (lstm_) {
          p.cell = cell(l, d);
          p.dcn = a.dcn != nullptr ? a.dcn + (l * D_ + d) * BH : nullptr;
        }
        // h_t (vanilla: act'(a_t) from it) and the GRU's h_{t-1}, read only in this pass.
        p.out = const_cast<float*>(Y) + d * H_;
        p.out_stride = DH;
        if (gru_) {
          p.pre_h = pre_h(l, d);
          p.dpre_h = dQ;
        }
        launch_persistent(persistent::Pass::BackwardData, p, s);
      }
      for (std::int64_t step = T_ - 1; step >= 0 && recurrence_ == Recurrence::PerStepGemm;
           --step) {  // reverse processing order
        const std::int64_t t = time_of(d, step);
        const bool first = step == T_ - 1;  // the first step processed
        const float* dh = nullptr;          // dL/dh_t through W_hh of the step after it
        if (first) {
          dh = a.dhn != nullptr ? a.dhn + (l * D_ + d) * BH : nullptr;
        } else {
          gemm(h, false, false, B_, H_, GH_, dQ + time_of(d, step + 1) * BGH, GH_,
               a.params + o.w_hh, H_, 0.0f, dh_.data_as<float>(), H_);
          dh = dh_.data_as<const float>();
        }
        if (!lstm_ && !gru_) {
          BackwardStepParams p;
          p.batch = static_cast<std::int32_t>(B_);
          p.hidden = static_cast<std::int32_t>(H_);
          p.out = Y + t * B_ * DH + d * H_;  // h_t: act'(a_t) from it
          p.out_stride = DH;
          p.dy = dout + t * B_ * DH + d * H_;
          p.dy_stride = DH;
          p.dh = dh;
          p.dpre = dP + t * BH;
          p.lengths = lengths();
          p.t = static_cast<std::int32_t>(t);
          if (masked_) {  // the dh that padded steps pass on
            p.carry_in = first ? nullptr : carry_h_.data_as<const float>();
            p.carry_out = carry_h_.data_as<float>();
          }
          launch_backward_step(act_, p, s);
          continue;
        }
        GatedBackwardStepParams p;
        p.batch = static_cast<std::int32_t>(B_);
        p.hidden = static_cast<std::int32_t>(H_);
        p.pre = P + t * BGH;
        p.dy = dout + t * B_ * DH + d * H_;
        p.dy_stride = DH;
        p.dh = dh;
        p.carry_out = carry_.data_as<float>();
        p.carry_in = !first                          ? carry_.data_as<const float>()
                     : lstm_ && a.dcn != nullptr ? a.dcn + (l * D_ + d) * BH
                                                 : nullptr;
        p.dpre = dP + t * BGH;
        p.lengths = lengths();
        p.t = static_cast<std::int32_t>(t);
        if (lstm_) {
          p.c_prev = step == 0 ? initial(l, d) : cell(l, d) + time_of(d, step - 1) * BH;
          p.c = cell(l, d) + t * BH;
          if (masked_) {  // the dh that padded steps pass on
            p.carry_h_in = first ? nullptr : carry_h_.data_as<const float>();
            p.carry_h_out = carry_h_.data_as<float>();
          }
        } else {
          p.pre_h = pre_h(l, d) + t * BGH;
          p.dpre_h = dQ + t * BGH;
          p.h_prev = step == 0 ? initial(l, d) : Y + time_of(d, step - 1) * B_ * DH + d * H_;
          p.h_prev_stride = step == 0 ? H_ : DH;
        }
        launch_gated_backward_step(lstm_, p, s);
      }
      if (a.dh0 != nullptr) {
        float* dh0 = a.dh0 + (l * D_ + d) * BH;
        float beta = 0.0f;
        if (gru_ || masked_) {  // the part of dL/dh0 that skips W_hh
          PRNN_CUDA_CHECK(cudaMemcpyAsync(dh0, gru_ ? carry_.data() : carry_h_.data(),
                                          f32_bytes(BH), cudaMemcpyDeviceToDevice, s));
          beta = 1.0f;
        }
        rows_gemm(h, knobs_.skinny_gemm, false, B_, H_, GH_, dQ + time_of(d, 0) * BGH, GH_,
                  a.params + o.w_hh, H_, beta, dh0, H_);
      }
      if (lstm_ && a.dc0 != nullptr)
        PRNN_CUDA_CHECK(cudaMemcpyAsync(a.dc0 + (l * D_ + d) * BH, carry_.data(), f32_bytes(BH),
                                        cudaMemcpyDeviceToDevice, s));
    }
    const bool residual = desc_.residual_at(l);  // d(in_l) starts from dout_l: the identity path
    if (residual)
      PRNN_CUDA_CHECK(cudaMemcpyAsync(din, dout, f32_bytes(T_ * B_ * I),
                                      cudaMemcpyDeviceToDevice, s));
    if (din != nullptr)
      for (int d = 0; d < D_; ++d)
        rows_gemm(h, knobs_.skinny_gemm, false, T_ * B_, I, GH_, dpre(l, d), GH_,
                  a.params + offsets(l, d).w_ih, I, d == 0 && !residual ? 0.0f : 1.0f, din, I,
                  all_steps_math(desc_));
    dout = din;
  }
}

void GemmRnn::forward(const ForwardArgs& args, cudaStream_t stream) {
  // Lengths all T run the unmasked kernels; else they go to the device ahead of the launches.
  masked_ = std::any_of(args.lengths.begin(), args.lengths.end(),
                        [&](std::int32_t n) { return n < T_; });
  if (masked_) {
    PRNN_ASSERT(static_cast<std::int64_t>(args.lengths.size()) == B_);
    PRNN_CUDA_CHECK(cudaMemcpyAsync(lengths_.data(), args.lengths.data(), lengths_.bytes(),
                                    cudaMemcpyHostToDevice, stream));
  }
  const CachedGraph::Key key{args.x,  args.params, args.h0,   args.c0,  args.y,
                             args.hn, args.cn,     lengths(), args.x16, args.params16};
  run_pass(forward_graph_, key, stream, [&](cudaStream_t s) { enqueue_forward(args, s); });
}

void GemmRnn::backward_data(const BackwardDataArgs& args, cudaStream_t stream) {
  const CachedGraph::Key key{args.params, args.dy,  args.dhn,  args.dcn, args.dx,
                             args.dh0,    args.dc0, lengths(), nullptr,  nullptr};
  run_pass(backward_graph_, key, stream, [&](cudaStream_t s) { enqueue_backward_data(args, s); });
}

// A few large GEMMs per layer direction, replayed from a graph like the other passes.
void GemmRnn::backward_weights(const BackwardWeightsArgs& args, cudaStream_t stream) {
  const CachedGraph::Key key{args.x,  args.h0, args.dparams, nullptr, nullptr,
                             nullptr, nullptr, nullptr,      nullptr, nullptr};
  run_pass(weights_graph_, key, stream,
           [&](cudaStream_t s) { enqueue_backward_weights(args, s); });
}

void GemmRnn::run_pass(CachedGraph& graph, const CachedGraph::Key& key, cudaStream_t stream,
                       const std::function<void(cudaStream_t)>& enqueue) {
  throw_if_failed();  // a persistent kernel's timeout since the last call (else a no-op)
  if (recurrence_ == Recurrence::Persistent && !knobs_.graphs) {
    bind_blas(stream);
    enqueue(stream);
    return;
  }
  if (!graph.matches(key)) {
    bind_blas(capture_);
    PRNN_CUDA_CHECK(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue(capture_);
    } catch (...) {
      graph.abandon_capture(capture_);
      throw;
    }
    graph.end_capture(capture_, key);
  }
  graph.launch(stream);
}

void GemmRnn::enqueue_backward_weights(const BackwardWeightsArgs& a, cudaStream_t stream) {
  const std::int64_t BH = B_ * H_, DH = D_ * H_, TB = T_ * B_, BGH = B_ * GH_;
  CublasHandle& h = *blas_;
  const float one = 1.0f, zero = 0.0f;
  for (std::int64_t l = 0; l < L_; ++l) {
    const std::int64_t I = desc_.layer_input_size(l);
    const float* in = layer_in(l, a.x);
    float* Y = layer_out(l);
    for (int d = 0; d < D_; ++d) {
      const RnnParamOffsets& o = offsets(l, d);
      const float* dP = dpre(l, d);
      const float* dQ = dpre_h(l, d);
      float* dW_hh = a.dparams + o.w_hh;
      gemm(h, true, false, GH_, I, TB, dP, GH_, in, I, 0.0f, a.dparams + o.w_ih, I,
           all_steps_math(desc_));
      // dW_hh = Σ_t dQ[t]ᵀ · h_{t-1}: the step at time t follows time t-1 (forward) or t+1
      // (reverse), whose output is a row block of Y; the first step's h_{t-1} is h0, which goes
      // to its slot beside Y (layer_out) so that one GEMM takes every step.
      float beta = 0.0f;
      if (a.h0 != nullptr) {
        float* slot = (d == 0 ? Y - B_ * DH : Y + T_ * B_ * DH) + d * H_;
        PRNN_CUDA_CHECK(cudaMemcpy2DAsync(slot, f32_bytes(DH), a.h0 + (l * D_ + d) * BH,
                                          f32_bytes(H_), f32_bytes(H_), static_cast<size_t>(B_),
                                          cudaMemcpyDeviceToDevice, stream));
        const float* h_rows = (d == 0 ? Y - B_ * DH : Y + B_ * DH) + d * H_;  // t = -1..T-2 | 1..T
        gemm(h, true, false, GH_, H_, T_ * B_, dQ, GH_, h_rows, DH, 0.0f, dW_hh, H_,
             all_steps_math(desc_));
        beta = 1.0f;
      } else if (T_ > 1) {
        const float* dQ_rows = d == 0 ? dQ + BGH : dQ;              // t = 1..T-1 | 0..T-2
        const float* h_rows = (d == 0 ? Y : Y + B_ * DH) + d * H_;  // t = 0..T-2 | 1..T-1
        gemm(h, true, false, GH_, H_, (T_ - 1) * B_, dQ_rows, GH_, h_rows, DH, 0.0f, dW_hh, H_,
             all_steps_math(desc_));
        beta = 1.0f;
      }
      if (beta == 0.0f)  // T = 1 without h0: h_{t-1} = 0
        PRNN_CUDA_CHECK(cudaMemsetAsync(dW_hh, 0, f32_bytes(GH_ * H_), stream));
      // db_ih = Σ over T·B rows of dP (column-major [GH, T·B] times ones), db_hh of dQ.
      PRNN_CUBLAS_CHECK(cublasSgemv(h.get(), CUBLAS_OP_N, static_cast<int>(GH_),
                                    static_cast<int>(TB), &one, dP, static_cast<int>(GH_),
                                    ones_.data_as<const float>(), 1, &zero, a.dparams + o.b_ih, 1));
      if (gru_)
        PRNN_CUBLAS_CHECK(cublasSgemv(
            h.get(), CUBLAS_OP_N, static_cast<int>(GH_), static_cast<int>(TB), &one, dQ,
            static_cast<int>(GH_), ones_.data_as<const float>(), 1, &zero, a.dparams + o.b_hh, 1));
      else
        PRNN_CUDA_CHECK(cudaMemcpyAsync(a.dparams + o.b_hh, a.dparams + o.b_ih, f32_bytes(GH_),
                                        cudaMemcpyDeviceToDevice, stream));
    }
  }
}

}  // namespace prnn::gemm_rnn

#endif  // PRNN_WITH_CUDA
