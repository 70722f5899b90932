// prnn::LinearScan: argument checks, algorithm choice, workspace, and the CPU path.
// The CPU path maps layouts, directions and lengths onto the reference's [steps, channels]
// forward recurrence, one batch entry at a time.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "prnn/scan.h"
#include "reference/scan.h"

#if PRNN_WITH_CUDA
#include <optional>

#include "core/cuda_check.h"
#include "core/knob.h"
#include "scan/scan_kernels.h"
#endif

namespace prnn {

const char* to_string(ScanAlgo a) {
  switch (a) {
    case ScanAlgo::Auto: return "auto";
    case ScanAlgo::Serial: return "serial";
    case ScanAlgo::Parallel: return "parallel";
    case ScanAlgo::Reference: return "reference";
  }
  return "?";
}

ScanAlgo parse_scan_algo(const std::string& name) {
  for (ScanAlgo a : {ScanAlgo::Auto, ScanAlgo::Serial, ScanAlgo::Parallel, ScanAlgo::Reference})
    if (name == to_string(a)) return a;
  throw InvalidArgument(
      fmt::format("scan algorithm: expected auto, serial, parallel or reference, got '{}'", name));
}

void ScanDesc::validate() const {
  PRNN_EXPECT(steps >= 1, "ScanDesc.steps: expected >= 1, got {}", steps);
  PRNN_EXPECT(batch >= 1, "ScanDesc.batch: expected >= 1, got {}", batch);
  PRNN_EXPECT(channels >= 1, "ScanDesc.channels: expected >= 1, got {}", channels);
  PRNN_EXPECT(batch <= INT32_MAX && channels <= INT32_MAX,
              "ScanDesc: expected batch and channels < 2^31, got {} and {}", batch, channels);
}

Shape ScanDesc::sequence_shape() const {
  return layout == ScanLayout::TimeMajor ? Shape{steps, batch, channels}
                                         : Shape{batch, steps, channels};
}

namespace {

constexpr std::uint64_t kLookbackTimeoutNs = 5'000'000'000ull;  // a wait this long is a bug

bool on_host(const ScanDesc& d) { return d.device.kind == MemoryKind::Host; }

void check_tensor(const TensorView& t, const char* name, const ScanDesc& d, const Shape& shape) {
  check_not_null(t, name);
  check_shape(t, name, shape);
  check_dtype(t, name, d.dtype);
  check_device(t, name, d.device);
  check_contiguous(t, name);
}

void check_optional(const TensorView& t, const char* name, const ScanDesc& d, const Shape& shape) {
  if (!t.empty()) check_tensor(t, name, d, shape);
}

// ---- CPU path --------------------------------------------------------------------------------

std::int64_t element_offset(const ScanDesc& d, std::int64_t t, std::int64_t b) {
  return d.layout == ScanLayout::TimeMajor ? (t * d.batch + b) * d.channels
                                           : (b * d.steps + t) * d.channels;
}

std::int64_t length_of(const ScanDesc& d, const std::int32_t* lengths, std::int64_t b) {
  if (lengths == nullptr) return d.steps;
  const std::int64_t len = lengths[b];
  PRNN_EXPECT(len >= 0 && len <= d.steps, "lengths[{}]: expected a value in [0, {}], got {}", b,
              d.steps, len);
  return len;
}

// Physical step of the s-th step of the forward recurrence.
std::int64_t physical(const ScanDesc& d, std::int64_t len, std::int64_t s) {
  return d.direction == ScanDirection::Forward ? s : len - 1 - s;
}

template <class T>
struct Gather {
  const ScanDesc& d;
  std::int64_t b, len;
  // Copies the valid steps of batch entry b into [len, C] in forward-recurrence order.
  std::vector<T> in(const TensorView& v) const {
    std::vector<T> out(static_cast<std::size_t>(len * d.channels));
    const T* src = v.data_as<const T>();
    for (std::int64_t s = 0; s < len; ++s)
      std::copy_n(src + element_offset(d, physical(d, len, s), b), d.channels,
                  out.begin() + s * d.channels);
    return out;
  }
  void out(const std::vector<T>& src, const TensorView& v) const {
    T* dst = v.data_as<T>();
    for (std::int64_t t = 0; t < d.steps; ++t)
      std::fill_n(dst + element_offset(d, t, b), d.channels, T(0));
    for (std::int64_t s = 0; s < len; ++s)
      std::copy_n(src.begin() + s * d.channels, d.channels,
                  dst + element_offset(d, physical(d, len, s), b));
  }
  std::vector<T> state(const TensorView& v) const {
    std::vector<T> out(static_cast<std::size_t>(d.channels), T(0));
    if (!v.empty()) std::copy_n(v.data_as<const T>() + b * d.channels, d.channels, out.begin());
    return out;
  }
  void put_state(const std::vector<T>& src, const TensorView& v) const {
    if (!v.empty()) std::copy(src.begin(), src.end(), v.data_as<T>() + b * d.channels);
  }
};

template <class T>
void cpu_forward(const ScanDesc& d, const ScanForwardArgs& args) {
  for (std::int64_t b = 0; b < d.batch; ++b) {
    const Gather<T> g{d, b, length_of(d, args.lengths, b)};
    const auto h0 = g.state(args.h0);
    std::vector<T> h(static_cast<std::size_t>(g.len * d.channels));
    if (g.len > 0)
      reference::linear_scan_forward<T>(g.len, d.channels, g.in(args.a).data(),
                                        g.in(args.x).data(), h0.data(), h.data());
    g.out(h, args.h);
    g.put_state(g.len > 0 ? std::vector<T>(h.end() - d.channels, h.end()) : h0, args.h_final);
  }
}

template <class T>
void cpu_backward(const ScanDesc& d, const ScanBackwardArgs& args) {
  for (std::int64_t b = 0; b < d.batch; ++b) {
    const Gather<T> g{d, b, length_of(d, args.lengths, b)};
    const auto h0 = g.state(args.h0);
    const auto dh_final = g.state(args.dh_final);
    std::vector<T> da(static_cast<std::size_t>(g.len * d.channels)), dx(da.size());
    std::vector<T> dh0 = dh_final;
    if (g.len > 0) {
      auto dh = g.in(args.dh);
      for (std::int64_t c = 0; c < d.channels; ++c)
        dh[static_cast<std::size_t>((g.len - 1) * d.channels + c)] += dh_final[c];
      reference::linear_scan_backward<T>(g.len, d.channels, g.in(args.a).data(),
                                         g.in(args.h).data(), h0.data(), dh.data(), da.data(),
                                         dx.data(), dh0.data());
    }
    g.out(da, args.da);
    g.out(dx, args.dx);
    g.put_state(dh0, args.dh0);
  }
}

#if PRNN_WITH_CUDA
// The widest vector a call's tensors allow (scan::parallel_tiling): 4 channels need C % 4 == 0
// and every tensor aligned to 4 elements; 8 (16-bit only) C % 8 == 0 and 16-byte alignment.
int widest_vector(const ScanDesc& d, std::initializer_list<TensorView> tensors) {
  auto aligned = [&](std::uintptr_t bytes) {
    for (const TensorView& t : tensors)
      if (reinterpret_cast<std::uintptr_t>(t.data()) % bytes != 0) return false;
    return true;
  };
  if (d.channels % 4 != 0 || !aligned(4 * size_of(d.dtype))) return 1;
  if (size_of(d.dtype) == 2 && d.channels % 8 == 0 && aligned(16)) return 8;
  return 4;
}

scan::Elem elem_of(DType t) {
  switch (t) {
    case DType::F32: return scan::Elem::F32;
    case DType::F16: return scan::Elem::F16;
    case DType::BF16: return scan::Elem::BF16;
    case DType::F64: break;
  }
  throw Unsupported("linear scan on the GPU", "f64 is not supported; use f32, f16 or bf16");
}
#endif

}  // namespace

#if PRNN_WITH_CUDA
namespace scan {

std::size_t plan_parallel_scan(const ParallelTiling& tiling, ScanParams& p) {
  p.lane_blocks_per_batch =
      static_cast<std::int32_t>((p.channels + tiling.lane_width - 1) / tiling.lane_width);
  p.time_tiles = (p.steps + tiling.tile_steps - 1) / tiling.tile_steps;
  p.num_tiles = p.time_tiles * p.batch * p.lane_blocks_per_batch;
  p.levels = 1;
  while (p.levels < kMaxLevels && (std::int64_t{1} << (kFanoutLog2 * p.levels)) < p.time_tiles)
    ++p.levels;
  const std::int64_t lane_blocks = std::int64_t{p.batch} * p.lane_blocks_per_batch;
  std::size_t offset = kScanRecordsOffset;
  for (int l = 0; l < p.levels; ++l) {
    p.level_count[l] = std::max<std::int64_t>(1, p.time_tiles >> (kFanoutLog2 * l));
    offset += static_cast<std::size_t>(lane_blocks * p.level_count[l] * tiling.lane_width) * 16;
    offset = (offset + 255) / 256 * 256;
  }
  return offset;
}

AutoChoice choose_scan_algo(std::int64_t lanes, std::int64_t steps) {
  if (lanes >= kSerialLanes)
    return {false, fmt::format("auto: serial, {} lanes (>= {}) keep memory busy with one thread "
                               "per lane",
                               lanes, kSerialLanes)};
  return {true, fmt::format("auto: parallel, {} lanes x {} steps: the scan runs across time",
                            lanes, steps)};
}

void init_parallel_scan_workspace(void* workspace, std::size_t bytes) {
  PRNN_CUDA_CHECK(cudaMemset(workspace, 0, bytes));
  const unsigned first_epoch = 1;
  PRNN_CUDA_CHECK(cudaMemcpy(static_cast<unsigned char*>(workspace) + 4, &first_epoch,
                             sizeof(first_epoch), cudaMemcpyHostToDevice));
}

void bind_parallel_scan(const ParallelTiling& tiling, void* workspace, ScanParams& p) {
  auto* ws = static_cast<unsigned char*>(workspace);
  p.status = reinterpret_cast<unsigned*>(ws);
  p.epoch = reinterpret_cast<unsigned*>(ws + 4);
  p.done_counter = reinterpret_cast<unsigned*>(ws + 12);
  const std::int64_t lane_blocks = std::int64_t{p.batch} * p.lane_blocks_per_batch;
  std::size_t offset = kScanRecordsOffset;
  for (int l = 0; l < p.levels; ++l) {
    p.agg[l] = reinterpret_cast<float*>(ws + offset);
    offset += static_cast<std::size_t>(lane_blocks * p.level_count[l] * tiling.lane_width) * 16;
    offset = (offset + 255) / 256 * 256;
  }
}

}  // namespace scan
#endif

struct LinearScan::Impl {
  ScanDesc desc;
  ScanAlgo algo = ScanAlgo::Auto;
  std::string reason;
#if PRNN_WITH_CUDA
  // Parallel scan: per mode, one tiling for each vector width the tensors may allow (1; 4:
  // C % 4 == 0, aligned; 8: 16-bit, C % 8 == 0, 16-byte aligned); each call takes the widest its
  // tensors allow (widest_vector). All variants share the workspace (status word, tile counter,
  // records): every launch has a fresh epoch, so records of an earlier launch, whatever its
  // layout, never match.
  struct Variant {
    scan::ParallelTiling tiling;
    scan::ScanParams base;
  };
  static constexpr int kWidths[3] = {1, 4, 8};
  Variant variant[2][3];  // [mode][vector width: 1, 4, 8]
  DeviceBuffer workspace;

  static int width_index(int vector) {
    return vector == 8 ? 2 : (vector == 4 ? 1 : 0);
  }
  const Variant& pick(scan::Mode mode, int vector) const {
    return variant[static_cast<int>(mode)][width_index(vector)];
  }

  scan::ScanParams params(scan::Mode mode, int vector, const void* lengths_ptr) {
    scan::ScanParams p = pick(mode, vector).base;
    p.lengths = static_cast<const std::int32_t*>(lengths_ptr);
    return p;
  }
#endif
};

std::string LinearScan::can_implement(const ScanDesc& d, ScanAlgo algo) {
  d.validate();
  if (on_host(d)) {
    if (algo != ScanAlgo::Auto && algo != ScanAlgo::Reference)
      return fmt::format("{} runs on the GPU; host tensors use the reference", to_string(algo));
    if (d.dtype != DType::F32 && d.dtype != DType::F64)
      return fmt::format("the CPU reference takes f32 or f64, got {}", to_string(d.dtype));
    return {};
  }
  if (algo == ScanAlgo::Reference) return "the reference runs on host tensors only";
#if PRNN_WITH_CUDA
  if (d.dtype == DType::F64) return "the GPU scans take f32, f16 or bf16, got f64";
  if (algo == ScanAlgo::Parallel || algo == ScanAlgo::Auto) {
    for (int vector : {1, 4}) {
      const auto tiling = scan::parallel_tiling(scan::Mode::Backward, d.channels, vector);
      const std::int64_t tiles = (d.steps + tiling.tile_steps - 1) / tiling.tile_steps;
      if (tiles * d.batch * ((d.channels + tiling.lane_width - 1) / tiling.lane_width) > INT32_MAX)
        return fmt::format("parallel scan supports at most 2^31 tiles, got {} steps x {} lanes",
                           d.steps, d.batch * d.channels);
      if (tiles > (std::int64_t{1} << (scan::kFanoutLog2 * scan::kMaxLevels)))
        return fmt::format("parallel scan supports at most {} time tiles, got {}",
                           std::int64_t{1} << (scan::kFanoutLog2 * scan::kMaxLevels), tiles);
    }
  }
  return {};
#else
  return "prnn was built without CUDA (PRNN_CUDA=OFF)";
#endif
}

LinearScan::LinearScan(const ScanDesc& desc, ScanAlgo algo) : impl_(std::make_unique<Impl>()) {
  desc.validate();
  impl_->desc = desc;
  const std::string why_not = can_implement(desc, algo);
  if (!why_not.empty()) throw Unsupported(fmt::format("linear scan ({})", to_string(algo)), why_not);
  if (on_host(desc)) {
    impl_->algo = ScanAlgo::Reference;
    impl_->reason = "host tensors: the CPU reference";
    return;
  }
#if PRNN_WITH_CUDA
  auto& s = *impl_;
  s.algo = algo;
  s.reason = "requested";
  if (algo == ScanAlgo::Auto) {
    const scan::AutoChoice choice = scan::choose_scan_algo(desc.batch * desc.channels, desc.steps);
    s.algo = choice.parallel ? ScanAlgo::Parallel : ScanAlgo::Serial;
    s.reason = choice.reason;
  }
  PRNN_CUDA_CHECK(cudaSetDevice(desc.device.index));
  scan::ScanParams p;
  p.steps = desc.steps;
  p.batch = static_cast<std::int32_t>(desc.batch);
  p.channels = static_cast<std::int32_t>(desc.channels);
  p.reverse = desc.direction == ScanDirection::Reverse;
  p.stride_t = desc.layout == ScanLayout::TimeMajor ? desc.batch * desc.channels : desc.channels;
  p.stride_b = desc.layout == ScanLayout::TimeMajor ? desc.channels : desc.steps * desc.channels;
  p.timeout_ns = kLookbackTimeoutNs;

  // Workspace: the launch state, then the records of whichever variant runs (sized for the
  // largest; every launch has a fresh epoch, so variants can share it).
  std::size_t bytes = scan::kScanRecordsOffset;
  const bool contiguous_rows = p.stride_t == desc.channels;
  const int elem_bytes = static_cast<int>(size_of(desc.dtype));
  // PRNN_SCAN_STAGED=0|1: 0 never stages rows through shared memory, 1 stages them wherever the
  // tiling allows, also in launches of few tiles, and so takes 4-channel vectors where the
  // 16-bit forward would hold 8 raw in registers. PRNN_SCAN_PACKED16=0|1: 0 never takes 8-channel
  // vectors, 1 takes them wherever the tiling allows, also in launches of few tiles. For A/B runs
  // and tests; unset: the widest vector from kPacked16MinTiles tiles, staged by tile count.
  const std::optional<bool> staged = switch_knob("PRNN_SCAN_STAGED");
  const std::optional<bool> packed_knob = switch_knob("PRNN_SCAN_PACKED16");
  const bool packed16 = packed_knob.value_or(true) && !staged.value_or(false);
  const std::int64_t packed_min_tiles = packed_knob.value_or(false) ? 0 : scan::kPacked16MinTiles;
  for (scan::Mode mode : {scan::Mode::Forward, scan::Mode::Backward}) {
    for (int v = 0; v < 3; ++v) {
      Impl::Variant& var = s.variant[static_cast<int>(mode)][v];
      var.base = p;
      if (s.algo != ScanAlgo::Parallel) continue;
      const int width = Impl::kWidths[v] == 8 && !packed16 ? 4 : Impl::kWidths[v];
      var.tiling = scan::parallel_tiling(mode, desc.channels, desc.channels % 4 == 0 ? width : 1,
                                         elem_bytes, contiguous_rows);
      std::size_t need = scan::plan_parallel_scan(var.tiling, var.base);
      if (var.tiling.vector == 8 && var.base.num_tiles < packed_min_tiles) {
        var.base = p;
        var.tiling = scan::parallel_tiling(mode, desc.channels, 4, elem_bytes, contiguous_rows);
        need = scan::plan_parallel_scan(var.tiling, var.base);
      }
      bytes = std::max(bytes, need);
    }
  }
  if (staged) {
    for (auto& per_mode : s.variant) {
      for (Impl::Variant& var : per_mode) {
        if (*staged) var.tiling.staged_min_tiles = 0;
        else var.tiling.staged = false;
      }
    }
  }
  s.workspace = DeviceBuffer(bytes);
  scan::init_parallel_scan_workspace(s.workspace.data(), bytes);
  for (auto& per_mode : s.variant)
    for (Impl::Variant& var : per_mode)
      scan::bind_parallel_scan(var.tiling, s.workspace.data(), var.base);
#endif
}

LinearScan::~LinearScan() = default;
LinearScan::LinearScan(LinearScan&&) noexcept = default;
LinearScan& LinearScan::operator=(LinearScan&&) noexcept = default;

const ScanDesc& LinearScan::desc() const { return impl_->desc; }
ScanAlgo LinearScan::algo() const { return impl_->algo; }
const std::string& LinearScan::reason() const { return impl_->reason; }

void LinearScan::forward(const ScanForwardArgs& args, cudaStream_t stream) {
  const ScanDesc& d = impl_->desc;
  check_tensor(args.a, "a", d, d.sequence_shape());
  check_tensor(args.x, "x", d, d.sequence_shape());
  check_tensor(args.h, "h", d, d.sequence_shape());
  check_optional(args.h0, "h0", d, d.state_shape());
  check_optional(args.h_final, "h_final", d, d.state_shape());
  if (on_host(d)) {
    if (d.dtype == DType::F64) return cpu_forward<double>(d, args);
    return cpu_forward<float>(d, args);
  }
#if PRNN_WITH_CUDA
  const int vec = impl_->algo == ScanAlgo::Parallel
                      ? widest_vector(d, {args.a, args.x, args.h0, args.h, args.h_final})
                      : 1;
  scan::ScanParams p = impl_->params(scan::Mode::Forward, vec, args.lengths);
  p.a = args.a.data();
  p.u = args.x.data();
  p.init = args.h0.data();
  p.out = args.h.data();
  p.final_out = args.h_final.data();
  if (impl_->algo == ScanAlgo::Serial)
    return scan::launch_serial_scan(scan::Mode::Forward, elem_of(d.dtype), p, stream);
  scan::launch_parallel_scan(scan::Mode::Forward, elem_of(d.dtype),
                             impl_->pick(scan::Mode::Forward, vec).tiling, p, stream);
#else
  (void)stream;
#endif
}

void LinearScan::backward(const ScanBackwardArgs& args, cudaStream_t stream) {
  const ScanDesc& d = impl_->desc;
  check_tensor(args.a, "a", d, d.sequence_shape());
  check_tensor(args.h, "h", d, d.sequence_shape());
  check_tensor(args.dh, "dh", d, d.sequence_shape());
  check_tensor(args.da, "da", d, d.sequence_shape());
  check_tensor(args.dx, "dx", d, d.sequence_shape());
  check_optional(args.h0, "h0", d, d.state_shape());
  check_optional(args.dh_final, "dh_final", d, d.state_shape());
  check_optional(args.dh0, "dh0", d, d.state_shape());
  if (on_host(d)) {
    if (d.dtype == DType::F64) return cpu_backward<double>(d, args);
    return cpu_backward<float>(d, args);
  }
#if PRNN_WITH_CUDA
  const int vec = impl_->algo == ScanAlgo::Parallel
                      ? widest_vector(d, {args.a, args.h, args.h0, args.dh, args.dh_final, args.da,
                                          args.dx, args.dh0})
                      : 1;
  scan::ScanParams p = impl_->params(scan::Mode::Backward, vec, args.lengths);
  p.a = args.a.data();
  p.u = args.dh.data();
  p.h = args.h.data();
  p.init = args.dh_final.data();
  p.h0 = args.h0.data();
  p.out = args.dx.data();
  p.out2 = args.da.data();
  p.final_out = args.dh0.data();
  if (impl_->algo == ScanAlgo::Serial)
    return scan::launch_serial_scan(scan::Mode::Backward, elem_of(d.dtype), p, stream);
  scan::launch_parallel_scan(scan::Mode::Backward, elem_of(d.dtype),
                             impl_->pick(scan::Mode::Backward, vec).tiling, p, stream);
#else
  (void)stream;
#endif
}

void LinearScan::check(cudaStream_t stream) {
  if (on_host(impl_->desc)) return;
#if PRNN_WITH_CUDA
  PRNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  unsigned status = 0;
  unsigned* status_word = impl_->variant[0][0].base.status;
  PRNN_CUDA_CHECK(cudaMemcpy(&status, status_word, sizeof(status), cudaMemcpyDeviceToHost));
  if (status == 0) return;
  PRNN_CUDA_CHECK(cudaMemset(status_word, 0, sizeof(status)));
  std::string what;
  if (status & scan::kStatusBadLength) what += "a sequence length outside [0, steps]; ";
  if (status & scan::kStatusTimeout) what += "a lookback wait timed out (a bug: please report); ";
  throw RuntimeError("linear scan kernel", what, __FILE__, __LINE__);
#else
  (void)stream;
#endif
}

}  // namespace prnn
