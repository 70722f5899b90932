// prnn::LinearLayer: argument checks, the GPU reserve, and the sequence of GEMMs and fused scans
// of every layer, forward and backward; host tensors run the CPU reference.
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
// cuBLAS: one handle per layer, fp32 in PEDANTIC math (no TF32 or emulation), its workspace
// owned by the layer (set again after every cublasSetStream, which resets it).
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/check.h"
#include "prnn/layers.h"
#include "reference/layers.h"

#if PRNN_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
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

#if PRNN_WITH_CUDA
using layers::LayerArgs;
using layers::Recurrence;

class CublasHandle {
 public:
  CublasHandle() { PRNN_CUBLAS_CHECK(cublasCreate(&h_)); }
  ~CublasHandle() {
    if (h_ != nullptr) (void)cublasDestroy(h_);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

// Row-major C[M, N] = op(A)[M, K] · op(B)[K, N] + beta·C in fp32; lda, ldb, ldc are row strides
// of the stored matrices (A is [M, K], or [K, M] when transposed). cuBLAS is column-major, so
// this computes Cᵀ = op(B)ᵀ · op(A)ᵀ.
void gemm(cublasHandle_t h, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
          const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
          std::int64_t ldc) {
  PRNN_ASSERT(M > 0 && N > 0 && K > 0);
  const float one = 1.0f;
  PRNN_CUBLAS_CHECK(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                                &one, B, static_cast<int>(ldb), A, static_cast<int>(lda), &beta, C,
                                static_cast<int>(ldc)));
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
#endif

}  // namespace

struct LinearLayer::Impl {
  LinearLayerDesc desc;
  Geometry g;
  DType dtype = DType::F32;
  Device device;
  ScanAlgo algo = ScanAlgo::Reference;

#if PRNN_WITH_CUDA
  std::unique_ptr<CublasHandle> blas;
  DeviceBuffer blas_workspace;
  DeviceBuffer P, dP;    // [T, B, R]
  DeviceBuffer S;        // states × [T+1, B, H]
  DeviceBuffer dnext;    // GILR-LSTM: [T, B, H]
  DeviceBuffer ones;     // [T·B] for db
  DeviceBuffer scan_workspace;
  struct Variant {
    scan::ParallelTiling tiling;
    scan::ScanParams base;
  };
  Variant variant[2][2];  // [mode][vectorized]
  bool have_forward = false;

  float* state_buffer(std::int64_t i) const {
    return S.data_as<float>() + i * (g.T + 1) * g.B * g.H;
  }
  const float* weights(const TensorView& params) const { return params.data_as<const float>(); }

  void init_gpu();
  void bind_blas(cudaStream_t stream);
  void scan(Recurrence r, scan::Mode mode, const LayerArgs& args, cudaStream_t stream);
  void project_forward(const TensorView& x, const TensorView& params);
  void project_backward(const TensorView& x, const TensorView& params, const TensorView& dx,
                        const TensorView& dparams, bool accumulate_dx, cudaStream_t stream);
  void gpu_forward(const TensorView& x, const TensorView& params, const TensorView& state0,
                   const TensorView& y, const TensorView& state_n, cudaStream_t stream);
  void gpu_backward(const TensorView& x, const TensorView& params, const TensorView& dy,
                    const TensorView& dstate_n, const TensorView& dx, const TensorView& dparams,
                    const TensorView& dstate0, cudaStream_t stream);
#endif
};

LinearLayer::LinearLayer(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                         DType dtype, Device device, ScanAlgo algo)
    : impl_(std::make_unique<Impl>()) {
  desc.validate();
  check_positive(steps, "LinearLayer steps");
  check_positive(batch, "LinearLayer batch");
  Impl& s = *impl_;
  s.desc = desc;
  s.g = make_geometry(desc, steps, batch);
  s.dtype = dtype;
  s.device = device;
  const char* what = "LinearLayer";
  if (device.kind == MemoryKind::Host) {
    if (algo != ScanAlgo::Auto && algo != ScanAlgo::Reference)
      throw Unsupported(what, fmt::format("{} runs on the GPU; host tensors use the reference",
                                          to_string(algo)));
    if (dtype != DType::F32 && dtype != DType::F64)
      throw Unsupported(what, fmt::format("the CPU reference takes f32 or f64, got {}",
                                          to_string(dtype)));
    s.algo = ScanAlgo::Reference;
    return;
  }
  if (algo == ScanAlgo::Reference)
    throw Unsupported(what, "the reference runs on host tensors only");
#if PRNN_WITH_CUDA
  if (dtype != DType::F32)
    throw Unsupported(what, fmt::format("the GPU layers take f32, got {} (16-bit layers are not "
                                        "implemented yet)",
                                        to_string(dtype)));
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

void LinearLayer::forward(const TensorView& x, const TensorView& params, const TensorView& state0,
                          const TensorView& y, const TensorView& state_n, cudaStream_t stream) {
  const Impl& s = *impl_;
  const Geometry& g = s.g;
  check_tensor(x, "x", g.x_shape(), s.dtype, s.device);
  check_tensor(params, "params", {s.desc.param_count()}, s.dtype, s.device);
  check_optional(state0, "state0", g.state_shape(), s.dtype, s.device);
  check_tensor(y, "y", g.y_shape(), s.dtype, s.device);
  check_optional(state_n, "state_n", g.state_shape(), s.dtype, s.device);
  if (s.device.kind == MemoryKind::Host) {
    auto run = [&](auto type_tag) {
      using T = decltype(type_tag);
      reference::linear_layer_forward<T>(s.desc, g.T, g.B, x.data_as<const T>(),
                                         params.data_as<const T>(), ptr_or_null<T>(state0),
                                         y.data_as<T>(), state_n.empty() ? nullptr : state_n.data_as<T>());
    };
    if (s.dtype == DType::F64) run(double{});
    else run(float{});
    return;
  }
#if PRNN_WITH_CUDA
  impl_->gpu_forward(x, params, state0, y, state_n, stream);
#else
  (void)stream;
#endif
}

void LinearLayer::backward(const TensorView& x, const TensorView& params,
                           const TensorView& state0, const TensorView& dy,
                           const TensorView& dstate_n, const TensorView& dx,
                           const TensorView& dparams, const TensorView& dstate0,
                           cudaStream_t stream) {
  const Impl& s = *impl_;
  const Geometry& g = s.g;
  check_tensor(x, "x", g.x_shape(), s.dtype, s.device);
  check_tensor(params, "params", {s.desc.param_count()}, s.dtype, s.device);
  check_optional(state0, "state0", g.state_shape(), s.dtype, s.device);
  check_tensor(dy, "dy", g.y_shape(), s.dtype, s.device);
  check_optional(dstate_n, "dstate_n", g.state_shape(), s.dtype, s.device);
  check_tensor(dx, "dx", g.x_shape(), s.dtype, s.device);
  check_tensor(dparams, "dparams", {s.desc.param_count()}, s.dtype, s.device);
  check_optional(dstate0, "dstate0", g.state_shape(), s.dtype, s.device);
  if (s.device.kind == MemoryKind::Host) {
    auto run = [&](auto type_tag) {
      using T = decltype(type_tag);
      reference::linear_layer_backward<T>(
          s.desc, g.T, g.B, x.data_as<const T>(), params.data_as<const T>(),
          ptr_or_null<T>(state0), dy.data_as<const T>(), ptr_or_null<T>(dstate_n), dx.data_as<T>(),
          dparams.data_as<T>(), dstate0.empty() ? nullptr : dstate0.data_as<T>());
    };
    if (s.dtype == DType::F64) run(double{});
    else run(float{});
    return;
  }
#if PRNN_WITH_CUDA
  PRNN_EXPECT(s.have_forward,
              "LinearLayer::backward: expected a forward() first (backward reads its reserve), "
              "got none");
  impl_->gpu_backward(x, params, dy, dstate_n, dx, dparams, dstate0, stream);
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
          var.base.time_tiles > (std::int64_t{1} << (5 * scan::kMaxLevels)))
        throw Unsupported("LinearLayer (parallel)",
                          fmt::format("the parallel scan supports at most 2^31 tiles and {} time "
                                      "tiles, got {} tiles and {} time tiles",
                                      std::int64_t{1} << (5 * scan::kMaxLevels),
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

  // cuBLAS: PEDANTIC math keeps fp32 GEMMs in fp32 (no TF32, no BF16x9 emulation, whatever the
  // environment says); its workspace is ours, so no call allocates.
  blas = std::make_unique<CublasHandle>();
  PRNN_CUBLAS_CHECK(cublasSetMathMode(blas->get(), CUBLAS_PEDANTIC_MATH));
  int major = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index));
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  blas_workspace = DeviceBuffer(major >= 9 ? 32 * kMiB : 4 * kMiB);  // cuBLAS's recommendation
}

void LinearLayer::Impl::bind_blas(cudaStream_t stream) {
  PRNN_CUBLAS_CHECK(cublasSetStream(blas->get(), stream));
  PRNN_CUBLAS_CHECK(
      cublasSetWorkspace(blas->get(), blas_workspace.data(), blas_workspace.bytes()));
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
  layers::launch_layer_scan(r, l, args, stream);
}

// P[t] = Σ_j W_j · x_{t-s_j}, s_j = k-1-j: the tap with no shift first (it covers every row).
void LinearLayer::Impl::project_forward(const TensorView& x, const TensorView& params) {
  const float* W = weights(params);
  for (std::int64_t j = g.k - 1; j >= 0; --j) {
    const std::int64_t shift = g.k - 1 - j, rows = (g.T - shift) * g.B;
    if (rows <= 0) continue;
    gemm(blas->get(), false, true, rows, g.R, g.I, x.data_as<const float>(), g.I, W + j * g.I, g.C,
         shift == 0 ? 0.0f : 1.0f, P.data_as<float>() + shift * g.B * g.R, g.R);
  }
}

// dW_j = Σ_t dP_t ⊗ x_{t-s_j}; dx = Σ_j (W_jᵀ dP shifted back) (accumulated onto dx when
// accumulate_dx); db = Σ_t dP over the bias rows.
void LinearLayer::Impl::project_backward(const TensorView& x, const TensorView& params,
                                         const TensorView& dx, const TensorView& dparams,
                                         bool accumulate_dx, cudaStream_t stream) {
  const float* W = weights(params);
  float* dW = dparams.data_as<float>();
  const float* gdP = dP.data_as<const float>();
  const float* gx = x.data_as<const float>();
  for (std::int64_t j = g.k - 1; j >= 0; --j) {
    const std::int64_t shift = g.k - 1 - j, rows = (g.T - shift) * g.B;
    if (rows <= 0) {  // this tap never sees the sequence: its gradient is zero
      PRNN_CUDA_CHECK(cudaMemset2DAsync(dW + j * g.I, static_cast<std::size_t>(g.C) * sizeof(float),
                                        0, static_cast<std::size_t>(g.I) * sizeof(float),
                                        static_cast<std::size_t>(g.R), stream));
      continue;
    }
    const float* dP_t = gdP + shift * g.B * g.R;
    gemm(blas->get(), true, false, g.R, g.I, rows, dP_t, g.R, gx, g.I, 0.0f, dW + j * g.I, g.C);
    gemm(blas->get(), false, false, rows, g.I, g.R, dP_t, g.R, W + j * g.I, g.C,
         shift == 0 && !accumulate_dx ? 0.0f : 1.0f, dx.data_as<float>(), g.I);
  }
  const float one = 1.0f, zero = 0.0f;
  PRNN_CUBLAS_CHECK(cublasSgemv(blas->get(), CUBLAS_OP_N, static_cast<int>(g.bias_count),
                                static_cast<int>(g.T * g.B), &one, gdP + g.bias_row,
                                static_cast<int>(g.R), ones.data_as<const float>(), 1, &zero,
                                dW + g.b_offset, 1));
}

void LinearLayer::Impl::gpu_forward(const TensorView& x, const TensorView& params,
                                    const TensorView& state0, const TensorView& y,
                                    const TensorView& state_n, cudaStream_t stream) {
  const std::int64_t BH = g.B * g.H;
  bind_blas(stream);
  project_forward(x, params);
  for (std::int64_t i = 0; i < g.states; ++i) {  // S[0] = state0 (or zeros)
    const std::size_t bytes = static_cast<std::size_t>(BH) * sizeof(float);
    if (state0.empty())
      PRNN_CUDA_CHECK(cudaMemsetAsync(state_buffer(i), 0, bytes, stream));
    else
      PRNN_CUDA_CHECK(cudaMemcpyAsync(state_buffer(i), state0.data_as<const float>() + i * BH,
                                      bytes, cudaMemcpyDeviceToDevice, stream));
  }
  LayerArgs a;
  a.hidden = static_cast<std::int32_t>(g.H);
  a.rows = g.R;
  a.P = P.data_as<const float>();
  a.S = state_buffer(0);
  a.bias = params.data_as<const float>() + g.b_offset;
  a.y = y.data();
  a.state_n = state_n.data();
  switch (desc.kind) {
    case LinearLayerKind::Gilr: scan(Recurrence::Gilr, scan::Mode::Forward, a, stream); break;
    case LinearLayerKind::Sru:
      if (g.I == g.H) a.x = x.data();
      scan(Recurrence::Sru, scan::Mode::Forward, a, stream);
      break;
    case LinearLayerKind::Qrnn: scan(Recurrence::Qrnn, scan::Mode::Forward, a, stream); break;
    case LinearLayerKind::GilrLstm: {
      LayerArgs surrogate = a;  // h̃ only: no y
      surrogate.y = nullptr;
      scan(Recurrence::Gilr, scan::Mode::Forward, surrogate, stream);
      // P[t, i:o] += U h̃_{t-1}: S_h̃ rows 0..T-1 hold h̃_{-1} .. h̃_{T-2}.
      gemm(blas->get(), false, true, g.T * g.B, 4 * g.H, g.H, state_buffer(0), g.H,
           weights(params) + g.u_offset, g.H, 1.0f, P.data_as<float>() + 2 * g.H, g.R);
      LayerArgs cell = a;
      cell.S = state_buffer(1);
      cell.state_n = state_n.empty() ? nullptr : state_n.data_as<float>() + BH;
      scan(Recurrence::GilrLstmCell, scan::Mode::Forward, cell, stream);
      break;
    }
  }
  have_forward = true;
}

void LinearLayer::Impl::gpu_backward(const TensorView& x, const TensorView& params,
                                     const TensorView& dy, const TensorView& dstate_n,
                                     const TensorView& dx, const TensorView& dparams,
                                     const TensorView& dstate0, cudaStream_t stream) {
  const std::int64_t BH = g.B * g.H;
  bind_blas(stream);
  LayerArgs a;
  a.hidden = static_cast<std::int32_t>(g.H);
  a.rows = g.R;
  a.P = P.data_as<const float>();
  a.dP = dP.data_as<float>();
  a.S = state_buffer(0);
  a.bias = params.data_as<const float>() + g.b_offset;
  a.dy = dy.data();
  a.dstate_n = dstate_n.data();
  a.dstate0 = dstate0.data();
  bool highway_dx = false;  // SRU with I == H: the scan writes dx, the GEMM accumulates
  switch (desc.kind) {
    case LinearLayerKind::Gilr: scan(Recurrence::Gilr, scan::Mode::Backward, a, stream); break;
    case LinearLayerKind::Sru:
      if (g.I == g.H) {
        a.x = x.data();
        a.dx = dx.data();
        highway_dx = true;
      }
      scan(Recurrence::Sru, scan::Mode::Backward, a, stream);
      break;
    case LinearLayerKind::Qrnn: scan(Recurrence::Qrnn, scan::Mode::Backward, a, stream); break;
    case LinearLayerKind::GilrLstm: {
      LayerArgs cell = a;
      cell.S = state_buffer(1);
      cell.dstate_n = dstate_n.empty() ? nullptr : dstate_n.data_as<const float>() + BH;
      cell.dstate0 = dstate0.empty() ? nullptr : dstate0.data_as<float>() + BH;
      scan(Recurrence::GilrLstmCell, scan::Mode::Backward, cell, stream);
      // Through U: dnext[t] = dP_t[i:o] · U is dL/dh̃_{t-1}; dU = Σ_t dP_t[i:o] ⊗ h̃_{t-1}.
      const float* dP_gates = dP.data_as<const float>() + 2 * g.H;
      gemm(blas->get(), false, false, g.T * g.B, g.H, 4 * g.H, dP_gates, g.R,
           weights(params) + g.u_offset, g.H, 0.0f, dnext.data_as<float>(), g.H);
      gemm(blas->get(), true, false, 4 * g.H, g.H, g.T * g.B, dP_gates, g.R, state_buffer(0), g.H,
           0.0f, dparams.data_as<float>() + g.u_offset, g.H);
      LayerArgs surrogate = a;
      surrogate.dy = nullptr;
      surrogate.dnext = dnext.data_as<const float>();
      scan(Recurrence::Gilr, scan::Mode::Backward, surrogate, stream);
      break;
    }
  }
  project_backward(x, params, dx, dparams, highway_dx, stream);
}

#endif  // PRNN_WITH_CUDA

}  // namespace prnn
