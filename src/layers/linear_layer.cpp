// prnn::LinearLayer: argument checks, the GPU reserve, and the sequence of GEMMs and fused scans
// of every layer, forward and backward; host tensors (f32, f64) run the CPU reference.
//
// Dtypes on the GPU: everything below runs in fp32. f32 tensors go to it as they are; f16 / bf16
// tensors are converted into fp32 buffers the constructor allocated (Staging) before a call's
// work and its outputs rounded back into the caller's tensors after it (core/device_convert.h),
// as prnn::Rnn does.
// Lengths (the optional per-sequence lengths, checked on the host): a forward with some length
// below T uploads them into a [B] buffer and every scan gets it as ScanParams::lengths; the
// scans treat steps t >= lengths[b] as padding (layers/layer_ops.cuh): the forward writes y = 0
// and S = 0 there, the backward dP = 0 over every column (and SRU's highway dx = 0), so the
// GEMMs below, which run over all T·B rows, get nothing from a padded step: dW, db and
// GILR-LSTM's dU and dnext sum zero rows, and dx at a padded step is 0 (QRNN's shifted taps
// at a padded step only read dP rows at or after it, which are padded too). The backward checks
// that it is given the forward's lengths and reuses the uploaded copy.
//
// GPU forward (P, S, dP, dnext: layer_kernels.h; T steps, B batch, R projection rows):
//   P[t] = Σ_j W_j x_{t-k+1+j}     k GEMMs with shifted row offsets (k = 1 except QRNN), no bias
//   S[0] = state0                  a copy (or zeros)
//   scan (Forward op)              gates from P + b in load(); y and S[t+1] in store()
//   GILR-LSTM: GILR scan for h̃ (S_h̃), then P[t, i:o] += U h̃_{t-1} (one GEMM over all t:
//   S_h̃ rows 0..T-1 are h̃_{-1..T-2}), then the cell scan (S_c, y).
// GPU backward: the scans in reverse (Backward op) write dP; then
//   dW_j = Σ_t dP_t ⊗ x_{t-k+1+j}, dx = Σ_j W_jᵀ dP (shifted), db = Σ_t dP (GEMV with ones).
//   GILR-LSTM: cell scan -> dnext = dP[:, i:o]·U and dU = dP[:, i:o]ᵀ·S_h̃ -> GILR scan on
//   (s; u) with dnext as its outside gradient -> the projection GEMMs over all 6H columns.
// cuBLAS: one handle per layer, its workspace owned by the layer (set again after every
// cublasSetStream, which resets it); GemmMath::Fp32 sets PEDANTIC math (no TF32 or emulation),
// Tf32 sets TF32 tensor-op math. Without dx (an empty view) the dx GEMM is skipped, and SRU
// with I == H leaves its highway term out (the scan sees args.x with a null dx).
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/check.h"
#include "prnn/layers.h"
#include "reference/layers.h"

#if PRNN_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/cublas.h"
#include "core/cuda_check.h"
#include "core/device_convert.h"
#include "layers/layer_kernels.h"
#endif

namespace prnn {
namespace {

constexpr std::uint64_t kLookbackTimeoutNs = 5'000'000'000ull;  // a wait this long is a bug

// Sizes of one layer and where each parameter block starts in the flat array.
struct Geometry {
  std::int64_t T = 0, B = 0, I = 0, H = 0;
  std::int64_t R = 0, C = 0, k = 1;  // projection W [R, C]; QRNN width k (C = k·I)
  std::int64_t states = 1;           // scanned states: 2 for GILR-LSTM (h̃, c)
  std::int64_t u_offset = 0;         // U [4H, H] (GILR-LSTM)
  std::int64_t b_offset = 0;         // b
  std::int64_t bias_row = 0;         // b[q] is the bias of projection row bias_row + q
  std::int64_t bias_count = 0;

  Shape x_shape() const { return {T, B, I}; }
  Shape y_shape() const { return {T, B, H}; }
  Shape state_shape() const { return {states, B, H}; }
};

Geometry make_geometry(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch) {
  Geometry g;
  g.T = steps;
  g.B = batch;
  g.I = desc.input_size;
  g.H = desc.hidden_size;
  g.R = desc.projection_rows();
  g.C = desc.projection_cols();
  g.k = desc.window;
  g.states = desc.state_size() / g.H;
  g.u_offset = g.R * g.C;
  g.b_offset = g.u_offset + (desc.kind == LinearLayerKind::GilrLstm ? 4 * g.H * g.H : 0);
  const bool sru = desc.kind == LinearLayerKind::Sru;  // b = (f; r): no bias on x̃ or W_s x
  g.bias_row = sru ? g.H : 0;
  g.bias_count = sru ? 2 * g.H : g.R;
  PRNN_ASSERT(g.b_offset + g.bias_count == desc.param_count());
  return g;
}

void check_tensor(const TensorView& t, const char* name, const Shape& shape, DType dtype,
                  Device device) {
  check_not_null(t, name);
  check_shape(t, name, shape);
  check_dtype(t, name, dtype);
  check_device(t, name, device);
  check_contiguous(t, name);
}

void check_optional(const TensorView& t, const char* name, const Shape& shape, DType dtype,
                    Device device) {
  if (!t.empty()) check_tensor(t, name, shape, dtype, device);
}

template <class T>
const T* ptr_or_null(const TensorView& t) {
  return t.empty() ? nullptr : t.data_as<const T>();
}
// The same for an optional output.
template <class T>
T* out_or_null(const TensorView& t) {
  return t.empty() ? nullptr : t.data_as<T>();
}

#if PRNN_WITH_CUDA
using layers::LayerArgs;
using layers::Recurrence;

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The fp32 device pointer a GPU call reads for input t: t itself (f32), its converted copy in
// `buf` (16-bit), or null (t empty).
const float* in32(const TensorView& t, const DeviceBuffer& buf, cudaStream_t stream) {
  if (t.empty()) return nullptr;
  if (t.dtype() == DType::F32) return t.data_as<const float>();
  convert_on_device(t.data(), t.dtype(), buf.data(), DType::F32, t.numel(), stream);
  return buf.data_as<const float>();
}
// The fp32 device pointer a GPU call writes output t to; out_done() rounds it into t afterwards.
float* out32(const TensorView& t, const DeviceBuffer& buf) {
  if (t.empty()) return nullptr;
  return t.dtype() == DType::F32 ? t.data_as<float>() : buf.data_as<float>();
}
void out_done(const TensorView& t, const DeviceBuffer& buf, cudaStream_t stream) {
  if (t.empty() || t.dtype() == DType::F32) return;
  convert_on_device(buf.data(), DType::F32, t.data(), t.dtype(), t.numel(), stream);
}

// One call's tensors as fp32 device pointers (null: empty).
struct ForwardPtrs {
  const float* x = nullptr;
  const float* params = nullptr;
  const float* state0 = nullptr;
  float* y = nullptr;
  float* state_n = nullptr;
};
struct BackwardPtrs {
  const float* x = nullptr;
  const float* params = nullptr;
  const float* dy = nullptr;
  const float* dstate_n = nullptr;
  float* dx = nullptr;
  float* dparams = nullptr;
  float* dstate0 = nullptr;
};
#endif

}  // namespace

struct LinearLayer::Impl {
  LinearLayerDesc desc;
  Geometry g;
  DType dtype = DType::F32;
  Device device;
  ScanAlgo algo = ScanAlgo::Reference;
  GemmMath math = GemmMath::Fp32;
  // The last forward's lengths: masked when some sequence is shorter than T, then [B] in
  // `lengths` (the GPU backward must be given the same).
  bool masked = false;
  std::vector<std::int32_t> lengths;

  // lengths: empty, or B entries in [0, T]; true when some entry is below T.
  bool check_lengths(std::span<const std::int32_t> given, const char* fn) const {
    if (given.empty()) return false;
    PRNN_EXPECT(static_cast<std::int64_t>(given.size()) == g.B,
                "{}: lengths: expected {} entries (one per batch row) or none, got {}", fn, g.B,
                given.size());
    bool shorter = false;
    for (std::size_t b = 0; b < given.size(); ++b) {
      PRNN_EXPECT(given[b] >= 0 && given[b] <= g.T,
                  "{}: lengths[{}]: expected a length in [0, {}] (steps), got {}", fn, b, g.T,
                  given[b]);
      shorter = shorter || given[b] < g.T;
    }
    return shorter;
  }

#if PRNN_WITH_CUDA
  std::unique_ptr<CublasHandle> blas;  // with its workspace
  DeviceBuffer P, dP;    // [T, B, R]
  DeviceBuffer S;        // states × [T+1, B, H]
  DeviceBuffer dnext;    // GILR-LSTM: [T, B, H]
  DeviceBuffer ones;     // [T·B] for db
  DeviceBuffer lengths_dev;  // [B] int32: the last masked forward's lengths
  DeviceBuffer scan_workspace;
  // 16-bit layers: the fp32 copies of the caller's tensors (unallocated for f32). seq holds y
  // (forward) or dy (backward), state_in state0 or dstate_n, state_out state_n or dstate0.
  struct Staging {
    DeviceBuffer x, params, seq, state_in, state_out, dx, dparams;
  };
  Staging staging;
  struct Variant {
    scan::ParallelTiling tiling;
    scan::ScanParams base;
  };
  Variant variant[2][2];  // [mode][vectorized]
  bool have_forward = false;

  float* state_buffer(std::int64_t i) const {
    return S.data_as<float>() + i * (g.T + 1) * g.B * g.H;
  }

  void init_gpu();
  void bind_blas(cudaStream_t stream);
  void scan(Recurrence r, scan::Mode mode, const LayerArgs& args, cudaStream_t stream);
  void project_forward(const float* x, const float* W);
  void project_backward(const float* x, const float* W, float* dx, float* dparams,
                        bool accumulate_dx, cudaStream_t stream);
  void gpu_forward(const ForwardPtrs& t, cudaStream_t stream);
  void gpu_backward(const BackwardPtrs& t, cudaStream_t stream);
#endif
};

LinearLayer::LinearLayer(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                         DType dtype, Device device, ScanAlgo algo, GemmMath math)
    : impl_(std::make_unique<Impl>()) {
  desc.validate();
  check_positive(steps, "LinearLayer steps");
  check_positive(batch, "LinearLayer batch");
  Impl& s = *impl_;
  s.desc = desc;
  s.g = make_geometry(desc, steps, batch);
  s.dtype = dtype;
  s.device = device;
  s.math = math;
  s.lengths.assign(static_cast<std::size_t>(batch), 0);
  const char* what = "LinearLayer";
  if (device.kind == MemoryKind::Host) {
    if (algo != ScanAlgo::Auto && algo != ScanAlgo::Reference)
      throw Unsupported(what, fmt::format("{} runs on the GPU; host tensors use the reference",
                                          to_string(algo)));
    if (dtype != DType::F32 && dtype != DType::F64)
      throw Unsupported(what, fmt::format("the CPU reference takes f32 or f64, got {}",
                                          to_string(dtype)));
    if (math != GemmMath::Fp32)
      throw Unsupported(what, fmt::format("GEMM math {} runs on the GPU; the CPU reference "
                                          "computes in its dtype (math fp32)",
                                          to_string(math)));
    s.algo = ScanAlgo::Reference;
    return;
  }
  if (algo == ScanAlgo::Reference)
    throw Unsupported(what, "the reference runs on host tensors only");
#if PRNN_WITH_CUDA
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Unsupported(
        what, fmt::format("the GPU layers take f32, f16 or bf16, got {}", to_string(dtype)));
  const Geometry& g = s.g;
  if (g.T * g.B > INT32_MAX || g.B * g.H > INT32_MAX || g.R * g.C > INT32_MAX)
    throw Unsupported(what, fmt::format("cuBLAS takes 32-bit sizes: steps × batch = {}, batch × "
                                        "hidden = {}, projection {} × {}",
                                        g.T * g.B, g.B * g.H, g.R, g.C));
  s.algo = algo;
  if (algo == ScanAlgo::Auto)
    s.algo = scan::choose_scan_algo(g.B * g.H, g.T).parallel ? ScanAlgo::Parallel : ScanAlgo::Serial;
  s.init_gpu();
#else
  throw Unsupported(what, "prnn was built without CUDA (PRNN_CUDA=OFF)");
#endif
}

LinearLayer::~LinearLayer() = default;
LinearLayer::LinearLayer(LinearLayer&&) noexcept = default;
LinearLayer& LinearLayer::operator=(LinearLayer&&) noexcept = default;

const LinearLayerDesc& LinearLayer::desc() const { return impl_->desc; }
ScanAlgo LinearLayer::algo() const { return impl_->algo; }
GemmMath LinearLayer::math() const { return impl_->math; }

void LinearLayer::forward(const TensorView& x, const TensorView& params, const TensorView& state0,
                          const TensorView& y, const TensorView& state_n, cudaStream_t stream,
                          std::span<const std::int32_t> lengths) {
  Impl& s = *impl_;
  const Geometry& g = s.g;
  check_tensor(x, "x", g.x_shape(), s.dtype, s.device);
  check_tensor(params, "params", {s.desc.param_count()}, s.dtype, s.device);
  check_optional(state0, "state0", g.state_shape(), s.dtype, s.device);
  check_tensor(y, "y", g.y_shape(), s.dtype, s.device);
  check_optional(state_n, "state_n", g.state_shape(), s.dtype, s.device);
  const bool masked = s.check_lengths(lengths, "LinearLayer::forward");
  if (s.device.kind == MemoryKind::Host) {
    auto run = [&](auto type_tag) {
      using T = decltype(type_tag);
      reference::linear_layer_forward<T>(
          s.desc, g.T, g.B, x.data_as<const T>(), params.data_as<const T>(), ptr_or_null<T>(state0),
          y.data_as<T>(), out_or_null<T>(state_n),
          masked ? lengths.data() : nullptr);
    };
    if (s.dtype == DType::F64) run(double{});
    else run(float{});
    return;
  }
#if PRNN_WITH_CUDA
  s.have_forward = false;
  s.masked = masked;
  if (masked) {
    std::copy(lengths.begin(), lengths.end(), s.lengths.begin());
    PRNN_CUDA_CHECK(cudaMemcpyAsync(s.lengths_dev.data(), s.lengths.data(), s.lengths_dev.bytes(),
                                    cudaMemcpyHostToDevice, stream));
  }
  const Impl::Staging& st = s.staging;
  ForwardPtrs t;
  t.x = in32(x, st.x, stream);
  t.params = in32(params, st.params, stream);
  t.state0 = in32(state0, st.state_in, stream);
  t.y = out32(y, st.seq);
  t.state_n = out32(state_n, st.state_out);
  s.gpu_forward(t, stream);
  out_done(y, st.seq, stream);
  out_done(state_n, st.state_out, stream);
  s.have_forward = true;
#else
  (void)stream;
#endif
}

void LinearLayer::backward(const TensorView& x, const TensorView& params, const TensorView& state0,
                           const TensorView& dy, const TensorView& dstate_n, const TensorView& dx,
                           const TensorView& dparams, const TensorView& dstate0,
                           cudaStream_t stream, std::span<const std::int32_t> lengths) {
  const Impl& s = *impl_;
  const Geometry& g = s.g;
  check_tensor(x, "x", g.x_shape(), s.dtype, s.device);
  check_tensor(params, "params", {s.desc.param_count()}, s.dtype, s.device);
  check_optional(state0, "state0", g.state_shape(), s.dtype, s.device);
  check_tensor(dy, "dy", g.y_shape(), s.dtype, s.device);
  check_optional(dstate_n, "dstate_n", g.state_shape(), s.dtype, s.device);
  check_optional(dx, "dx", g.x_shape(), s.dtype, s.device);
  check_tensor(dparams, "dparams", {s.desc.param_count()}, s.dtype, s.device);
  check_optional(dstate0, "dstate0", g.state_shape(), s.dtype, s.device);
  const bool masked = s.check_lengths(lengths, "LinearLayer::backward");
  if (s.device.kind == MemoryKind::Host) {
    auto run = [&](auto type_tag) {
      using T = decltype(type_tag);
      reference::linear_layer_backward<T>(
          s.desc, g.T, g.B, x.data_as<const T>(), params.data_as<const T>(), ptr_or_null<T>(state0),
          dy.data_as<const T>(), ptr_or_null<T>(dstate_n), out_or_null<T>(dx),
          dparams.data_as<T>(), out_or_null<T>(dstate0), masked ? lengths.data() : nullptr);
    };
    if (s.dtype == DType::F64) run(double{});
    else run(float{});
    return;
  }
#if PRNN_WITH_CUDA
  PRNN_EXPECT(s.have_forward,
              "LinearLayer::backward: expected a forward() first (backward reads its reserve), "
              "got none");
  for (std::int64_t b = 0; b < g.B; ++b) {  // the reserve holds the forward's padding
    const std::int64_t expected = s.masked ? s.lengths[static_cast<std::size_t>(b)] : g.T;
    const std::int64_t given = masked ? lengths[static_cast<std::size_t>(b)] : g.T;
    PRNN_EXPECT(given == expected,
                "LinearLayer::backward: lengths[{}]: expected {} (the last forward()'s), got {}", b,
                expected, given);
  }
  const Impl::Staging& st = s.staging;
  BackwardPtrs t;
  t.x = in32(x, st.x, stream);
  t.params = in32(params, st.params, stream);
  t.dy = in32(dy, st.seq, stream);
  t.dstate_n = in32(dstate_n, st.state_in, stream);
  t.dx = out32(dx, st.dx);
  t.dparams = out32(dparams, st.dparams);
  t.dstate0 = out32(dstate0, st.state_out);
  impl_->gpu_backward(t, stream);
  out_done(dx, st.dx, stream);
  out_done(dparams, st.dparams, stream);
  out_done(dstate0, st.state_out, stream);
#else
  (void)stream;
#endif
}

#if PRNN_WITH_CUDA

void LinearLayer::Impl::init_gpu() {
  PRNN_CUDA_CHECK(cudaSetDevice(device.index));
  const std::int64_t TB = g.T * g.B, BH = g.B * g.H;

  // Scan geometry, per mode: one tiling for 4-channel vectors (H % 4 == 0, aligned tensors) and
  // one scalar; all share one workspace (launches run in order on one stream and each carries a
  // fresh epoch, kept by the kernels in the workspace).
  scan::ScanParams base;
  base.steps = g.T;
  base.batch = static_cast<std::int32_t>(g.B);
  base.channels = static_cast<std::int32_t>(g.H);
  base.stride_t = BH;
  base.stride_b = g.H;
  base.timeout_ns = kLookbackTimeoutNs;
  std::size_t workspace = scan::kScanRecordsOffset;
  for (scan::Mode mode : {scan::Mode::Forward, scan::Mode::Backward}) {
    for (int v = 0; v < 2; ++v) {
      Variant& var = variant[static_cast<int>(mode)][v];
      var.base = base;
      if (algo != ScanAlgo::Parallel) continue;
      var.tiling = layers::layer_tiling(mode, g.H, v == 1 && g.H % 4 == 0);
      workspace = std::max(workspace, scan::plan_parallel_scan(var.tiling, var.base));
      if (var.base.num_tiles > INT32_MAX ||
          var.base.time_tiles > (std::int64_t{1} << (scan::kFanoutLog2 * scan::kMaxLevels)))
        throw Unsupported("LinearLayer (parallel)",
                          fmt::format("the parallel scan supports at most 2^31 tiles and {} time "
                                      "tiles, got {} tiles and {} time tiles",
                                      std::int64_t{1} << (scan::kFanoutLog2 * scan::kMaxLevels),
                                      var.base.num_tiles, var.base.time_tiles));
    }
  }
  if (algo == ScanAlgo::Parallel) {
    scan_workspace = DeviceBuffer(workspace);
    scan::init_parallel_scan_workspace(scan_workspace.data(), scan_workspace.bytes());
    for (auto& per_mode : variant)
      for (Variant& var : per_mode)
        scan::bind_parallel_scan(var.tiling, scan_workspace.data(), var.base);
  }

  // The reserve and the backward's buffers.
  const auto f32 = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  P = DeviceBuffer(f32(TB * g.R));
  dP = DeviceBuffer(f32(TB * g.R));
  S = DeviceBuffer(f32(g.states * (g.T + 1) * BH));
  if (desc.kind == LinearLayerKind::GilrLstm) dnext = DeviceBuffer(f32(TB * g.H));
  ones = DeviceBuffer(f32(TB));
  const std::vector<float> host_ones(static_cast<std::size_t>(TB), 1.0f);
  ones.copy_from_host(host_ones.data(), f32(TB));
  lengths_dev = DeviceBuffer(static_cast<std::size_t>(g.B) * sizeof(std::int32_t));
  if (dtype != DType::F32) {
    const std::int64_t TBI = TB * g.I, states = g.states * BH, params = desc.param_count();
    staging =
        Staging{DeviceBuffer(f32(TBI)),    DeviceBuffer(f32(params)), DeviceBuffer(f32(TB * g.H)),
                DeviceBuffer(f32(states)), DeviceBuffer(f32(states)), DeviceBuffer(f32(TBI)),
                DeviceBuffer(f32(params))};
  }

  // cuBLAS: PEDANTIC math keeps fp32 GEMMs in fp32 (no TF32, no BF16x9 emulation, whatever the
  // environment says), TF32 tensor-op math rounds both operands to TF32 (fp32 accumulation);
  // its workspace is ours, so no call allocates.
  blas = std::make_unique<CublasHandle>(math);
  blas->own_workspace(device.index);
}

void LinearLayer::Impl::bind_blas(cudaStream_t stream) {
  blas->bind(stream);
}

void LinearLayer::Impl::scan(Recurrence r, scan::Mode mode, const LayerArgs& args,
                             cudaStream_t stream) {
  layers::LayerLaunch l;
  l.mode = mode;
  l.parallel = algo == ScanAlgo::Parallel;
  // 4-channel vectors need H % 4 == 0 and the user's tensors 16-byte aligned (ours are).
  bool vectorized = l.parallel && g.H % 4 == 0;
  const void* user[] = {args.bias, args.y, args.state_n, args.x, args.dy, args.dstate_n,
                        args.dstate0, args.dx};
  for (const void* p : user) vectorized = vectorized && aligned16(p);
  const Variant& var = variant[static_cast<int>(mode)][vectorized ? 1 : 0];
  l.tiling = var.tiling;
  l.p = var.base;
  l.p.lengths = masked ? lengths_dev.data_as<const std::int32_t>() : nullptr;
  layers::launch_layer_scan(r, l, args, stream);
}

// P[t] = Σ_j W_j · x_{t-s_j}, s_j = k-1-j: the tap with no shift first (it covers every row).
void LinearLayer::Impl::project_forward(const float* x, const float* W) {
  for (std::int64_t j = g.k - 1; j >= 0; --j) {
    const std::int64_t shift = g.k - 1 - j, rows = (g.T - shift) * g.B;
    if (rows <= 0) continue;
    gemm(*blas, false, true, rows, g.R, g.I, x, g.I, W + j * g.I, g.C, shift == 0 ? 0.0f : 1.0f,
         P.data_as<float>() + shift * g.B * g.R, g.R);
  }
}

// dW_j = Σ_t dP_t ⊗ x_{t-s_j}; dx = Σ_j (W_jᵀ dP shifted back) (accumulated onto dx when
// accumulate_dx); db = Σ_t dP over the bias rows.
void LinearLayer::Impl::project_backward(const float* x, const float* W, float* dx, float* dparams,
                                         bool accumulate_dx, cudaStream_t stream) {
  float* dW = dparams;
  const float* gdP = dP.data_as<const float>();
  for (std::int64_t j = g.k - 1; j >= 0; --j) {
    const std::int64_t shift = g.k - 1 - j, rows = (g.T - shift) * g.B;
    if (rows <= 0) {  // this tap never sees the sequence: its gradient is zero
      PRNN_CUDA_CHECK(cudaMemset2DAsync(dW + j * g.I, static_cast<std::size_t>(g.C) * sizeof(float),
                                        0, static_cast<std::size_t>(g.I) * sizeof(float),
                                        static_cast<std::size_t>(g.R), stream));
      continue;
    }
    const float* dP_t = gdP + shift * g.B * g.R;
    gemm(*blas, true, false, g.R, g.I, rows, dP_t, g.R, x, g.I, 0.0f, dW + j * g.I, g.C);
    if (dx != nullptr)
      gemm(*blas, false, false, rows, g.I, g.R, dP_t, g.R, W + j * g.I, g.C,
           shift == 0 && !accumulate_dx ? 0.0f : 1.0f, dx, g.I);
  }
  const float one = 1.0f, zero = 0.0f;
  PRNN_CUBLAS_CHECK(cublasSgemv(blas->get(), CUBLAS_OP_N, static_cast<int>(g.bias_count),
                                static_cast<int>(g.T * g.B), &one, gdP + g.bias_row,
                                static_cast<int>(g.R), ones.data_as<const float>(), 1, &zero,
                                dW + g.b_offset, 1));
}

void LinearLayer::Impl::gpu_forward(const ForwardPtrs& t, cudaStream_t stream) {
  const std::int64_t BH = g.B * g.H;
  bind_blas(stream);
  project_forward(t.x, t.params);
  for (std::int64_t i = 0; i < g.states; ++i) {  // S[0] = state0 (or zeros)
    const std::size_t bytes = static_cast<std::size_t>(BH) * sizeof(float);
    if (t.state0 == nullptr)
      PRNN_CUDA_CHECK(cudaMemsetAsync(state_buffer(i), 0, bytes, stream));
    else
      PRNN_CUDA_CHECK(cudaMemcpyAsync(state_buffer(i), t.state0 + i * BH, bytes,
                                      cudaMemcpyDeviceToDevice, stream));
  }
  LayerArgs a;
  a.hidden = static_cast<std::int32_t>(g.H);
  a.rows = g.R;
  a.P = P.data_as<const float>();
  a.S = state_buffer(0);
  a.bias = t.params + g.b_offset;
  a.y = t.y;
  a.state_n = t.state_n;
  switch (desc.kind) {
    case LinearLayerKind::Gilr: scan(Recurrence::Gilr, scan::Mode::Forward, a, stream); break;
    case LinearLayerKind::Sru:
      if (g.I == g.H) a.x = t.x;
      scan(Recurrence::Sru, scan::Mode::Forward, a, stream);
      break;
    case LinearLayerKind::Qrnn: scan(Recurrence::Qrnn, scan::Mode::Forward, a, stream); break;
    case LinearLayerKind::GilrLstm: {
      LayerArgs surrogate = a;  // h̃ only: no y
      surrogate.y = nullptr;
      scan(Recurrence::Gilr, scan::Mode::Forward, surrogate, stream);
      // P[t, i:o] += U h̃_{t-1}: S_h̃ rows 0..T-1 hold h̃_{-1} .. h̃_{T-2}.
      gemm(*blas, false, true, g.T * g.B, 4 * g.H, g.H, state_buffer(0), g.H, t.params + g.u_offset,
           g.H, 1.0f, P.data_as<float>() + 2 * g.H, g.R);
      LayerArgs cell = a;
      cell.S = state_buffer(1);
      cell.state_n = t.state_n == nullptr ? nullptr : t.state_n + BH;
      scan(Recurrence::GilrLstmCell, scan::Mode::Forward, cell, stream);
      break;
    }
  }
}

void LinearLayer::Impl::gpu_backward(const BackwardPtrs& t, cudaStream_t stream) {
  const std::int64_t BH = g.B * g.H;
  bind_blas(stream);
  LayerArgs a;
  a.hidden = static_cast<std::int32_t>(g.H);
  a.rows = g.R;
  a.P = P.data_as<const float>();
  a.dP = dP.data_as<float>();
  a.S = state_buffer(0);
  a.bias = t.params + g.b_offset;
  a.dy = t.dy;
  a.dstate_n = t.dstate_n;
  a.dstate0 = t.dstate0;
  bool highway_dx = false;  // SRU with I == H: the scan writes dx, the GEMM accumulates
  switch (desc.kind) {
    case LinearLayerKind::Gilr: scan(Recurrence::Gilr, scan::Mode::Backward, a, stream); break;
    case LinearLayerKind::Sru:
      if (g.I == g.H) {
        a.x = t.x;
        a.dx = t.dx;
        highway_dx = true;
      }
      scan(Recurrence::Sru, scan::Mode::Backward, a, stream);
      break;
    case LinearLayerKind::Qrnn: scan(Recurrence::Qrnn, scan::Mode::Backward, a, stream); break;
    case LinearLayerKind::GilrLstm: {
      LayerArgs cell = a;
      cell.S = state_buffer(1);
      cell.dstate_n = t.dstate_n == nullptr ? nullptr : t.dstate_n + BH;
      cell.dstate0 = t.dstate0 == nullptr ? nullptr : t.dstate0 + BH;
      scan(Recurrence::GilrLstmCell, scan::Mode::Backward, cell, stream);
      // Through U: dnext[t] = dP_t[i:o] · U is dL/dh̃_{t-1}; dU = Σ_t dP_t[i:o] ⊗ h̃_{t-1}.
      const float* dP_gates = dP.data_as<const float>() + 2 * g.H;
      gemm(*blas, false, false, g.T * g.B, g.H, 4 * g.H, dP_gates, g.R, t.params + g.u_offset, g.H,
           0.0f, dnext.data_as<float>(), g.H);
      gemm(*blas, true, false, 4 * g.H, g.H, g.T * g.B, dP_gates, g.R, state_buffer(0), g.H, 0.0f,
           t.dparams + g.u_offset, g.H);
      LayerArgs surrogate = a;
      surrogate.dy = nullptr;
      surrogate.dnext = dnext.data_as<const float>();
      scan(Recurrence::Gilr, scan::Mode::Backward, surrogate, stream);
      break;
    }
  }
  project_backward(t.x, t.params, t.dx, t.dparams, highway_dx, stream);
}

#endif  // PRNN_WITH_CUDA

}  // namespace prnn
