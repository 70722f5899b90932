// GPU LinearLayer (GEMMs + fused scans, parallel and serial) against the CPU reference in double:
// every layer (GILR, GILR-LSTM, SRU with I == H and I != H, QRNN k = 1, 2, 10), forward y and
// state_n, backward dx, dparams (W, U, b blocks each) and dstate0, over odd sizes (T = 1 .. 4099
// with 1- and 2-level lookback, B = 1, 3, 5, H = 5, 64, 130: scalar and 4-channel-vector
// kernels, partial lane blocks), with and without states, and with misaligned tensors (scalar
// fallback for H % 4 == 0), and T = 300007 with 3 lookback levels (GILR-LSTM and GILR, vector
// and scalar kernels); f16 and bf16 layers; per-sequence lengths mixing 0, 1, T and
// lengths between, with both scans (their padded y and dx must be exactly zero). Outputs are
// poisoned with 0xFF bytes (NaN in every dtype) before every run, so an element the layer fails
// to write fails the check. A second forward and backward must agree bit for bit
// (deterministic), and a third backward without dx must leave dx untouched (still poisoned) and
// give the same dparams and dstate0 bit for bit. x and dy hold random values at padded steps,
// which the layer must ignore. GemmMath::Tf32 layers (f32 tensors) run every layer at a small
// and a long size.
// Tolerance, relative L2 error for every output and every parameter block, against the double
// reference on the same rounded inputs:
//   f32 tensors      ≤ 1e-5 (fp32 math);
//   f16 / bf16       ≤ 1e-2 (fp32 math on the exact 16-bit inputs; each output is rounded once to
//                    16 bits: ≤ 2^-11 (f16) / 2^-8 (bf16) relative per element);
//   f32, TF32 GEMMs  ≤ 2e-3 (both operands of every GEMM rounded to 10 mantissa bits, 2^-11
//                    relative each; the sums of K such products keep about that, and the gates
//                    and contracting recurrences after them do not amplify it);
//   f32, T·B ≥ 3e5   the parameter gradients ≤ 2e-4: each sums K = T·B fp32 products in the
//                    GEMMs, whose rounding grows as about 2^-24·√K (3.3e-5 at K = 300007); every
//                    other output keeps 1e-5.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <map>
#include <set>
#include <span>
#include <string>

#include "layers/layer_case.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/layers.h"
#include "support/expect.h"
#include "support/selection.h"

namespace prnn {
namespace {

using test::LayerCase;
using test::LayerData;

constexpr double kTolF32 = 1e-5;
constexpr double kTol16 = 1e-2;    // see the header: one 16-bit rounding per output element
constexpr double kTolTf32 = 2e-3;  // see the header: TF32 operands in every GEMM

double tolerance(DType dtype, GemmMath math) {
  if (dtype != DType::F32) return kTol16;
  return math == GemmMath::Tf32 ? kTolTf32 : kTolF32;
}

struct GpuCase {
  LayerCase c;
  ScanAlgo algo = ScanAlgo::Parallel;
  bool misalign = false;  // every user tensor one element into its allocation: no vectors
  GemmMath math = GemmMath::Fp32;
  double param_tol = 0.0;  // > tolerance(): the parameter gradients' (long sums, see the header)
};

std::string name_of(const ::testing::TestParamInfo<GpuCase>& info) {
  const GpuCase& g = info.param;
  return std::string(to_string(g.algo)) + "_" + g.c.name() + (g.misalign ? "_misaligned" : "") +
         (g.math == GemmMath::Tf32 ? "_tf32" : "");
}

// A device tensor of `dtype`, optionally starting one element into its allocation.
struct DevTensor {
  DeviceBuffer buf;
  DType dtype = DType::F32;
  std::size_t offset = 0;  // elements
  std::int64_t n = 0;
  void* data() const { return static_cast<char*>(buf.data()) + offset * size_of(dtype); }
  TensorView view(const Shape& shape) const {
    return TensorView(data(), dtype, shape, Device::cuda(0));
  }
};

DevTensor poisoned(std::size_t n, bool misalign, DType dtype) {
  DevTensor t{DeviceBuffer((n + 1) * size_of(dtype)), dtype, misalign ? 1u : 0u,
              static_cast<std::int64_t>(n)};
  t.buf.fill_bytes(0xFF);
  return t;
}

// v (already rounded to dtype) converted to dtype on the host and copied in.
DevTensor upload(const std::vector<double>& v, bool misalign, DType dtype) {
  DevTensor t = poisoned(v.size(), misalign, dtype);
  std::vector<float> all(v.size() + 1, 0.0f);
  for (std::size_t i = 0; i < v.size(); ++i) all[t.offset + i] = static_cast<float>(v[i]);
  std::vector<char> raw(all.size() * size_of(dtype));
  convert(all.data(), DType::F32, raw.data(), dtype, all.size());
  t.buf.copy_from_host(raw.data(), raw.size());
  return t;
}

std::vector<double> download(const DevTensor& t) {
  const std::size_t n = static_cast<std::size_t>(t.n) + 1;
  std::vector<char> raw(n * size_of(t.dtype));
  t.buf.copy_to_host(raw.data(), raw.size());
  std::vector<float> all(n);
  convert(raw.data(), t.dtype, all.data(), DType::F32, n);
  return std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(t.offset),
                             all.begin() + static_cast<std::ptrdiff_t>(t.offset) + t.n);
}

std::vector<double> slice(const std::vector<double>& v, std::size_t begin, std::size_t end) {
  return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(begin),
                             v.begin() + static_cast<std::ptrdiff_t>(end));
}

std::vector<GpuCase> cases();

// The reference of a case (its Parallel and Serial runs share it), on fresh inputs from `seed`,
// which a failing case names.
struct Reference {
  std::uint64_t seed = 0;
  LayerData data;
};

Reference make_reference(const LayerCase& c, std::uint64_t seed) {
  test::Rng rng(seed);
  return {seed, test::make_layer_data(c, rng)};
}

// The references of the selected cases, computed in parallel on first use.
const Reference& reference_of(const LayerCase& c) {
  static std::map<std::string, std::shared_future<Reference>> bank = [] {
    const std::set<std::string> selected = test::selected_test_names();
    std::map<std::string, std::shared_future<Reference>> m;
    for (const GpuCase& g : cases()) {
      if (selected.count("MatchesReference/" + name_of({g, 0})) == 0 || m.count(g.c.name()) != 0)
        continue;
      const std::uint64_t seed = test::fresh_seed();
      const LayerCase lc = g.c;
      m.emplace(lc.name(), std::async(std::launch::async, [lc, seed] {
                             return make_reference(lc, seed);
                           }).share());
    }
    return m;
  }();
  auto it = bank.find(c.name());
  if (it == bank.end())  // not in the selection: compute now
    it = bank.emplace(c.name(), std::async(std::launch::deferred,
                                           [c] { return make_reference(c, test::fresh_seed()); })
                                    .share())
             .first;
  return it->second.get();
}

// Checks a relative error against the dtype's tolerance and records it (--gtest_output shows it).
void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what, double tol) {
  const double err = test::rel_error(got, want);
  char text[32];
  std::snprintf(text, sizeof(text), "%.3e", err);
  ::testing::Test::RecordProperty("err_" + what, text);
  EXPECT_LE(err, tol) << what;
}

// Whether every byte of t is still the 0xFF poison.
bool still_poisoned(const DevTensor& t) {
  std::vector<unsigned char> raw(t.buf.bytes());
  t.buf.copy_to_host(raw.data(), raw.size());
  for (unsigned char b : raw)
    if (b != 0xFF) return false;
  return true;
}

// Elements of a [T, B, width] tensor at padded steps that are not exactly zero.
std::int64_t nonzero_padding(const LayerCase& c, const std::vector<double>& v, std::int64_t width) {
  std::int64_t bad = 0;
  for (std::int64_t t = 0; t < c.T; ++t)
    for (std::int64_t b = 0; b < c.B; ++b)
      if (c.padded(t, b))
        for (std::int64_t i = 0; i < width; ++i)
          bad += v[static_cast<std::size_t>((t * c.B + b) * width + i)] != 0.0 ? 1 : 0;
  return bad;
}

class LinearLayerGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(LinearLayerGpu, MatchesReference) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const GpuCase g = GetParam();
  const LayerCase& c = g.c;
  const Reference& r = reference_of(c);
  SCOPED_TRACE("PRNN_TEST_SEED=" + std::to_string(r.seed));
  const LayerData& s = r.data;
  const bool mis = g.misalign;
  const DType dt = c.dtype;
  const double tol = tolerance(dt, g.math);
  const Shape xs{c.T, c.B, c.I}, ys{c.T, c.B, c.H}, ss{c.desc().state_size() / c.H, c.B, c.H},
      ps{c.desc().param_count()};
  const std::span<const std::int32_t> lengths(c.lengths);

  LinearLayer layer(c.desc(), c.T, c.B, dt, Device::cuda(0), g.algo, g.math);
  ASSERT_EQ(layer.algo(), g.algo);
  ASSERT_EQ(layer.math(), g.math);
  const DevTensor x = upload(s.x, mis, dt), params = upload(s.params, mis, dt);
  const DevTensor dy = upload(s.dy, mis, dt);
  const DevTensor state0 = upload(s.state0, mis, dt), dstate_n = upload(s.dstate_n, mis, dt);
  DevTensor y = poisoned(c.y_size(), mis, dt), state_n = poisoned(s.state_n.size(), mis, dt);
  DevTensor dx = poisoned(c.x_size(), mis, dt), dparams = poisoned(c.param_size(), mis, dt);
  DevTensor dstate0 = poisoned(s.dstate0.size(), mis, dt);
  auto optional = [&](const DevTensor& t) { return c.with_state ? t.view(ss) : TensorView(); };

  auto forward = [&] {
    layer.forward(x.view(xs), params.view(ps), optional(state0), y.view(ys), optional(state_n),
                  nullptr, lengths);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  };
  auto backward = [&](bool with_dx) {
    layer.backward(x.view(xs), params.view(ps), optional(state0), dy.view(ys), optional(dstate_n),
                   with_dx ? dx.view(xs) : TensorView(), dparams.view(ps), optional(dstate0),
                   nullptr, lengths);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  };

  forward();
  const auto y_first = download(y);
  y.buf.fill_bytes(0xFF);
  state_n.buf.fill_bytes(0xFF);
  forward();
  const auto y_got = download(y);
  expect_close(y_got, s.y, "y", tol);
  if (c.with_state) {
    expect_close(download(state_n), s.state_n, "state_n", tol);
  }
  EXPECT_EQ(y_first, y_got) << "two forward runs differ: the layer must be deterministic";
  EXPECT_EQ(nonzero_padding(c, y_got, c.H), 0) << "y at padded steps must be exactly zero";

  backward(true);
  const auto dparams_first = download(dparams), dx_first = download(dx);
  dx.buf.fill_bytes(0xFF);
  dparams.buf.fill_bytes(0xFF);
  dstate0.buf.fill_bytes(0xFF);
  backward(true);
  const auto dx_got = download(dx), dparams_got = download(dparams);
  expect_close(dx_got, s.dx, "dx", tol);
  for (const test::ParamBlock& b : test::param_blocks(c))
    expect_close(slice(dparams_got, b.begin, b.end), slice(s.dparams, b.begin, b.end),
                 std::string("d") + b.name, std::max(tol, g.param_tol));
  if (c.with_state) {
    expect_close(download(dstate0), s.dstate0, "dstate0", tol);
  }
  EXPECT_EQ(nonzero_padding(c, dx_got, c.I), 0) << "dx at padded steps must be exactly zero";
  EXPECT_EQ(dx_first, dx_got) << "two backward runs differ: the layer must be deterministic";
  EXPECT_EQ(dparams_first, dparams_got) << "two backward runs differ";

  // Without dx: nothing written there, the other gradients unchanged bit for bit.
  const auto dstate0_got = download(dstate0);
  dx.buf.fill_bytes(0xFF);
  dparams.buf.fill_bytes(0xFF);
  dstate0.buf.fill_bytes(0xFF);
  backward(false);
  EXPECT_TRUE(still_poisoned(dx)) << "a backward without dx wrote into the dx buffer";
  EXPECT_EQ(download(dparams), dparams_got) << "dparams differs without dx";
  if (c.with_state) {
    EXPECT_EQ(download(dstate0), dstate0_got) << "dstate0 differs without dx";
  }
}

std::vector<GpuCase> cases() {
  using K = LinearLayerKind;
  struct Config {
    K kind;
    std::int64_t k;
    int input;  // 0: the size's I; 1: I = H (SRU without W_s); 2: I != H
  };
  const Config configs[] = {{K::Gilr, 1, 0}, {K::GilrLstm, 1, 0}, {K::Sru, 1, 1}, {K::Sru, 1, 2},
                            {K::Qrnn, 1, 0}, {K::Qrnn, 2, 0},     {K::Qrnn, 10, 0}};
  struct Size {
    std::int64_t T, B, I, H;
  };
  // (333, 3, 5, 130) and (4099, 3, 5, 130): 64-step tiles, 6 and 65 time tiles (2 lookback
  // levels); H = 64: 4-channel vectors; H = 5, 130: scalar, partial lane blocks.
  const Size sizes[] = {{1, 1, 5, 5}, {7, 3, 32, 64}, {333, 3, 5, 130}, {4099, 1, 32, 64},
                        {4099, 3, 5, 130}};
  std::vector<GpuCase> v;
  auto make = [](const Config& cf, const Size& sz, bool with_state) {
    LayerCase c{cf.kind, sz.T, sz.B, sz.I, sz.H, cf.k, with_state};
    if (cf.input == 1) c.I = c.H;
    if (cf.input == 2 && c.I == c.H) c.I = c.H + 27;
    return c;
  };
  for (ScanAlgo algo : {ScanAlgo::Parallel, ScanAlgo::Serial})
    for (const Config& cf : configs)
      for (const Size& sz : sizes) v.push_back({make(cf, sz, true), algo});
  for (const Config& cf : configs) {
    v.push_back({make(cf, {333, 3, 5, 64}, false), ScanAlgo::Parallel});          // no states
    v.push_back({make(cf, {333, 2, 32, 64}, true), ScanAlgo::Parallel, true});    // misaligned
  }
  // 16-bit layers: vector (H = 64) and scalar (H = 130) kernels, both scans.
  for (DType dtype : {DType::F16, DType::BF16})
    for (const Config& cf : configs) {
      for (const Size& sz : {Size{7, 3, 32, 64}, Size{333, 3, 5, 130}}) {
        LayerCase c = make(cf, sz, true);
        c.dtype = dtype;
        v.push_back({c, ScanAlgo::Parallel});
      }
      LayerCase c = make(cf, {333, 3, 5, 130}, true);
      c.dtype = dtype;
      v.push_back({c, ScanAlgo::Serial});
    }
  // Per-sequence lengths with 0, 1, T and lengths between, f32, both scans: scalar kernels with
  // partial lane blocks (H = 130), vectors (H = 64), and 65 time tiles (T = 4099) where a length
  // ends inside a tile and whole tiles are padding.
  struct Masked {
    Size size;
    std::vector<std::int32_t> lengths;
  };
  const Masked masked[] = {{{333, 5, 5, 130}, {0, 333, 1, 170, 64}},
                           {{7, 4, 32, 64}, {7, 0, 3, 1}},
                           {{4099, 3, 5, 64}, {2050, 4099, 0}}};
  for (ScanAlgo algo : {ScanAlgo::Parallel, ScanAlgo::Serial})
    for (const Config& cf : configs)
      for (const Masked& m : masked) {
        LayerCase c = make(cf, m.size, true);
        c.lengths = m.lengths;
        v.push_back({c, algo});
      }
  // TF32 GEMMs: vectors (H = 64) and a long scalar case with 2 lookback levels (H = 130).
  for (const Config& cf : configs)
    for (const Size& sz : {Size{7, 3, 32, 64}, Size{4099, 3, 5, 130}})
      v.push_back({make(cf, sz, true), ScanAlgo::Parallel, false, GemmMath::Tf32});
  // Three lookback levels: more than 32² time tiles (128 steps per tile backward, 256 forward),
  // 4-channel vectors with one lane block (H = 32) and with four (B·H = 128, the long-memory
  // trainer's count), and scalar kernels (H = 5).
  for (const Size& sz : {Size{300007, 1, 3, 32}, Size{300007, 1, 3, 5}})
    v.push_back({make(configs[1], sz, true), ScanAlgo::Parallel, false, GemmMath::Fp32, 2e-4});
  v.push_back({make(configs[0], {300007, 4, 3, 32}, true), ScanAlgo::Parallel, false,
               GemmMath::Fp32, 2e-4});
  for (const Config& cf : configs) {
    LayerCase c = make(cf, {333, 5, 5, 64}, false);  // lengths without states
    c.lengths = {0, 333, 1, 170, 64};
    v.push_back({c, ScanAlgo::Parallel});
    c = make(cf, {333, 5, 5, 130}, true);  // lengths in a 16-bit layer
    c.dtype = DType::BF16;
    c.lengths = {0, 333, 1, 170, 64};
    v.push_back({c, ScanAlgo::Parallel});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Layers, LinearLayerGpu, ::testing::ValuesIn(cases()), name_of);

TEST(LinearLayerGpuErrors, BackwardBeforeForwardIsAnError) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  LinearLayerDesc d;
  d.kind = LinearLayerKind::Gilr;
  d.input_size = 3;
  d.hidden_size = 4;
  LinearLayer layer(d, 5, 2, DType::F32, Device::cuda(0));
  EXPECT_EQ(layer.algo(), ScanAlgo::Parallel);
  DeviceBuffer x(30 * 4), params(d.param_count() * 4), dy(40 * 4), dx(30 * 4),
      dparams(d.param_count() * 4);
  try {
    layer.backward(x.view(DType::F32, {5, 2, 3}), params.view(DType::F32, {d.param_count()}), {},
                   dy.view(DType::F32, {5, 2, 4}), {}, dx.view(DType::F32, {5, 2, 3}),
                   dparams.view(DType::F32, {d.param_count()}), {});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("expected a forward() first"), std::string::npos)
        << e.what();
  }
}

TEST(LinearLayerGpuErrors, UnsupportedDtypes) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  LinearLayerDesc d;
  d.input_size = 3;
  d.hidden_size = 4;
  EXPECT_THROW(LinearLayer(d, 5, 2, DType::F64, Device::cuda(0)), Unsupported);
  EXPECT_THROW(LinearLayer(d, 5, 2, DType::F32, Device::cuda(0), ScanAlgo::Reference),
               Unsupported);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    EXPECT_EQ(LinearLayer(d, 5, 2, dtype, Device::cuda(0)).desc().hidden_size, 4);
}

// Bad lengths throw before any work; the backward must be given the forward's lengths.
TEST(LinearLayerGpuErrors, LengthsAreChecked) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  LinearLayerDesc d;
  d.kind = LinearLayerKind::Qrnn;
  d.input_size = 3;
  d.hidden_size = 4;
  d.window = 2;
  LinearLayer layer(d, 5, 2, DType::F32, Device::cuda(0));
  const std::int64_t np = d.param_count();
  DeviceBuffer x(30 * 4), params(static_cast<std::size_t>(np) * 4), y(40 * 4), dy(40 * 4),
      dx(30 * 4), dparams(static_cast<std::size_t>(np) * 4);
  x.fill_bytes(0);
  params.fill_bytes(0);
  dy.fill_bytes(0);
  const TensorView vx = x.view(DType::F32, {5, 2, 3}), vp = params.view(DType::F32, {np});
  const TensorView vy = y.view(DType::F32, {5, 2, 4}), vdy = dy.view(DType::F32, {5, 2, 4});
  const TensorView vdx = dx.view(DType::F32, {5, 2, 3}), vdp = dparams.view(DType::F32, {np});
  const std::vector<std::int32_t> too_long = {5, 6}, negative = {-1, 5}, forward_lengths = {5, 2};
  const std::vector<std::int32_t> other = {5, 3};
  test::expect_invalid([&] { layer.forward(vx, vp, {}, vy, {}, nullptr, too_long); },
                       {"lengths[1]: expected a length in [0, 5] (steps), got 6"});
  test::expect_invalid([&] { layer.forward(vx, vp, {}, vy, {}, nullptr, negative); },
                       {"lengths[0]: expected a length in [0, 5] (steps), got -1"});
  layer.forward(vx, vp, {}, vy, {}, nullptr, forward_lengths);
  test::expect_invalid(
      [&] { layer.backward(vx, vp, {}, vdy, {}, vdx, vdp, {}, nullptr, other); },
      {"LinearLayer::backward: lengths[1]: expected 2 (the last forward()'s), got 3"});
  test::expect_invalid([&] { layer.backward(vx, vp, {}, vdy, {}, vdx, vdp, {}); },
                       {"lengths[1]: expected 2 (the last forward()'s), got 5"});
  layer.backward(vx, vp, {}, vdy, {}, vdx, vdp, {}, nullptr, forward_lengths);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace prnn
