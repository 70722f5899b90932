// GPU LinearLayer (GEMMs + fused scans, parallel and serial) against the CPU reference in double:
// every layer (GILR, GILR-LSTM, SRU with I == H and I != H, QRNN k = 1, 2, 10), forward y and
// state_n, backward dx, dparams (W, U, b blocks each) and dstate0, over odd sizes (T = 1 .. 4099
// with 1- and 2-level lookback, B = 1, 3, H = 5, 64, 130: scalar and 4-channel-vector kernels,
// partial lane blocks), with and without states, and with misaligned tensors (scalar fallback
// for H % 4 == 0). Outputs are poisoned with 0xFF bytes (NaN) before every run, so an element
// the layer fails to write fails the check. A second forward and backward must agree bit for
// bit (deterministic).
// Tolerance: relative L2 error ≤ 1e-5 (fp32 tensors and math vs the double reference on the
// same fp32-rounded inputs), for every output and every parameter block.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <map>

#include "layers/layer_case.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/layers.h"

namespace prnn {
namespace {

using test::LayerCase;
using test::LayerData;

constexpr double kTolF32 = 1e-5;

struct GpuCase {
  LayerCase c;
  ScanAlgo algo = ScanAlgo::Parallel;
  bool misalign = false;  // every user tensor one element into its allocation: no vectors
};

std::string name_of(const ::testing::TestParamInfo<GpuCase>& info) {
  const GpuCase& g = info.param;
  return std::string(to_string(g.algo)) + "_" + g.c.name() + (g.misalign ? "_misaligned" : "");
}

// An f32 device tensor, optionally starting one element into its allocation.
struct DevTensor {
  DeviceBuffer buf;
  std::size_t offset = 0;  // elements
  std::int64_t n = 0;
  float* data() const { return buf.data_as<float>() + offset; }
  TensorView view(const Shape& shape) const {
    return TensorView(data(), DType::F32, shape, Device::cuda(0));
  }
};

DevTensor poisoned(std::size_t n, bool misalign) {
  DevTensor t{DeviceBuffer((n + 1) * sizeof(float)), misalign ? 1u : 0u,
              static_cast<std::int64_t>(n)};
  t.buf.fill_bytes(0xFF);
  return t;
}

DevTensor upload(const std::vector<double>& v, bool misalign) {
  DevTensor t = poisoned(v.size(), misalign);
  std::vector<float> all(v.size() + 1, 0.0f);
  for (std::size_t i = 0; i < v.size(); ++i) all[t.offset + i] = static_cast<float>(v[i]);
  t.buf.copy_from_host(all.data(), all.size() * sizeof(float));
  return t;
}

std::vector<double> download(const DevTensor& t) {
  std::vector<float> all(static_cast<std::size_t>(t.n) + 1);
  t.buf.copy_to_host(all.data(), all.size() * sizeof(float));
  return std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(t.offset),
                             all.begin() + static_cast<std::ptrdiff_t>(t.offset) + t.n);
}

std::vector<double> slice(const std::vector<double>& v, std::size_t begin, std::size_t end) {
  return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(begin),
                             v.begin() + static_cast<std::ptrdiff_t>(end));
}

// The reference of a case, shared by its Parallel and Serial runs (fresh inputs every process).
const LayerData& reference_of(const LayerCase& c) {
  static std::map<std::string, LayerData> cache;
  auto it = cache.find(c.name());
  if (it == cache.end()) {
    test::Rng rng;
    it = cache.emplace(c.name(), test::make_layer_data(c, rng)).first;
  }
  return it->second;
}

// Checks a relative error against the fp32 tolerance and records it (--gtest_output shows it).
void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  const double err = test::rel_error(got, want);
  char text[32];
  std::snprintf(text, sizeof(text), "%.3e", err);
  ::testing::Test::RecordProperty("err_" + what, text);
  EXPECT_LE(err, kTolF32) << what;
}

class LinearLayerGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(LinearLayerGpu, MatchesReference) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const GpuCase g = GetParam();
  const LayerCase& c = g.c;
  const LayerData& s = reference_of(c);
  const bool mis = g.misalign;
  const Shape xs{c.T, c.B, c.I}, ys{c.T, c.B, c.H}, ss{c.desc().state_size() / c.H, c.B, c.H},
      ps{c.desc().param_count()};

  LinearLayer layer(c.desc(), c.T, c.B, DType::F32, Device::cuda(0), g.algo);
  ASSERT_EQ(layer.algo(), g.algo);
  const DevTensor x = upload(s.x, mis), params = upload(s.params, mis), dy = upload(s.dy, mis);
  const DevTensor state0 = upload(s.state0, mis), dstate_n = upload(s.dstate_n, mis);
  DevTensor y = poisoned(c.y_size(), mis), state_n = poisoned(s.state_n.size(), mis);
  DevTensor dx = poisoned(c.x_size(), mis), dparams = poisoned(c.param_size(), mis);
  const DevTensor dstate0 = poisoned(s.dstate0.size(), mis);
  auto optional = [&](const DevTensor& t) { return c.with_state ? t.view(ss) : TensorView(); };

  auto forward = [&] {
    layer.forward(x.view(xs), params.view(ps), optional(state0), y.view(ys), optional(state_n));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  };
  auto backward = [&] {
    layer.backward(x.view(xs), params.view(ps), optional(state0), dy.view(ys),
                   optional(dstate_n), dx.view(xs), dparams.view(ps), optional(dstate0));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  };

  forward();
  const auto y_first = download(y);
  y.buf.fill_bytes(0xFF);
  forward();
  const auto y_got = download(y);
  expect_close(y_got, s.y, "y");
  if (c.with_state) {
    expect_close(download(state_n), s.state_n, "state_n");
  }
  EXPECT_EQ(y_first, y_got) << "two forward runs differ: the layer must be deterministic";

  backward();
  const auto dparams_first = download(dparams), dx_first = download(dx);
  dx.buf.fill_bytes(0xFF);
  dparams.buf.fill_bytes(0xFF);
  backward();
  const auto dx_got = download(dx), dparams_got = download(dparams);
  expect_close(dx_got, s.dx, "dx");
  for (const test::ParamBlock& b : test::param_blocks(c))
    expect_close(slice(dparams_got, b.begin, b.end), slice(s.dparams, b.begin, b.end),
                 std::string("d") + b.name);
  if (c.with_state) {
    expect_close(download(dstate0), s.dstate0, "dstate0");
  }
  EXPECT_EQ(dx_first, dx_got) << "two backward runs differ: the layer must be deterministic";
  EXPECT_EQ(dparams_first, dparams_got) << "two backward runs differ";
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
}

}  // namespace
}  // namespace prnn
