// LinearLayer on host tensors (the CPU reference path) and argument validation of LinearLayer:
// the host path returns exactly what the reference returns (f32 and f64, with and without states,
// with and without per-sequence lengths), bad lengths throw InvalidArgument naming the entry,
// and bad descs, sizes, shapes, dtypes, devices, null or strided tensors throw InvalidArgument
// naming the argument, what was expected and what was given; requests a device cannot run throw
// Unsupported. dx is optional: without it the other gradients are the same.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/layer_case.h"
#include "prnn/error.h"
#include "prnn/layers.h"
#include "support/expect.h"

namespace prnn {
namespace {

using test::expect_invalid;

using test::LayerCase;

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
TensorView view(const std::vector<T>& v, Shape shape) {
  return v.empty() ? TensorView() : TensorView::of(v.data(), shape);
}

template <class T>
void expect_host_matches_reference(const LayerCase& c) {
  SCOPED_TRACE(c.name() + (sizeof(T) == 8 ? " f64" : " f32"));
  test::Rng rng;
  const test::LayerData s = test::make_layer_data(c, rng);
  const LinearLayerDesc d = c.desc();
  const auto x = cast<T>(s.x), params = cast<T>(s.params), state0 = cast<T>(s.state0);
  const auto dy = cast<T>(s.dy), dstate_n = cast<T>(s.dstate_n);
  const Shape xs{c.T, c.B, c.I}, ys{c.T, c.B, c.H}, ss{d.state_size() / c.H, c.B, c.H},
      ps{d.param_count()};

  // Expected: the reference called directly in T.
  std::vector<T> y(c.y_size()), state_n(c.with_state ? c.state_size() : 0);
  std::vector<T> dx(c.x_size()), dparams(c.param_size()), dstate0(state_n.size());
  auto ptr = [](const std::vector<T>& v) { return v.empty() ? nullptr : v.data(); };
  auto mptr = [](std::vector<T>& v) { return v.empty() ? nullptr : v.data(); };
  reference::linear_layer_forward<T>(d, c.T, c.B, x.data(), params.data(), ptr(state0), y.data(),
                                     mptr(state_n), c.lengths_or_null());
  reference::linear_layer_backward<T>(d, c.T, c.B, x.data(), params.data(), ptr(state0), dy.data(),
                                      ptr(dstate_n), dx.data(), dparams.data(), mptr(dstate0),
                                      c.lengths_or_null());

  LinearLayer layer(d, c.T, c.B, dtype_v<T>, Device::host());
  EXPECT_EQ(layer.algo(), ScanAlgo::Reference);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> got_y(y.size(), nan), got_state_n(state_n.size(), nan);
  std::vector<T> got_dx(dx.size(), nan), got_dparams(dparams.size(), nan);
  std::vector<T> got_dstate0(dstate0.size(), nan);
  layer.forward(view(x, xs), view(params, ps), view(state0, ss), view(got_y, ys),
                view(got_state_n, ss), nullptr, c.lengths);
  layer.backward(view(x, xs), view(params, ps), view(state0, ss), view(dy, ys), view(dstate_n, ss),
                 view(got_dx, xs), view(got_dparams, ps), view(got_dstate0, ss), nullptr,
                 c.lengths);
  EXPECT_EQ(got_y, y);
  EXPECT_EQ(got_state_n, state_n);
  EXPECT_EQ(got_dx, dx);
  EXPECT_EQ(got_dparams, dparams);
  EXPECT_EQ(got_dstate0, dstate0);
  // Without dx: the same dparams and dstate0.
  std::fill(got_dparams.begin(), got_dparams.end(), nan);
  std::fill(got_dstate0.begin(), got_dstate0.end(), nan);
  layer.backward(view(x, xs), view(params, ps), view(state0, ss), view(dy, ys), view(dstate_n, ss),
                 TensorView(), view(got_dparams, ps), view(got_dstate0, ss), nullptr, c.lengths);
  EXPECT_EQ(got_dparams, dparams);
  EXPECT_EQ(got_dstate0, dstate0);
  // ... and the double reference agrees with itself through the layer (sanity of the data).
  if constexpr (sizeof(T) == 8) {
    EXPECT_EQ(std::vector<double>(got_y.begin(), got_y.end()), s.y);
    EXPECT_EQ(std::vector<double>(got_dparams.begin(), got_dparams.end()), s.dparams);
  }
}

TEST(LinearLayerHost, MatchesReference) {
  using K = LinearLayerKind;
  for (bool with_state : {true, false}) {
    const LayerCase cases[] = {
        {K::Gilr, 7, 3, 5, 4, 1, with_state},  {K::GilrLstm, 7, 3, 5, 4, 1, with_state},
        {K::Sru, 7, 3, 4, 4, 1, with_state},   {K::Sru, 7, 3, 5, 4, 1, with_state},
        {K::Qrnn, 7, 3, 5, 4, 1, with_state},  {K::Qrnn, 7, 3, 5, 4, 3, with_state},
        {K::Qrnn, 2, 1, 2, 3, 10, with_state}};
    for (const LayerCase& c : cases) {
      expect_host_matches_reference<double>(c);
      expect_host_matches_reference<float>(c);
    }
  }
}

// Per-sequence lengths (0, T, and between) through the host layer: what the reference returns,
// with padded y and dx exactly zero.
TEST(LinearLayerHost, MatchesReferenceWithLengths) {
  using K = LinearLayerKind;
  const std::vector<std::int32_t> lengths = {7, 0, 3, 1};
  const LayerCase cases[] = {{K::Gilr, 7, 4, 5, 4, 1}, {K::GilrLstm, 7, 4, 5, 4, 1},
                             {K::Sru, 7, 4, 4, 4, 1},  {K::Sru, 7, 4, 5, 4, 1},
                             {K::Qrnn, 7, 4, 5, 4, 1}, {K::Qrnn, 7, 4, 5, 4, 3}};
  for (LayerCase c : cases) {
    c.lengths = lengths;
    expect_host_matches_reference<double>(c);
    expect_host_matches_reference<float>(c);
    c.with_state = false;
    expect_host_matches_reference<double>(c);
  }
  // The padding itself, for one layer: y and dx are zero at t >= lengths[b].
  LayerCase c{K::Qrnn, 7, 4, 5, 4, 2};
  c.lengths = lengths;
  test::Rng rng;
  const test::LayerData s = test::make_layer_data(c, rng);
  for (std::int64_t t = 0; t < c.T; ++t)
    for (std::int64_t b = 0; b < c.B; ++b) {
      if (!c.padded(t, b)) continue;
      for (std::int64_t j = 0; j < c.H; ++j) EXPECT_EQ(s.y[test::sz((t * c.B + b) * c.H + j)], 0.0);
      for (std::int64_t i = 0; i < c.I; ++i)
        EXPECT_EQ(s.dx[test::sz((t * c.B + b) * c.I + i)], 0.0);
    }
}

TEST(LinearLayerHost, BadLengthsThrowInvalidArgument) {
  LinearLayerDesc d;
  d.kind = LinearLayerKind::Sru;
  d.input_size = 4;
  d.hidden_size = 4;
  LinearLayer layer(d, 7, 3, DType::F64, Device::host());
  std::vector<double> x(7 * 3 * 4), params(static_cast<std::size_t>(d.param_count())), y(7 * 3 * 4),
      dx(x.size()), dparams(params.size());
  const TensorView vx = TensorView::of(x.data(), {7, 3, 4}),
                   vy = TensorView::of(y.data(), {7, 3, 4});
  const TensorView vp = TensorView::of(params.data(), {d.param_count()});
  const TensorView vdx = TensorView::of(dx.data(), {7, 3, 4});
  const TensorView vdp = TensorView::of(dparams.data(), {d.param_count()});
  const std::vector<std::int32_t> too_long = {7, 8, 1}, negative = {0, 7, -2}, two = {7, 7};
  expect_invalid(
      [&] { layer.forward(vx, vp, {}, vy, {}, nullptr, too_long); },
      {"LinearLayer::forward", "lengths[1]: expected a length in [0, 7] (steps), got 8"});
  expect_invalid([&] { layer.forward(vx, vp, {}, vy, {}, nullptr, negative); },
                 {"lengths[2]: expected a length in [0, 7] (steps), got -2"});
  expect_invalid([&] { layer.forward(vx, vp, {}, vy, {}, nullptr, two); },
                 {"lengths: expected 3 entries (one per batch row) or none, got 2"});
  expect_invalid(
      [&] { layer.backward(vx, vp, {}, vy, {}, vdx, vdp, {}, nullptr, too_long); },
      {"LinearLayer::backward", "lengths[1]: expected a length in [0, 7] (steps), got 8"});
  expect_invalid([&] { layer.backward(vx, vp, {}, vy, {}, vdx, vdp, {}, nullptr, two); },
                 {"lengths: expected 3 entries"});
  // Valid: 0 and T are lengths.
  const std::vector<std::int32_t> edges = {0, 7, 3};
  layer.forward(vx, vp, {}, vy, {}, nullptr, edges);
  layer.backward(vx, vp, {}, vy, {}, vdx, vdp, {}, nullptr, edges);
}

LinearLayerDesc lstm_desc() {
  LinearLayerDesc d;
  d.kind = LinearLayerKind::GilrLstm;
  d.input_size = 5;
  d.hidden_size = 4;
  return d;
}

TEST(LinearLayerHost, ConstructorRejectsBadRequests) {
  LinearLayerDesc d = lstm_desc();
  LinearLayerDesc bad = d;
  bad.hidden_size = 0;
  expect_invalid([&] { LinearLayer(bad, 7, 3, DType::F64, Device::host()); },
                 {"hidden_size", "expected >= 1, got 0"});
  bad = d;
  bad.window = 2;  // only QRNN has a window
  expect_invalid([&] { LinearLayer(bad, 7, 3, DType::F64, Device::host()); },
                 {"window", "expected 1", "got 2"});
  expect_invalid([&] { LinearLayer(d, 0, 3, DType::F64, Device::host()); },
                 {"steps", "expected a value >= 1, got 0"});
  expect_invalid([&] { LinearLayer(d, 7, -1, DType::F64, Device::host()); },
                 {"batch", "expected a value >= 1, got -1"});
  // Valid requests this path cannot run.
  EXPECT_THROW(LinearLayer(d, 7, 3, DType::F64, Device::host(), ScanAlgo::Parallel), Unsupported);
  EXPECT_THROW(LinearLayer(d, 7, 3, DType::F16, Device::host()), Unsupported);
  EXPECT_THROW(LinearLayer(d, 7, 3, DType::F64, Device::cuda(0)), Unsupported);
  try {
    LinearLayer(d, 7, 3, DType::F64, Device::host(), ScanAlgo::Auto, GemmMath::Tf32);
    ADD_FAILURE() << "expected prnn::Unsupported for TF32 on the host";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("GEMM math tf32 runs on the GPU"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(LinearLayer(d, 7, 3, DType::F32, Device::cuda(0), ScanAlgo::Reference),
               Unsupported);
}

TEST(LinearLayerHost, CallsRejectBadTensors) {
  const LinearLayerDesc d = lstm_desc();  // T = 7, B = 3, I = 5, H = 4, state [2, 3, 4]
  const std::int64_t P = d.param_count();
  LinearLayer layer(d, 7, 3, DType::F64, Device::host());
  std::vector<double> x(7 * 3 * 5), params(static_cast<std::size_t>(P)), state(2 * 3 * 4),
      y(7 * 3 * 4);
  std::vector<double> dx(x.size()), dparams(params.size()), dstate(state.size()), dy(y.size());
  std::vector<float> xf(x.size());
  const TensorView vx = TensorView::of(x.data(), {7, 3, 5}), vp = TensorView::of(params.data(), {P});
  const TensorView vs = TensorView::of(state.data(), {2, 3, 4}), vy = TensorView::of(y.data(), {7, 3, 4});
  const TensorView vdx = TensorView::of(dx.data(), {7, 3, 5});
  const TensorView vdp = TensorView::of(dparams.data(), {P});
  const TensorView vds = TensorView::of(dstate.data(), {2, 3, 4});
  const TensorView vdy = TensorView::of(dy.data(), {7, 3, 4});

  layer.forward(vx, vp, vs, vy, vs);  // valid
  layer.forward(vx, vp, {}, vy, {});  // states are optional

  expect_invalid([&] { layer.forward(TensorView::of(x.data(), {7, 3, 4}), vp, vs, vy, vs); },
                 {"x: expected shape [7, 3, 5], got [7, 3, 4]"});
  expect_invalid([&] { layer.forward(TensorView::of(xf.data(), {7, 3, 5}), vp, vs, vy, vs); },
                 {"x: expected dtype f64, got f32"});
  expect_invalid(
      [&] { layer.forward(TensorView(x.data(), DType::F64, {7, 3, 5}, Device::cuda(0)), vp, vs, vy, vs); },
      {"x: expected memory on host, got cuda:0"});
  expect_invalid([&] { layer.forward(vx, TensorView::of(params.data(), {P - 1}), vs, vy, vs); },
                 {"params: expected shape", "got"});
  expect_invalid([&] { layer.forward(vx, vp, TensorView::of(state.data(), {1, 3, 4}), vy, vs); },
                 {"state0: expected shape [2, 3, 4], got [1, 3, 4]"});
  expect_invalid([&] { layer.forward(vx, vp, vs, TensorView(nullptr, DType::F64, {7, 3, 4}), vs); },
                 {"y: expected a non-null pointer, got null"});
  expect_invalid(
      [&] {
        layer.forward(vx, vp, vs, TensorView(y.data(), DType::F64, {7, 3, 4}, {1, 28, 7}, Device::host()),
                      vs);
      },
      {"y: expected a contiguous tensor"});
  expect_invalid([&] { layer.forward(vx, vp, vs, vy, TensorView::of(state.data(), {2, 4, 3})); },
                 {"state_n: expected shape [2, 3, 4], got [2, 4, 3]"});

  layer.backward(vx, vp, vs, vdy, vds, vdx, vdp, vds);  // valid
  layer.backward(vx, vp, {}, vdy, {}, vdx, vdp, {});    // states are optional
  expect_invalid([&] { layer.backward(vx, vp, vs, TensorView::of(dy.data(), {7, 3, 5}), vds, vdx, vdp, vds); },
                 {"dy: expected shape [7, 3, 4], got [7, 3, 5]"});
  expect_invalid([&] { layer.backward(vx, vp, vs, vdy, vds, TensorView::of(dx.data(), {7, 3, 4}),
                                      vdp, vds); },
                 {"dx: expected shape [7, 3, 5], got [7, 3, 4]"});
  expect_invalid([&] { layer.backward(vx, vp, vs, vdy, vds, vdx, TensorView(), vds); },
                 {"dparams: expected"});
  expect_invalid(
      [&] { layer.backward(vx, vp, vs, vdy, TensorView::of(xf.data(), {2, 3, 4}), vdx, vdp, vds); },
      {"dstate_n: expected dtype f64, got f32"});
  expect_invalid(
      [&] { layer.backward(vx, vp, vs, vdy, vds, vdx, vdp, TensorView::of(dstate.data(), {3, 4})); },
      {"dstate0: expected shape [2, 3, 4], got [3, 4]"});
}

}  // namespace
}  // namespace prnn
