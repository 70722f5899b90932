// prnn::Rnn on host tensors (the CPU reference path) and its argument validation:
//   RnnHost      the host path returns exactly what the reference returns (every cell, f32 and
//                f64, stacked and bidirectional, with and without states), outputs poisoned
//   RnnArgs      bad shapes, dtypes, devices, null tensors, cell state given to a vanilla cell,
//                calls out of order: InvalidArgument naming the argument, expected and given
//   RnnChoice    can_implement / Auto / algorithm names; requests a device or build cannot run
//                throw Unsupported with the reason can_implement gives
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "prnn/error.h"
#include "prnn/rnn.h"
#include "rnn/rnn_case.h"
#include "support/random.h"
#include "support/expect.h"

namespace prnn {
namespace {

using test::expect_invalid;

using test::RnnCase;

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
TensorView view(const std::vector<T>& v, const Shape& shape) {
  return v.empty() ? TensorView() : TensorView::of(v.data(), shape);
}

template <class T>
std::vector<T> nans(std::size_t n) {
  return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN());
}

template <class T>
void expect_host_matches_reference(const RnnCase& c) {
  SCOPED_TRACE(c.name() + (sizeof(T) == 8 ? " f64" : " f32"));
  const test::RnnData s = test::make_rnn_data(c, test::fresh_seed());
  RnnDesc d = c.desc();
  d.weight_dtype = dtype_v<T>;
  const bool lstm = has_cell_state(c.cell);
  const auto x = cast<T>(s.x), params = cast<T>(s.params), h0 = cast<T>(s.h0), c0 = cast<T>(s.c0);
  const auto dy = cast<T>(s.dy), dhn = cast<T>(s.dhn), dcn = cast<T>(s.dcn);
  const Shape xs = c.x_shape(), ys = c.y_shape(), ss = c.state_shape(), ps = c.param_shape();
  const std::size_t states = c.with_state ? c.state_size() : 0;
  const std::size_t cell_states = lstm ? states : 0;

  // Expected: the reference called directly in T.
  auto in = [](const std::vector<T>& v) { return v.empty() ? nullptr : v.data(); };
  auto out = [](std::vector<T>& v) { return v.empty() ? nullptr : v.data(); };
  std::vector<T> y(c.y_size()), hn(states), cn(cell_states);
  std::vector<T> dx(c.x_size()), dh0(states), dc0(cell_states), dparams(c.param_size());
  reference::rnn_forward<T>(d, c.T, c.B, x.data(), in(h0), in(c0), params.data(), y.data(),
                            out(hn), out(cn));
  reference::rnn_backward<T>(d, c.T, c.B, x.data(), in(h0), in(c0), params.data(), dy.data(),
                             in(dhn), in(dcn), dx.data(), out(dh0), out(dc0), dparams.data());

  Rnn rnn(d, c.T, c.B, Device::host());
  EXPECT_EQ(rnn.algo(), RnnAlgo::Reference);
  auto got_y = nans<T>(y.size()), got_hn = nans<T>(hn.size()), got_cn = nans<T>(cn.size());
  auto got_dx = nans<T>(dx.size()), got_dh0 = nans<T>(dh0.size()), got_dc0 = nans<T>(dc0.size());
  auto got_dparams = nans<T>(dparams.size());
  rnn.forward(view(x, xs), view(params, ps), view(h0, ss), view(c0, ss), view(got_y, ys),
              view(got_hn, ss), view(got_cn, ss));
  rnn.backward_data(view(params, ps), view(dy, ys), view(dhn, ss), view(dcn, ss),
                    view(got_dx, xs), view(got_dh0, ss), view(got_dc0, ss));
  rnn.backward_weights(view(x, xs), view(h0, ss), view(c0, ss), view(got_dparams, ps));
  EXPECT_EQ(got_y, y);
  EXPECT_EQ(got_hn, hn);
  EXPECT_EQ(got_cn, cn);
  EXPECT_EQ(got_dx, dx);
  EXPECT_EQ(got_dh0, dh0);
  EXPECT_EQ(got_dc0, dc0);
  EXPECT_EQ(got_dparams, dparams);
  if constexpr (sizeof(T) == 8) {  // the shared test data agrees with the layer
    EXPECT_EQ(got_y, s.y);
    EXPECT_EQ(got_dparams, s.dparams);
  }
}

TEST(RnnHost, MatchesReference) {
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh, Cell::GRU, Cell::LSTM}) {
    for (bool with_state : {true, false}) {
      const RnnCase cases[] = {{cell, 1, 1, 1, 1, 1, false, with_state},
                               {cell, 7, 3, 5, 4, 2, true, with_state},
                               {cell, 6, 2, 3, 5, 3, false, with_state}};
      for (const RnnCase& c : cases) {
        expect_host_matches_reference<double>(c);
        expect_host_matches_reference<float>(c);
      }
    }
  }
}

// The host path keeps its own copy of x and h0: overwriting the caller's buffers between
// forward and backward does not change the gradients.
TEST(RnnHost, BackwardUsesTheForwardsInputs) {
  const RnnCase c{Cell::Tanh, 5, 2, 3, 4, 1, false, true};
  const test::RnnData s = test::make_rnn_data(c, test::fresh_seed());
  Rnn rnn(c.desc(), c.T, c.B, Device::host());
  auto x = cast<float>(s.x), h0 = cast<float>(s.h0);
  const auto params = cast<float>(s.params), dy = cast<float>(s.dy), dhn = cast<float>(s.dhn);
  std::vector<float> y(c.y_size()), dx(c.x_size()), dparams(c.param_size());
  rnn.forward(view(x, c.x_shape()), view(params, c.param_shape()), view(h0, c.state_shape()), {},
              view(y, c.y_shape()), {}, {});
  std::fill(x.begin(), x.end(), 7.0f);
  std::fill(h0.begin(), h0.end(), 7.0f);
  rnn.backward_data(view(params, c.param_shape()), view(dy, c.y_shape()),
                    view(dhn, c.state_shape()), {}, view(dx, c.x_shape()), {}, {});
  rnn.backward_weights(view(x, c.x_shape()), view(h0, c.state_shape()), {},
                       view(dparams, c.param_shape()));
  EXPECT_LE(test::rel_error(dx, s.dx), 1e-6);  // f32 outputs of the double computation
  EXPECT_LE(test::rel_error(dparams, s.dparams), 1e-6);
}

// ---- argument validation ----------------------------------------------------------------------

struct HostProblem {
  RnnCase c{Cell::ReLU, 4, 2, 3, 5, 2, true, true};
  std::vector<float> x = std::vector<float>(c.x_size()), params = std::vector<float>(c.param_size());
  std::vector<float> h0 = std::vector<float>(c.state_size()), y = std::vector<float>(c.y_size());
  std::vector<float> hn = h0, dy = y, dx = x, dparams = params, dh0 = h0;
  Rnn rnn{c.desc(), c.T, c.B, Device::host()};

  TensorView X() const { return view(x, c.x_shape()); }
  TensorView P() const { return view(params, c.param_shape()); }
  TensorView S(const std::vector<float>& v) const { return view(v, c.state_shape()); }
  TensorView Y(const std::vector<float>& v) const { return view(v, c.y_shape()); }
  void forward() { rnn.forward(X(), P(), S(h0), {}, Y(y), S(hn), {}); }
};

TEST(RnnArgs, ForwardShapesDtypesDevices) {
  HostProblem p;
  // x [T, B, I] = [4, 2, 3]; y [T, B, D*H] = [4, 2, 10]; states [L*D, B, H] = [4, 2, 5].
  expect_invalid([&] { p.rnn.forward(view(p.x, {4, 3, 2}), p.P(), {}, {}, p.Y(p.y), {}, {}); },
                 {"x", "[4, 2, 3]", "[4, 3, 2]"});
  expect_invalid([&] { p.rnn.forward(p.X(), p.P(), {}, {}, view(p.y, {4, 2, 5}), {}, {}); },
                 {"y", "[4, 2, 10]", "[4, 2, 5]"});
  expect_invalid([&] { p.rnn.forward(p.X(), p.P(), view(p.h0, {2, 2, 10}), {}, p.Y(p.y), {}, {}); },
                 {"h0", "[4, 2, 5]", "[2, 2, 10]"});
  expect_invalid([&] { p.rnn.forward(p.X(), view(p.params, {3}), {}, {}, p.Y(p.y), {}, {}); },
                 {"params", std::to_string(p.c.param_size()).c_str()});
  const std::vector<double> x64(p.c.x_size());
  expect_invalid([&] { p.rnn.forward(view(x64, p.c.x_shape()), p.P(), {}, {}, p.Y(p.y), {}, {}); },
                 {"x", "f32", "f64"});
  const TensorView on_gpu(p.x.data(), DType::F32, p.c.x_shape(), Device::cuda(0));
  expect_invalid([&] { p.rnn.forward(on_gpu, p.P(), {}, {}, p.Y(p.y), {}, {}); },
                 {"x", "host", "cuda:0"});
  expect_invalid([&] { p.rnn.forward({}, p.P(), {}, {}, p.Y(p.y), {}, {}); }, {"x", "null"});
  const TensorView strided(p.x.data(), DType::F32, p.c.x_shape(), Shape{6, 1, 2}, Device::host());
  expect_invalid([&] { p.rnn.forward(strided, p.P(), {}, {}, p.Y(p.y), {}, {}); }, {"x"});
  // A vanilla cell has no cell state.
  expect_invalid([&] { p.rnn.forward(p.X(), p.P(), {}, p.S(p.h0), p.Y(p.y), {}, {}); },
                 {"c0", "relu", "[4, 2, 5]"});
  expect_invalid([&] { p.rnn.forward(p.X(), p.P(), {}, {}, p.Y(p.y), {}, p.S(p.hn)); }, {"cn"});
}

TEST(RnnArgs, CallsOutOfOrder) {
  HostProblem p;
  expect_invalid([&] { p.rnn.backward_data(p.P(), p.Y(p.dy), {}, {}, p.X(), {}, {}); },
                 {"backward_data", "forward()"});
  p.forward();
  expect_invalid([&] { p.rnn.backward_weights(p.X(), p.S(p.h0), {}, p.P()); },
                 {"backward_weights", "backward_data()"});
  p.rnn.backward_data(p.P(), p.Y(p.dy), {}, {}, view(p.dx, p.c.x_shape()), p.S(p.dh0), {});
  // The forward had h0: backward_weights must get it too.
  expect_invalid(
      [&] { p.rnn.backward_weights(p.X(), {}, {}, view(p.dparams, p.c.param_shape())); },
      {"h0 given", "got h0 empty"});
  p.rnn.backward_weights(p.X(), p.S(p.h0), {}, view(p.dparams, p.c.param_shape()));
  expect_invalid([&] { p.rnn.backward_data(p.P(), view(p.dy, {4, 2, 9}), {}, {}, {}, {}, {}); },
                 {"dy", "[4, 2, 10]", "[4, 2, 9]"});
  expect_invalid([&] { p.rnn.backward_weights(p.X(), p.S(p.h0), {}, view(p.dparams, {7})); },
                 {"dparams"});
}

TEST(RnnArgs, BadDescriptorsAndSizes) {
  RnnDesc d;
  d.cell = Cell::Tanh;
  d.input_size = 3;
  d.hidden_size = 0;
  expect_invalid([&] { Rnn(d, 5, 2, Device::host()); }, {"hidden_size", ">= 1", "0"});
  d.hidden_size = 4;
  expect_invalid([&] { Rnn(d, 0, 2, Device::host()); }, {"steps"});
  expect_invalid([&] { Rnn(d, 5, -1, Device::host()); }, {"batch"});
  expect_invalid([&] { (void)Rnn::can_implement(d, 5, 0, Device::host(), RnnAlgo::Auto); },
                 {"batch"});
}

// ---- algorithm choice ---------------------------------------------------------------------------

TEST(RnnChoice, HostRunsTheReference) {
  RnnDesc d;
  d.cell = Cell::LSTM;
  d.input_size = 3;
  d.hidden_size = 4;
  for (RnnAlgo a : {RnnAlgo::Auto, RnnAlgo::Reference}) {
    EXPECT_EQ(Rnn::can_implement(d, 5, 2, Device::host(), a), "");
    Rnn rnn(d, 5, 2, Device::host(), a);
    EXPECT_EQ(rnn.algo(), RnnAlgo::Reference);
    EXPECT_FALSE(rnn.reason().empty());
    // The host reserve: copies of x [5, 2, 3], h0 and c0 [1, 2, 4], and dparams, in f32.
    const std::size_t params = static_cast<std::size_t>(rnn_param_count(d));
    EXPECT_EQ(rnn.reserve_bytes(), (5 * 2 * 3 + 2 * 2 * 4 + params) * sizeof(float));
    EXPECT_EQ(rnn.workspace_bytes(), 0u);
  }
  for (RnnAlgo a : {RnnAlgo::Persistent, RnnAlgo::GemmPerStep}) {
    const std::string why = Rnn::can_implement(d, 5, 2, Device::host(), a);
    EXPECT_NE(why.find("runs on the GPU"), std::string::npos) << why;
    try {
      Rnn rnn(d, 5, 2, Device::host(), a);
      ADD_FAILURE() << "expected Unsupported";
    } catch (const Unsupported& e) {
      EXPECT_EQ(e.reason(), why);
    }
  }
  d.weight_dtype = DType::F16;
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::host(), RnnAlgo::Auto).find("f16"),
            std::string::npos);
  EXPECT_THROW(Rnn(d, 5, 2, Device::host()), Unsupported);
}

// Whatever this machine has (no CUDA, no GPU, or a GPU), these requests cannot run on a device.
TEST(RnnChoice, DeviceRequestsThatCannotRun) {
  RnnDesc d;
  d.cell = Cell::ReLU;
  d.input_size = 3;
  d.hidden_size = 4;
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Reference).find("host"),
            std::string::npos);
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), "");
  EXPECT_THROW(Rnn(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), Unsupported);
  d.cell = Cell::GRU;
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Auto), "");
  d.cell = Cell::ReLU;
  d.weight_dtype = DType::F64;
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Auto), "");
}

TEST(RnnChoice, AlgorithmNames) {
  for (RnnAlgo a : {RnnAlgo::Auto, RnnAlgo::Persistent, RnnAlgo::GemmPerStep, RnnAlgo::Reference})
    EXPECT_EQ(parse_rnn_algo(to_string(a)), a);
  expect_invalid([] { (void)parse_rnn_algo("cudnn"); }, {"gemm_per_step", "cudnn"});
}

}  // namespace
}  // namespace prnn
