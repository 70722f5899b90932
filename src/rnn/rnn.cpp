// prnn::Rnn: argument checks, algorithm choice, and dispatch. Host tensors run the CPU
// reference (src/reference/rnn.h); device tensors run the layer driver of src/gemm_rnn/ with
// either recurrence: the persistent kernels (src/persistent/) or a cuBLAS GEMM per step. Auto
// picks persistent when it can run the problem and says why not otherwise.
//
// Host path: the reference has no reserve (its backward recomputes the forward), so forward()
// keeps copies of x, h0, c0 in host buffers sized by the constructor, backward_data() runs the
// reference backward on them and keeps dparams, and backward_weights() hands dparams out.
// Sequence lengths are checked here once; the host path keeps a copy for the backward, the
// device path hands them to the driver, which uploads them.
#include "prnn/rnn.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "core/check.h"
#include "prnn/device.h"
#include "reference/rnn.h"

#if PRNN_WITH_CUDA
#include "core/cuda_check.h"
#include "core/device_convert.h"
#include "gemm_rnn/gemm_rnn.h"
#endif

namespace prnn {

const char* to_string(RnnAlgo a) {
  switch (a) {
    case RnnAlgo::Auto: return "auto";
    case RnnAlgo::Persistent: return "persistent";
    case RnnAlgo::GemmPerStep: return "gemm_per_step";
    case RnnAlgo::Reference: return "reference";
  }
  return "?";
}

RnnAlgo parse_rnn_algo(const std::string& name) {
  for (RnnAlgo a : {RnnAlgo::Auto, RnnAlgo::Persistent, RnnAlgo::GemmPerStep, RnnAlgo::Reference})
    if (name == to_string(a)) return a;
  throw InvalidArgument(fmt::format(
      "rnn algorithm: expected auto, persistent, gemm_per_step or reference, got '{}'", name));
}

namespace {

// The shapes every call checks against.
struct Shapes {
  Shape x, y, state, params;
};

Shapes shapes_of(const RnnDesc& d, std::int64_t T, std::int64_t B) {
  const std::int64_t LD = d.layers * d.directions(), H = d.hidden_size;
  return {{T, B, d.input_size}, {T, B, d.directions() * H}, {LD, B, H}, {rnn_param_count(d)}};
}

// Host bytes of n elements of `dtype`.
std::vector<std::byte> host_buffer(std::int64_t n, DType dtype) {
  return std::vector<std::byte>(static_cast<std::size_t>(n) * size_of(dtype));
}

template <class T>
const T* ptr_or_null(const TensorView& t) {
  return t.empty() ? nullptr : t.data_as<const T>();
}
template <class T>
T* out_or_null(const TensorView& t) {
  return t.empty() ? nullptr : t.data_as<T>();
}

}  // namespace

struct Rnn::Impl {
  RnnDesc desc;
  std::int64_t steps = 0, batch = 0;
  Device device;
  RnnAlgo algo = RnnAlgo::Reference;
  std::string reason;
  Shapes shapes;
  bool have_forward = false;        // a forward() filled the reserve
  bool have_backward_data = false;  // a backward_data() followed it
  bool forward_had_h0 = false, forward_had_c0 = false;

  // Host path: the last forward's x, h0, c0 (and whether h0, c0 were given) and the dparams
  // of the last backward_data.
  std::vector<std::byte> host_x, host_h0, host_c0, host_dparams;
  bool host_has_h0 = false, host_has_c0 = false;
  std::vector<std::int32_t> host_lengths;  // [B], the last forward's lengths
  bool host_has_lengths = false;

#if PRNN_WITH_CUDA
  std::unique_ptr<gemm_rnn::GemmRnn> gemm;
  // 16-bit tensors: the fp32 device copies the layer driver runs on, converted on the way in and
  // out (fp32 math throughout; the 16-bit values are exactly representable in fp32).
  struct Staging {
    DeviceBuffer x, params, h0, c0, y, hn, cn, dy, dhn, dcn, dx, dh0, dc0, dparams;
  };
  std::unique_ptr<Staging> staging;

  // A call's conversions of its 16-bit tensors one way, gathered and launched together
  // (convert_on_device over segments, kMaxConvertSegments a launch): a small tensor's conversion
  // costs about a launch. A forward whose driver reads W_hh in 16 bits converts the ranges
  // between each layer's W_hh, so a deep network's count grows with its layers.
  using Conversions = std::vector<ConvertSegment>;
  static void convert(const Conversions& c, DType from, DType to, cudaStream_t stream) {
    const int count = static_cast<int>(c.size());
    for (int at = 0; at < count; at += kMaxConvertSegments)
      convert_on_device(c.data() + at, std::min(kMaxConvertSegments, count - at), from, to, stream);
  }

  // The fp32 pointer the driver reads for input t: t itself (f32), its copy in `buf` (16-bit,
  // converted by `in`), or null (empty).
  static const float* in32(const TensorView& t, DeviceBuffer& buf, Conversions& in) {
    if (t.empty()) return nullptr;
    if (t.dtype() == DType::F32) return t.data_as<const float>();
    in.push_back({t.data(), buf.data(), t.numel()});
    return buf.data_as<const float>();
  }
  // params' fp32 copy in `buf` for forward(): every block but layer 0's W_ih where `input0` is
  // false and every W_hh where `w_hh` is false (those the driver reads in 16 bits:
  // GemmRnn::forward_reads_f32_input, forward_reads_f32_w_hh); the other ranges converted by
  // `in`, in order (all of params, one range, where both are true).
  const float* params32_for_forward(const TensorView& params, DeviceBuffer& buf, bool input0,
                                    bool w_hh, Conversions& in) const {
    std::vector<std::pair<std::int64_t, std::int64_t>> skip;  // [begin, end), elements
    for (std::int64_t l = 0; l < desc.layers; ++l)
      for (int d = 0; d < desc.directions(); ++d) {
        const RnnParamOffsets o = rnn_param_offsets(desc, l, d);
        if (l == 0 && !input0) skip.emplace_back(o.w_ih, o.w_ih + desc.gate_rows() * o.input_size);
        if (!w_hh) skip.emplace_back(o.w_hh, o.w_hh + desc.gate_rows() * desc.hidden_size);
      }
    std::sort(skip.begin(), skip.end());
    const std::size_t size = size_of(params.dtype());
    const auto range = [&](std::int64_t begin, std::int64_t end) {
      if (end > begin)
        in.push_back({static_cast<const std::byte*>(params.data()) + begin * size,
                      buf.data_as<float>() + begin, end - begin});
    };
    std::int64_t at = 0;
    for (const auto& [begin, end] : skip) {
      range(at, begin);
      at = std::max(at, end);
    }
    range(at, params.numel());
    return buf.data_as<const float>();
  }
  // The fp32 pointer the driver writes output t to; `out` converts it into t afterwards.
  static float* out32(const TensorView& t, DeviceBuffer& buf, Conversions& out) {
    if (t.empty()) return nullptr;
    if (t.dtype() == DType::F32) return t.data_as<float>();
    out.push_back({buf.data(), t.data(), t.numel()});
    return buf.data_as<float>();
  }
#endif

  DType dtype() const { return desc.weight_dtype; }
  bool on_host() const { return device.kind == MemoryKind::Host; }
  bool lstm() const { return has_cell_state(desc.cell); }

  void check_required(const TensorView& t, const char* name, const Shape& shape) const {
    check_not_null(t, name);
    check_shape(t, name, shape);
    check_dtype(t, name, dtype());
    check_device(t, name, device);
    check_contiguous(t, name);
  }
  void check_optional(const TensorView& t, const char* name, const Shape& shape) const {
    if (!t.empty()) check_required(t, name, shape);
  }
  // c0, cn, dcn, dc0: optional for LSTM, absent for every other cell.
  void check_cell_state(const TensorView& t, const char* name) const {
    if (lstm()) return check_optional(t, name, shapes.state);
    PRNN_EXPECT(t.empty(), "{}: expected an empty view ({} has no cell state), got a {} tensor",
                name, to_string(desc.cell), to_string(t.shape()));
  }

  // lengths: empty, or B entries each in [1, T]; InvalidArgument names the first bad entry.
  void check_lengths(std::span<const std::int32_t> lengths) const {
    if (lengths.empty()) return;
    PRNN_EXPECT(static_cast<std::int64_t>(lengths.size()) == batch,
                "lengths: expected {} entries (one per batch row) or none, got {}", batch,
                lengths.size());
    for (std::size_t b = 0; b < lengths.size(); ++b)
      PRNN_EXPECT(lengths[b] >= 1 && lengths[b] <= steps,
                  "lengths[{}]: expected a length in [1, {}] (steps), got {}", b, steps,
                  lengths[b]);
  }

  template <class T>
  void host_forward(const TensorView& x, const TensorView& params, const TensorView& h0,
                    const TensorView& c0, const TensorView& y, const TensorView& hn,
                    const TensorView& cn, std::span<const std::int32_t> lengths);
  template <class T>
  void host_backward_data(const TensorView& params, const TensorView& dy, const TensorView& dhn,
                          const TensorView& dcn, const TensorView& dx, const TensorView& dh0,
                          const TensorView& dc0);
};

std::string Rnn::can_implement(const RnnDesc& desc, std::int64_t steps, std::int64_t batch,
                               Device device, RnnAlgo algo) {
  desc.validate();
  check_positive(steps, "Rnn steps");
  check_positive(batch, "Rnn batch");
  if (device.kind == MemoryKind::Host) {
    if (algo != RnnAlgo::Auto && algo != RnnAlgo::Reference)
      return fmt::format("{} runs on the GPU; host tensors use the reference", to_string(algo));
    if (desc.weight_dtype != DType::F32 && desc.weight_dtype != DType::F64)
      return fmt::format("the CPU reference takes f32 or f64, got {}",
                         to_string(desc.weight_dtype));
    if (desc.gemm_math != GemmMath::Fp32)
      return fmt::format("the CPU reference computes in {} (gemm_math fp32), got gemm_math {}",
                         to_string(desc.weight_dtype), to_string(desc.gemm_math));
    return {};
  }
  if (algo == RnnAlgo::Reference) return "the reference runs on host tensors only";
#if PRNN_WITH_CUDA
  const int count = device_count();
  if (count == 0) return "no GPU: " + no_device_reason();
  if (device.index < 0 || device.index >= count)
    return fmt::format("GPU {} does not exist (this machine has {})", device.index, count);
  if (algo == RnnAlgo::Persistent)
    return gemm_rnn::can_implement_persistent(desc, steps, batch, device.index);
  return gemm_rnn::can_implement(desc, steps, batch);
#else
  return "prnn was built without CUDA (PRNN_CUDA=OFF)";
#endif
}

Rnn::Rnn(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, Device device,
         RnnAlgo algo)
    : impl_(std::make_unique<Impl>()) {
  const std::string why_not = can_implement(desc, steps, batch, device, algo);
  if (!why_not.empty()) throw Unsupported(fmt::format("Rnn ({})", to_string(algo)), why_not);
  Impl& s = *impl_;
  s.desc = desc;
  s.steps = steps;
  s.batch = batch;
  s.device = device;
  s.shapes = shapes_of(desc, steps, batch);
  if (s.on_host()) {
    s.algo = RnnAlgo::Reference;
    s.reason = "host tensors: the CPU reference";
    s.host_x = host_buffer(s.shapes.x.numel(), s.dtype());
    s.host_h0 = host_buffer(s.shapes.state.numel(), s.dtype());
    if (s.lstm()) s.host_c0 = host_buffer(s.shapes.state.numel(), s.dtype());
    s.host_dparams = host_buffer(s.shapes.params.numel(), s.dtype());
    s.host_lengths.assign(static_cast<std::size_t>(batch), 0);
    return;
  }
#if PRNN_WITH_CUDA
  s.algo = algo;
  s.reason = "requested";
  if (algo == RnnAlgo::Auto) {
    s.algo = RnnAlgo::GemmPerStep;
    if (std::string why = gemm_rnn::can_implement_persistent(desc, steps, batch, device.index);
        !why.empty()) {
      s.reason = "auto: gemm_per_step, since persistent cannot run it: " + why;
    } else if (why = gemm_rnn::auto_prefers_gemm_per_step(desc, batch, device.index);
               !why.empty()) {
      s.reason = "auto: gemm_per_step, faster here than persistent: " + why;
    } else {
      s.algo = RnnAlgo::Persistent;
      s.reason = "auto: persistent (W_hh fits on chip, every CTA co-resident)";
    }
  }
  s.gemm = std::make_unique<gemm_rnn::GemmRnn>(desc, steps, batch, device.index,
                                               s.algo == RnnAlgo::Persistent
                                                   ? gemm_rnn::Recurrence::Persistent
                                                   : gemm_rnn::Recurrence::PerStepGemm);
  if (desc.weight_dtype != DType::F32) {
    auto f32 = [](const Shape& shape) {
      return DeviceBuffer(static_cast<std::size_t>(shape.numel()) * sizeof(float));
    };
    const Shapes& sh = s.shapes;
    s.staging = std::make_unique<Impl::Staging>(Impl::Staging{
        f32(sh.x), f32(sh.params), f32(sh.state), f32(sh.state), f32(sh.y), f32(sh.state),
        f32(sh.state), f32(sh.y), f32(sh.state), f32(sh.state), f32(sh.x), f32(sh.state),
        f32(sh.state), f32(sh.params)});
  }
#endif
}

Rnn::~Rnn() = default;
Rnn::Rnn(Rnn&&) noexcept = default;
Rnn& Rnn::operator=(Rnn&&) noexcept = default;

const RnnDesc& Rnn::desc() const { return impl_->desc; }
std::int64_t Rnn::steps() const { return impl_->steps; }
std::int64_t Rnn::batch() const { return impl_->batch; }
Device Rnn::device() const { return impl_->device; }
RnnAlgo Rnn::algo() const { return impl_->algo; }
const std::string& Rnn::reason() const { return impl_->reason; }

std::size_t Rnn::reserve_bytes() const {
  const Impl& s = *impl_;
  if (s.on_host())
    return s.host_x.size() + s.host_h0.size() + s.host_c0.size() + s.host_dparams.size();
#if PRNN_WITH_CUDA
  return s.gemm->reserve_bytes();
#else
  return 0;
#endif
}

std::size_t Rnn::workspace_bytes() const {
  const Impl& s = *impl_;
  if (s.on_host()) return 0;
#if PRNN_WITH_CUDA
  return s.gemm->workspace_bytes();
#else
  return 0;
#endif
}

template <class T>
void Rnn::Impl::host_forward(const TensorView& x, const TensorView& params, const TensorView& h0,
                             const TensorView& c0, const TensorView& y, const TensorView& hn,
                             const TensorView& cn, std::span<const std::int32_t> lengths) {
  std::memcpy(host_x.data(), x.data(), host_x.size());
  host_has_lengths = !lengths.empty();
  if (host_has_lengths) std::copy(lengths.begin(), lengths.end(), host_lengths.begin());
  host_has_h0 = !h0.empty();
  if (host_has_h0) std::memcpy(host_h0.data(), h0.data(), host_h0.size());
  host_has_c0 = lstm() && !c0.empty();
  if (host_has_c0) std::memcpy(host_c0.data(), c0.data(), host_c0.size());
  reference::rnn_forward<T>(desc, steps, batch, x.data_as<const T>(), ptr_or_null<T>(h0),
                            ptr_or_null<T>(c0), params.data_as<const T>(), y.data_as<T>(),
                            out_or_null<T>(hn), out_or_null<T>(cn),
                            host_has_lengths ? host_lengths.data() : nullptr);
}

template <class T>
void Rnn::Impl::host_backward_data(const TensorView& params, const TensorView& dy,
                                   const TensorView& dhn, const TensorView& dcn,
                                   const TensorView& dx, const TensorView& dh0,
                                   const TensorView& dc0) {
  reference::rnn_backward<T>(
      desc, steps, batch, reinterpret_cast<const T*>(host_x.data()),
      host_has_h0 ? reinterpret_cast<const T*>(host_h0.data()) : nullptr,
      host_has_c0 ? reinterpret_cast<const T*>(host_c0.data()) : nullptr,
      params.data_as<const T>(), dy.data_as<const T>(), ptr_or_null<T>(dhn), ptr_or_null<T>(dcn),
      out_or_null<T>(dx), out_or_null<T>(dh0), out_or_null<T>(dc0),
      reinterpret_cast<T*>(host_dparams.data()), host_has_lengths ? host_lengths.data() : nullptr);
}

void Rnn::forward(const TensorView& x, const TensorView& params, const TensorView& h0,
                  const TensorView& c0, const TensorView& y, const TensorView& hn,
                  const TensorView& cn, cudaStream_t stream,
                  std::span<const std::int32_t> lengths) {
  Impl& s = *impl_;
  s.check_required(x, "x", s.shapes.x);
  s.check_required(params, "params", s.shapes.params);
  s.check_optional(h0, "h0", s.shapes.state);
  s.check_cell_state(c0, "c0");
  s.check_required(y, "y", s.shapes.y);
  s.check_optional(hn, "hn", s.shapes.state);
  s.check_cell_state(cn, "cn");
  s.check_lengths(lengths);
  s.have_forward = false;
  s.have_backward_data = false;
  s.forward_had_h0 = !h0.empty();
  s.forward_had_c0 = !c0.empty();
  if (s.on_host()) {
    if (s.dtype() == DType::F64)
      s.host_forward<double>(x, params, h0, c0, y, hn, cn, lengths);
    else
      s.host_forward<float>(x, params, h0, c0, y, hn, cn, lengths);
    s.have_forward = true;
    return;
  }
#if PRNN_WITH_CUDA
  Impl::Staging* st = s.staging.get();
  if (st == nullptr) {
    gemm_rnn::ForwardArgs a;
    a.x = x.data_as<const float>();
    a.params = params.data_as<const float>();
    a.h0 = ptr_or_null<float>(h0);
    a.c0 = ptr_or_null<float>(c0);
    a.y = y.data_as<float>();
    a.hn = out_or_null<float>(hn);
    a.cn = out_or_null<float>(cn);
    a.lengths = lengths;
    s.gemm->forward(a, stream);
  } else {
    // x, layer 0's W_ih and W_hh in fp32 only where the driver reads them so (else its input
    // GEMM and its persistent kernel read the 16-bit tensors).
    const bool f32_input = s.gemm->forward_reads_f32_input();
    const bool f32_w_hh = s.gemm->forward_reads_f32_w_hh();
    Impl::Conversions in, out;
    gemm_rnn::ForwardArgs a;
    a.x = f32_input ? Impl::in32(x, st->x, in) : nullptr;
    a.params = s.params32_for_forward(params, st->params, f32_input, f32_w_hh, in);
    a.x16 = x.data();
    a.params16 = params.data();
    a.dtype16 = params.dtype();
    a.h0 = Impl::in32(h0, st->h0, in);
    a.c0 = Impl::in32(c0, st->c0, in);
    a.y = Impl::out32(y, st->y, out);
    a.hn = Impl::out32(hn, st->hn, out);
    a.cn = Impl::out32(cn, st->cn, out);
    a.lengths = lengths;
    Impl::convert(in, s.dtype(), DType::F32, stream);
    s.gemm->forward(a, stream);
    Impl::convert(out, DType::F32, s.dtype(), stream);
  }
  s.have_forward = true;
#else
  (void)stream;
#endif
}

void Rnn::backward_data(const TensorView& params, const TensorView& dy, const TensorView& dhn,
                        const TensorView& dcn, const TensorView& dx, const TensorView& dh0,
                        const TensorView& dc0, cudaStream_t stream) {
  Impl& s = *impl_;
  s.check_required(params, "params", s.shapes.params);
  s.check_required(dy, "dy", s.shapes.y);
  s.check_optional(dhn, "dhn", s.shapes.state);
  s.check_cell_state(dcn, "dcn");
  s.check_optional(dx, "dx", s.shapes.x);
  s.check_optional(dh0, "dh0", s.shapes.state);
  s.check_cell_state(dc0, "dc0");
  PRNN_EXPECT(s.have_forward,
              "Rnn::backward_data: expected a forward() first (backward reads its reserve), got "
              "none");
  if (s.on_host()) {
    if (s.dtype() == DType::F64)
      s.host_backward_data<double>(params, dy, dhn, dcn, dx, dh0, dc0);
    else
      s.host_backward_data<float>(params, dy, dhn, dcn, dx, dh0, dc0);
    s.have_backward_data = true;
    return;
  }
#if PRNN_WITH_CUDA
  Impl::Staging* st = s.staging.get();
  if (st == nullptr) {
    gemm_rnn::BackwardDataArgs a;
    a.params = params.data_as<const float>();
    a.dy = dy.data_as<const float>();
    a.dhn = ptr_or_null<float>(dhn);
    a.dcn = ptr_or_null<float>(dcn);
    a.dx = out_or_null<float>(dx);
    a.dh0 = out_or_null<float>(dh0);
    a.dc0 = out_or_null<float>(dc0);
    s.gemm->backward_data(a, stream);
  } else {
    Impl::Conversions in, out;
    gemm_rnn::BackwardDataArgs a;
    a.params = Impl::in32(params, st->params, in);
    a.dy = Impl::in32(dy, st->dy, in);
    a.dhn = Impl::in32(dhn, st->dhn, in);
    a.dcn = Impl::in32(dcn, st->dcn, in);
    a.dx = Impl::out32(dx, st->dx, out);
    a.dh0 = Impl::out32(dh0, st->dh0, out);
    a.dc0 = Impl::out32(dc0, st->dc0, out);
    Impl::convert(in, s.dtype(), DType::F32, stream);
    s.gemm->backward_data(a, stream);
    Impl::convert(out, DType::F32, s.dtype(), stream);
  }
  s.have_backward_data = true;
#else
  (void)stream;
#endif
}

void Rnn::check(cudaStream_t stream) {
  if (impl_->on_host()) return;
#if PRNN_WITH_CUDA
  PRNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  impl_->gemm->throw_if_failed();
#else
  (void)stream;
#endif
}

void Rnn::backward_weights(const TensorView& x, const TensorView& h0, const TensorView& c0,
                           const TensorView& dparams, cudaStream_t stream) {
  Impl& s = *impl_;
  s.check_required(x, "x", s.shapes.x);
  s.check_optional(h0, "h0", s.shapes.state);
  s.check_cell_state(c0, "c0");
  s.check_required(dparams, "dparams", s.shapes.params);
  PRNN_EXPECT(s.have_backward_data,
              "Rnn::backward_weights: expected forward() then backward_data() first (it reads "
              "the gradients backward_data leaves in the reserve), got {}",
              s.have_forward ? "a forward() without backward_data()" : "neither");
  PRNN_EXPECT(h0.empty() != s.forward_had_h0 && c0.empty() != s.forward_had_c0,
              "Rnn::backward_weights: expected the initial states of the last forward() (h0 {}, "
              "c0 {}), got h0 {}, c0 {}",
              s.forward_had_h0 ? "given" : "empty", s.forward_had_c0 ? "given" : "empty",
              h0.empty() ? "empty" : "given", c0.empty() ? "empty" : "given");
  if (s.on_host()) {
    std::memcpy(dparams.data(), s.host_dparams.data(), s.host_dparams.size());
    return;
  }
#if PRNN_WITH_CUDA
  Impl::Staging* st = s.staging.get();
  gemm_rnn::BackwardWeightsArgs a;
  if (st == nullptr) {
    a.x = x.data_as<const float>();
    a.h0 = ptr_or_null<float>(h0);
    a.dparams = dparams.data_as<float>();
    s.gemm->backward_weights(a, stream);
  } else {
    Impl::Conversions in, out;
    a.x = Impl::in32(x, st->x, in);
    a.h0 = Impl::in32(h0, st->h0, in);
    a.dparams = Impl::out32(dparams, st->dparams, out);
    Impl::convert(in, s.dtype(), DType::F32, stream);
    s.gemm->backward_weights(a, stream);
    Impl::convert(out, DType::F32, s.dtype(), stream);
  }
#else
  (void)stream;
#endif
}

}  // namespace prnn
