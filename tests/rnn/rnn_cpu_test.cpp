// prnn::Rnn on host tensors (the CPU reference path) and its argument validation:
//   RnnHost      the host path returns exactly what the reference returns (every cell, f32 and
//                f64, stacked and bidirectional, with and without states), outputs poisoned
//   RnnArgs      bad shapes, dtypes, devices, null tensors, cell state given to a vanilla cell,
//                calls out of order: InvalidArgument naming the argument, expected and given
//   RnnChoice    can_implement / Auto / algorithm names; requests a device or build cannot run
//                throw Unsupported with the reason can_implement gives
//   RnnVarlen    per-sequence lengths: a batch equals each sequence run alone with T = its
//                length (padding: y = 0, dx = 0, dy ignored), gradients against finite
//                differences, with residual stacks and both directions
//   RnnResidual  a residual stack equals its single layers composed by hand (forward and
//                backward), every cell
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/rnn.h"
#include "rnn/rnn_case.h"
#include "support/expect.h"
#include "support/gradcheck.h"
#include "support/random.h"

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
                            out(hn), out(cn), c.lengths_or_null());
  reference::rnn_backward<T>(d, c.T, c.B, x.data(), in(h0), in(c0), params.data(), dy.data(),
                             in(dhn), in(dcn), dx.data(), out(dh0), out(dc0), dparams.data(),
                             c.lengths_or_null());

  Rnn rnn(d, c.T, c.B, Device::host());
  EXPECT_EQ(rnn.algo(), RnnAlgo::Reference);
  auto got_y = nans<T>(y.size()), got_hn = nans<T>(hn.size()), got_cn = nans<T>(cn.size());
  auto got_dx = nans<T>(dx.size()), got_dh0 = nans<T>(dh0.size()), got_dc0 = nans<T>(dc0.size());
  auto got_dparams = nans<T>(dparams.size());
  rnn.forward(view(x, xs), view(params, ps), view(h0, ss), view(c0, ss), view(got_y, ys),
              view(got_hn, ss), view(got_cn, ss), nullptr, c.lengths);
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

// Residual stacks and per-sequence lengths through the host path, every cell.
TEST(RnnHost, ResidualAndLengthsMatchReference) {
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh, Cell::GRU, Cell::LSTM}) {
    std::vector<RnnCase> cases = {{cell, 6, 3, 4, 4, 3, true, true},
                                  {cell, 7, 4, 3, 5, 3, false, false},
                                  {cell, 5, 2, 4, 3, 1, true, true}};
    cases[0].residual_every = 1;
    cases[0].lengths = {6, 1, 3};
    cases[1].residual_every = 2;
    cases[1].lengths = {7, 4, 1, 7};
    cases[2].lengths = {2, 5};
    for (const RnnCase& c : cases) {
      expect_host_matches_reference<double>(c);
      expect_host_matches_reference<float>(c);
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

TEST(RnnArgs, BadLengths) {
  HostProblem p;  // T = 4, B = 2
  const std::vector<std::int32_t> too_few = {4}, zero = {4, 0}, too_long = {5, 4}, ok = {1, 4};
  expect_invalid([&] { p.rnn.forward(p.X(), p.P(), {}, {}, p.Y(p.y), {}, {}, nullptr, too_few); },
                 {"lengths", "2", "1"});
  expect_invalid([&] { p.rnn.forward(p.X(), p.P(), {}, {}, p.Y(p.y), {}, {}, nullptr, zero); },
                 {"lengths[1]", "[1, 4]", "0"});
  expect_invalid([&] { p.rnn.forward(p.X(), p.P(), {}, {}, p.Y(p.y), {}, {}, nullptr, too_long); },
                 {"lengths[0]", "[1, 4]", "5"});
  p.rnn.forward(p.X(), p.P(), {}, {}, p.Y(p.y), {}, {}, nullptr, ok);
  // The reference checks them too.
  const RnnDesc d = p.c.desc();
  expect_invalid(
      [&] {
        reference::rnn_forward<float>(d, 4, 2, p.x.data(), nullptr, nullptr, p.params.data(),
                                      p.y.data(), nullptr, nullptr, zero.data());
      },
      {"lengths[1]", "[1, 4]", "0"});
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
  d.residual_every = -1;
  expect_invalid([&] { Rnn(d, 5, 2, Device::host()); }, {"residual_every", ">= 0", "-1"});
  d.residual_every = 0;
  d.gemm_math = static_cast<GemmMath>(7);
  expect_invalid([&] { Rnn(d, 5, 2, Device::host()); }, {"gemm_math", "fp32 or tf32", "7"});
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
  // TF32 GEMMs are a GPU math: the reference computes in the tensors' dtype.
  d.gemm_math = GemmMath::Tf32;
  const std::string why_tf32 = Rnn::can_implement(d, 5, 2, Device::host(), RnnAlgo::Auto);
  EXPECT_NE(why_tf32.find("gemm_math tf32"), std::string::npos) << why_tf32;
  EXPECT_THROW(Rnn(d, 5, 2, Device::host()), Unsupported);
  d.gemm_math = GemmMath::Fp32;
  d.weight_dtype = DType::F16;
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::host(), RnnAlgo::Auto).find("f16"),
            std::string::npos);
  EXPECT_THROW(Rnn(d, 5, 2, Device::host()), Unsupported);
}

// Whatever this machine has (no CUDA, no GPU, or a GPU), these requests cannot run on a device:
// the reference runs on the host, and f64 weights run nowhere but there.
TEST(RnnChoice, DeviceRequestsThatCannotRun) {
  RnnDesc d;
  d.cell = Cell::ReLU;
  d.input_size = 3;
  d.hidden_size = 4;
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Reference).find("host"),
            std::string::npos);
  d.weight_dtype = DType::F64;
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Auto), "");
  EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), "");
}

// A small layer on the device: without a GPU (as in CI) the request says why and the layer is
// refused; with one, the same requests run (the GPU suites check what they compute).
TEST(RnnChoice, DeviceRequestsFollowTheMachine) {
  RnnDesc d;
  d.cell = Cell::ReLU;
  d.input_size = 3;
  d.hidden_size = 4;
  RnnDesc gru = d;
  gru.cell = Cell::GRU;
  if (device_count() == 0) {
    EXPECT_NE(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), "");
    EXPECT_THROW(Rnn(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), Unsupported);
    EXPECT_NE(Rnn::can_implement(gru, 5, 2, Device::cuda(0), RnnAlgo::Auto), "");
  } else {
    EXPECT_EQ(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), "");
    EXPECT_NO_THROW(Rnn(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent));
    EXPECT_EQ(Rnn::can_implement(gru, 5, 2, Device::cuda(0), RnnAlgo::Auto), "");
  }
}

TEST(RnnChoice, AlgorithmNames) {
  for (RnnAlgo a : {RnnAlgo::Auto, RnnAlgo::Persistent, RnnAlgo::GemmPerStep, RnnAlgo::Reference})
    EXPECT_EQ(parse_rnn_algo(to_string(a)), a);
  expect_invalid([] { (void)parse_rnn_algo("cudnn"); }, {"gemm_per_step", "cudnn"});
}

// ---- variable lengths and residual stacks: equivalences and finite differences -----------------

// Rows [t0, t0 + n) x batch row b x all columns of a [T, B, W] tensor, as a [n, 1, W] tensor.
std::vector<double> slice_tb(const std::vector<double>& v, std::int64_t B, std::int64_t W,
                             std::int64_t t0, std::int64_t n, std::int64_t b) {
  std::vector<double> out;
  for (std::int64_t t = t0; t < t0 + n; ++t) {
    const auto at = v.begin() + (t * B + b) * W;
    out.insert(out.end(), at, at + W);
  }
  return out;
}

// A batch with lengths equals each sequence run alone, B = 1 and T = its length: y, hn, cn, dx,
// dh0, dc0 per batch row; y and dx are 0 at padding; dparams is the sum over the rows.
TEST(RnnVarlen, BatchEqualsEachSequenceAlone) {
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh, Cell::GRU, Cell::LSTM}) {
    for (std::int64_t residual : {0, 2}) {
      RnnCase c{cell, 7, 4, 3, 5, 3, true, true};
      c.residual_every = residual;
      c.lengths = {7, 1, 4, 6};
      SCOPED_TRACE(c.name());
      const test::RnnData s = test::make_rnn_data(c, test::fresh_seed());
      const bool lstm = has_cell_state(cell);
      const std::int64_t LD = c.L * c.D(), H = c.H, W = c.D() * H;
      std::vector<double> dparams_sum(c.param_size(), 0.0);
      for (std::int64_t b = 0; b < c.B; ++b) {
        const std::int64_t n = c.lengths[static_cast<std::size_t>(b)];
        RnnCase one = c;
        one.T = n;
        one.B = 1;
        one.lengths.clear();
        auto state_of = [&](const std::vector<double>& v) {  // [LD, B, H] -> [LD, 1, H]
          std::vector<double> out;
          for (std::int64_t r = 0; r < LD; ++r)
            out.insert(out.end(), v.begin() + (r * c.B + b) * H, v.begin() + (r * c.B + b + 1) * H);
          return out;
        };
        const auto x = slice_tb(s.x, c.B, c.I, 0, n, b), dy = slice_tb(s.dy, c.B, W, 0, n, b);
        const auto h0 = state_of(s.h0), dhn = state_of(s.dhn);
        const auto c0 = lstm ? state_of(s.c0) : std::vector<double>();
        const auto dcn = lstm ? state_of(s.dcn) : std::vector<double>();
        std::vector<double> y(one.y_size()), hn(one.state_size()), cn(lstm ? one.state_size() : 0);
        std::vector<double> dx(one.x_size()), dh0(one.state_size()), dc0(cn.size());
        std::vector<double> dparams(one.param_size());
        auto nul = [](std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
        auto cnul = [](const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
        reference::rnn_forward<double>(one.desc(), n, 1, x.data(), h0.data(), cnul(c0),
                                       s.params.data(), y.data(), hn.data(), nul(cn));
        reference::rnn_backward<double>(one.desc(), n, 1, x.data(), h0.data(), cnul(c0),
                                        s.params.data(), dy.data(), dhn.data(), cnul(dcn),
                                        dx.data(), dh0.data(), nul(dc0), dparams.data());
        // Same arithmetic on the valid steps: equal up to the order of sums over the batch
        // (none in y, hn, dx, dh0 of one row; the loops visit the same terms in the same order).
        EXPECT_EQ(slice_tb(s.y, c.B, W, 0, n, b), y) << "y, row " << b;
        EXPECT_EQ(slice_tb(s.dx, c.B, c.I, 0, n, b), dx) << "dx, row " << b;
        EXPECT_EQ(state_of(s.hn), hn) << "hn, row " << b;
        EXPECT_EQ(state_of(s.dh0), dh0) << "dh0, row " << b;
        if (lstm) {
          EXPECT_EQ(state_of(s.cn), cn) << "cn, row " << b;
          EXPECT_EQ(state_of(s.dc0), dc0) << "dc0, row " << b;
        }
        const auto y_pad = slice_tb(s.y, c.B, W, n, c.T - n, b);
        const auto dx_pad = slice_tb(s.dx, c.B, c.I, n, c.T - n, b);
        EXPECT_TRUE(std::all_of(y_pad.begin(), y_pad.end(), [](double v) { return v == 0.0; }))
            << "y at padding, row " << b;
        EXPECT_TRUE(std::all_of(dx_pad.begin(), dx_pad.end(), [](double v) { return v == 0.0; }))
            << "dx at padding, row " << b;
        for (std::size_t i = 0; i < dparams.size(); ++i) dparams_sum[i] += dparams[i];
      }
      // dparams sums over (t, b) in another order: equal to double rounding.
      EXPECT_LE(test::rel_error(dparams_sum, s.dparams), 1e-12);
    }
  }
}

// Gradients of L = Σ dy·y + Σ dhn·hn (+ Σ dcn·cn) against central differences, with lengths
// and residual connections: dx at padding is 0 there and x there has no effect, so the finite
// difference is 0 too.
TEST(RnnVarlen, GradientsMatchFiniteDifferences) {
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh, Cell::GRU, Cell::LSTM}) {
    for (bool bi : {false, true}) {
      RnnCase c{cell, 5, 3, 3, 4, 3, bi, true, DType::F64};
      c.residual_every = bi ? 1 : 2;
      c.lengths = {5, 1, 3};
      SCOPED_TRACE(c.name());
      const std::uint64_t seed = test::fresh_seed();
      SCOPED_TRACE("PRNN_TEST_SEED=" + std::to_string(seed));
      test::RnnData s = test::make_rnn_data(c, seed);
      const RnnDesc d = c.desc();
      const bool lstm = has_cell_state(cell);
      std::vector<double> y(c.y_size()), hn(c.state_size()), cn(c.state_size());
      auto loss = [&] {
        reference::rnn_forward<double>(d, c.T, c.B, s.x.data(), s.h0.data(),
                                       lstm ? s.c0.data() : nullptr, s.params.data(), y.data(),
                                       hn.data(), cn.data(), c.lengths.data());
        return test::project(y, s.dy) + test::project(hn, s.dhn) +
               (lstm ? test::project(cn, s.dcn) : 0.0);
      };
      std::mt19937_64 gen(test::fresh_seed());
      test::GradCheckOptions opt;
      opt.max_coords = 1u << 20;  // every coordinate
      // relu and clipped relu: rnn_case.h keeps the pre-activations O(1) away from the kinks;
      // the saturated clipped units (outputs of 20, summed by the residual path) make L large,
      // so eps = 1e-4 rather than 1e-6 keeps its rounding (~1e-16·|L|/eps) below rtol. L is
      // not linear in a recurrent weight (it enters every step: a polynomial of degree T
      // between kinks), so at that eps the central difference's O(eps²) truncation error
      // reaches ~1e-7 relative: Richardson extrapolation makes it O(eps⁴). The residual path
      // feeds the upper layers inputs of O(4..20), so their pre-activations can lie within a
      // perturbation's reach of a kink: such coordinates are retried with a smaller eps.
      if (cell == Cell::ReLU || cell == Cell::ClippedReLU) {
        opt.eps = 1e-4;
        opt.richardson = true;
        opt.kink_retries = 3;
      }
      EXPECT_TRUE(test::check_gradient("dx", s.x, s.dx, loss, gen, opt));
      EXPECT_TRUE(test::check_gradient("dh0", s.h0, s.dh0, loss, gen, opt));
      if (lstm) {
        EXPECT_TRUE(test::check_gradient("dc0", s.c0, s.dc0, loss, gen, opt));
      }
      EXPECT_TRUE(test::check_gradient("dparams", s.params, s.dparams, loss, gen, opt));
    }
  }
}

// A residual stack equals its layers run one at a time (each a one-layer RNN on its own slice
// of params and states), the residual layers' input added to their output by hand; backward
// the same way from the top, adding dout to d(input) at the residual layers.
TEST(RnnResidual, EqualsLayersComposedByHand) {
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh, Cell::GRU, Cell::LSTM}) {
    for (std::int64_t k : {1, 2}) {
      RnnCase c{cell, 6, 3, 4, 5, 3, k == 1, true};
      c.residual_every = k;
      SCOPED_TRACE(c.name());
      const test::RnnData s = test::make_rnn_data(c, test::fresh_seed());
      const RnnDesc d = c.desc();
      const bool lstm = has_cell_state(cell);
      const std::int64_t D = c.D(), TBW = c.T * c.B * D * c.H, BH = c.B * c.H;
      auto rows = [&](const std::vector<double>& v, std::int64_t l) {  // layer l's states
        if (v.empty()) return std::vector<double>();
        return std::vector<double>(v.begin() + l * D * BH, v.begin() + (l + 1) * D * BH);
      };
      auto cnul = [](const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
      auto nul = [](std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
      std::vector<RnnDesc> one(static_cast<std::size_t>(c.L));
      std::vector<std::vector<double>> params(one.size()), inputs(one.size());
      std::vector<double> in = s.x, hn_all, cn_all;
      for (std::int64_t l = 0; l < c.L; ++l) {
        RnnDesc& o = one[static_cast<std::size_t>(l)];
        o = d;
        o.layers = 1;
        o.residual_every = 0;
        o.input_size = d.layer_input_size(l);
        const auto first = rnn_param_offsets(d, l, 0).w_ih;
        params[static_cast<std::size_t>(l)].assign(
            s.params.begin() + first, s.params.begin() + first + rnn_param_count(o));
        std::vector<double> y(static_cast<std::size_t>(TBW)), hn(static_cast<std::size_t>(D * BH));
        std::vector<double> cn(lstm ? hn.size() : 0);
        const auto h0 = rows(s.h0, l), c0 = rows(s.c0, l);
        reference::rnn_forward<double>(o, c.T, c.B, in.data(), h0.data(), cnul(c0),
                                       params[static_cast<std::size_t>(l)].data(), y.data(),
                                       hn.data(), nul(cn));
        if (d.residual_at(l))
          for (std::size_t i = 0; i < y.size(); ++i) y[i] += in[i];
        hn_all.insert(hn_all.end(), hn.begin(), hn.end());
        cn_all.insert(cn_all.end(), cn.begin(), cn.end());
        inputs[static_cast<std::size_t>(l)] = std::move(in);
        in = std::move(y);
      }
      EXPECT_LE(test::rel_error(in, s.y), 1e-14) << "y";
      EXPECT_LE(test::rel_error(hn_all, s.hn), 1e-14) << "hn";
      if (lstm) {
        EXPECT_LE(test::rel_error(cn_all, s.cn), 1e-14) << "cn";
      }
      std::vector<double> dout = s.dy, dh0_all(s.dh0.size()), dc0_all(s.dc0.size());
      std::vector<double> dparams(s.dparams.size());
      for (std::int64_t l = c.L; l-- > 0;) {
        const RnnDesc& o = one[static_cast<std::size_t>(l)];
        const auto& x_l = inputs[static_cast<std::size_t>(l)];
        std::vector<double> din(x_l.size()), dh0(static_cast<std::size_t>(D * BH));
        std::vector<double> dc0(lstm ? dh0.size() : 0);
        std::vector<double> dp(params[static_cast<std::size_t>(l)].size());
        const auto h0 = rows(s.h0, l), c0 = rows(s.c0, l), dhn = rows(s.dhn, l),
                   dcn = rows(s.dcn, l);
        reference::rnn_backward<double>(o, c.T, c.B, x_l.data(), h0.data(), cnul(c0),
                                        params[static_cast<std::size_t>(l)].data(), dout.data(),
                                        dhn.data(), cnul(dcn), din.data(), dh0.data(), nul(dc0),
                                        dp.data());
        if (d.residual_at(l))
          for (std::size_t i = 0; i < din.size(); ++i) din[i] += dout[i];
        std::copy(dh0.begin(), dh0.end(), dh0_all.begin() + l * D * BH);
        std::copy(dc0.begin(), dc0.end(), dc0_all.begin() + l * D * BH);
        std::copy(dp.begin(), dp.end(), dparams.begin() + rnn_param_offsets(d, l, 0).w_ih);
        dout = std::move(din);
      }
      EXPECT_LE(test::rel_error(dout, s.dx), 1e-14) << "dx";
      EXPECT_LE(test::rel_error(dh0_all, s.dh0), 1e-14) << "dh0";
      if (lstm) {
        EXPECT_LE(test::rel_error(dc0_all, s.dc0), 1e-14) << "dc0";
      }
      EXPECT_LE(test::rel_error(dparams, s.dparams), 1e-14) << "dparams";
    }
  }
}

}  // namespace
}  // namespace prnn
