// One linear-recurrence layer problem with fresh random inputs, and its expected results from the
// CPU reference in double. Shared by the CPU and GPU LinearLayer tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "prnn/dtype.h"
#include "prnn/layers.h"
#include "reference/layers.h"
#include "support/random.h"

namespace prnn::test {

struct LayerCase {
  LinearLayerKind kind = LinearLayerKind::Gilr;
  std::int64_t T = 1, B = 1, I = 1, H = 1, k = 1;
  bool with_state = true;  // state0, state_n, dstate_n, dstate0 given (else all null)
  DType dtype = DType::F32;                // the layer's tensors; the inputs are rounded to it
  std::vector<std::int32_t> lengths = {};  // [B] per-sequence lengths, or empty (all T)

  LinearLayerDesc desc() const {
    LinearLayerDesc d;
    d.kind = kind;
    d.input_size = I;
    d.hidden_size = H;
    d.window = k;
    return d;
  }
  std::string name() const {
    std::string s = to_string(kind);
    if (kind == LinearLayerKind::Qrnn) s.append(std::to_string(k));
    for (const auto& [tag, v] : {std::pair{"_T", T}, {"_B", B}, {"_I", I}, {"_H", H}})
      s.append(tag).append(std::to_string(v));
    if (!with_state) s.append("_nostate");
    if (dtype != DType::F32) s.append("_").append(to_string(dtype));
    if (!lengths.empty()) s.append("_len");
    for (std::int32_t n : lengths) s.append("_").append(std::to_string(n));
    return s;
  }
  const std::int32_t* lengths_or_null() const { return lengths.empty() ? nullptr : lengths.data(); }
  // Whether step t of sequence b is padding.
  bool padded(std::int64_t t, std::int64_t b) const {
    return !lengths.empty() && t >= lengths[static_cast<std::size_t>(b)];
  }
  std::size_t x_size() const { return static_cast<std::size_t>(T * B * I); }
  std::size_t y_size() const { return static_cast<std::size_t>(T * B * H); }
  std::size_t state_size() const { return static_cast<std::size_t>(B * desc().state_size()); }
  std::size_t param_size() const { return static_cast<std::size_t>(desc().param_count()); }
};

struct LayerData {
  std::vector<double> x, params, state0, dy, dstate_n;   // inputs (state ones empty if none)
  std::vector<double> y, state_n, dx, dparams, dstate0;  // expected (reference, double)
};

// Rounds every element to fp32, so the double reference sees exactly what an f32 layer sees.
inline void round_to_f32(std::vector<double>& v) {
  for (double& e : v) e = static_cast<double>(static_cast<float>(e));
}
// Rounds every element to `dtype` (f32, f16 or bf16; to nearest even, as prnn's conversions do).
inline void round_to(std::vector<double>& v, DType dtype) {
  round_to_f32(v);
  if (dtype == DType::F16)
    for (double& e : v) e = static_cast<double>(to_float(to_half(static_cast<float>(e))));
  else if (dtype == DType::BF16)
    for (double& e : v) e = static_cast<double>(to_float(to_bfloat16(static_cast<float>(e))));
}

// x, state0, dy, dstate_n in [-1, 1]; b in [-1, 1]; W and U scaled by 2/sqrt(fan-in), so
// pre-activations are O(1) and the gates neither saturate nor vanish, whatever I, H and k.
// Inputs are rounded to the case's dtype; x and dy hold random values at padded steps too (the
// layer must ignore them).
inline LayerData make_layer_data(const LayerCase& c, Rng& rng) {
  const LinearLayerDesc d = c.desc();
  LayerData s;
  s.x = rng.uniform(c.x_size());
  s.params = rng.uniform(c.param_size());
  const std::int64_t R = d.projection_rows(), C = d.projection_cols();
  const auto w_size = static_cast<std::size_t>(R * C);
  for (std::size_t i = 0; i < w_size; ++i) s.params[i] *= 2.0 / std::sqrt(static_cast<double>(C));
  if (c.kind == LinearLayerKind::GilrLstm)
    for (std::size_t i = w_size; i < w_size + static_cast<std::size_t>(4 * c.H * c.H); ++i)
      s.params[i] *= 2.0 / std::sqrt(static_cast<double>(c.H));
  s.dy = rng.uniform(c.y_size());
  if (c.with_state) {
    s.state0 = rng.uniform(c.state_size());
    s.dstate_n = rng.uniform(c.state_size());
  }
  for (auto* v : {&s.x, &s.params, &s.state0, &s.dy, &s.dstate_n}) round_to(*v, c.dtype);

  auto or_null = [](std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
  s.y.assign(c.y_size(), 0.0);
  s.state_n.assign(c.with_state ? c.state_size() : 0, 0.0);
  reference::linear_layer_forward<double>(d, c.T, c.B, s.x.data(), s.params.data(),
                                          or_null(s.state0), s.y.data(), or_null(s.state_n),
                                          c.lengths_or_null());
  s.dx.assign(c.x_size(), 0.0);
  s.dparams.assign(c.param_size(), 0.0);
  s.dstate0.assign(c.with_state ? c.state_size() : 0, 0.0);
  reference::linear_layer_backward<double>(
      d, c.T, c.B, s.x.data(), s.params.data(), or_null(s.state0), s.dy.data(), or_null(s.dstate_n),
      s.dx.data(), s.dparams.data(), s.dstate0.empty() ? nullptr : s.dstate0.data(),
      c.lengths_or_null());
  return s;
}

// The blocks of the flat parameter array: W, U (GILR-LSTM only), b.
struct ParamBlock {
  const char* name;
  std::size_t begin, end;
};
inline std::vector<ParamBlock> param_blocks(const LayerCase& c) {
  const LinearLayerDesc d = c.desc();
  const auto w = static_cast<std::size_t>(d.projection_rows() * d.projection_cols());
  const auto u = c.kind == LinearLayerKind::GilrLstm ? static_cast<std::size_t>(4 * c.H * c.H) : 0;
  std::vector<ParamBlock> blocks{{"W", 0, w}};
  if (u > 0) blocks.push_back({"U", w, w + u});
  blocks.push_back({"b", w + u, c.param_size()});
  return blocks;
}

}  // namespace prnn::test
