#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "prnn/rnn.h"

namespace prnn {

const char* to_string(Cell c) {
  switch (c) {
    case Cell::ReLU: return "relu";
    case Cell::ClippedReLU: return "clipped_relu";
    case Cell::Tanh: return "tanh";
    case Cell::GRU: return "gru";
    case Cell::LSTM: return "lstm";
  }
  return "?";
}

Cell parse_cell(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (s == "relu") return Cell::ReLU;
  if (s == "clipped_relu" || s == "crelu") return Cell::ClippedReLU;
  if (s == "tanh") return Cell::Tanh;
  if (s == "gru") return Cell::GRU;
  if (s == "lstm") return Cell::LSTM;
  throw InvalidArgument(
      fmt::format("cell: expected one of relu, clipped_relu, tanh, gru, lstm, got '{}'", name));
}

int gate_count(Cell c) {
  switch (c) {
    case Cell::ReLU:
    case Cell::ClippedReLU:
    case Cell::Tanh: return 1;
    case Cell::GRU: return 3;
    case Cell::LSTM: return 4;
  }
  return 0;
}

void RnnDesc::validate() const {
  PRNN_EXPECT(input_size >= 1, "RnnDesc.input_size: expected >= 1, got {}", input_size);
  PRNN_EXPECT(hidden_size >= 1, "RnnDesc.hidden_size: expected >= 1, got {}", hidden_size);
  PRNN_EXPECT(layers >= 1, "RnnDesc.layers: expected >= 1, got {}", layers);
  PRNN_EXPECT(residual_every >= 0,
              "RnnDesc.residual_every: expected >= 0 (0: no residual connections), got {}",
              residual_every);
  PRNN_EXPECT(gemm_math == GemmMath::Fp32 || gemm_math == GemmMath::Tf32,
              "RnnDesc.gemm_math: expected fp32 or tf32, got the value {}",
              static_cast<int>(gemm_math));
}

RnnParamOffsets rnn_param_offsets(const RnnDesc& desc, std::int64_t layer, int direction) {
  desc.validate();
  PRNN_EXPECT(layer >= 0 && layer < desc.layers, "layer: expected an index in [0, {}), got {}",
              desc.layers, layer);
  PRNN_EXPECT(direction >= 0 && direction < desc.directions(),
              "direction: expected an index in [0, {}), got {}", desc.directions(), direction);
  const std::int64_t G = desc.gate_rows();
  const std::int64_t H = desc.hidden_size;
  std::int64_t offset = 0;
  for (std::int64_t l = 0; l < desc.layers; ++l) {
    for (int d = 0; d < desc.directions(); ++d) {
      const std::int64_t in = desc.layer_input_size(l);
      if (l == layer && d == direction) {
        RnnParamOffsets o;
        o.input_size = in;
        o.w_ih = offset;
        o.w_hh = o.w_ih + G * in;
        o.b_ih = o.w_hh + G * H;
        o.b_hh = o.b_ih + G;
        return o;
      }
      offset += G * in + G * H + 2 * G;
    }
  }
  PRNN_ASSERT(false);
  return {};
}

std::int64_t rnn_param_count(const RnnDesc& desc) {
  const auto last = rnn_param_offsets(desc, desc.layers - 1, desc.directions() - 1);
  return last.b_hh + desc.gate_rows();
}

}  // namespace prnn
