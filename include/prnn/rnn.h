// Recurrent layers: cells, the layer descriptor, and the PyTorch-compatible parameter layout.
//
// Conventions (DESIGN.md):
//   x [T, B, I] time-major; y [T, B, D*H] (forward direction first, then reverse);
//   h0/hn/c0/cn [L*D, B, H] with index layer*D + direction.
//   Per layer l and direction d the parameters are W_ih [G*H, I_l], W_hh [G*H, H], b_ih [G*H],
//   b_hh [G*H] (I_0 = input_size, I_l = D*H for l > 0), stored back to back in one flat array in
//   PyTorch's order: for l: for d: W_ih, W_hh, b_ih, b_hh.
//   Gate order: LSTM i,f,g,o; GRU r,z,n with n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)) and
//   h' = (1 - z) ⊙ n + z ⊙ h.
//   Vanilla cells: h' = act(W_ih x + b_ih + W_hh h + b_hh), act = relu, min(max(x,0),20) or tanh.
#pragma once

#include <cstdint>
#include <string>

#include "prnn/dtype.h"

namespace prnn {

enum class Cell : std::uint8_t { ReLU, ClippedReLU, Tanh, GRU, LSTM };

// The clipped-ReLU ceiling: min(max(x, 0), kClippedReluCeiling).
inline constexpr double kClippedReluCeiling = 20.0;

const char* to_string(Cell c);
// Parses "relu", "clipped_relu", "tanh", "gru", "lstm"; throws InvalidArgument.
Cell parse_cell(const std::string& name);
// Gates per cell: 1 for vanilla cells, 3 for GRU, 4 for LSTM.
int gate_count(Cell c);
inline bool has_cell_state(Cell c) { return c == Cell::LSTM; }

enum class Direction : std::uint8_t { Unidirectional, Bidirectional };

struct RnnDesc {
  Cell cell = Cell::LSTM;
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t layers = 1;
  Direction direction = Direction::Unidirectional;
  DType weight_dtype = DType::F32;

  int directions() const { return direction == Direction::Bidirectional ? 2 : 1; }
  std::int64_t gate_rows() const { return gate_count(cell) * hidden_size; }
  // Input width of layer l.
  std::int64_t layer_input_size(std::int64_t layer) const {
    return layer == 0 ? input_size : directions() * hidden_size;
  }
  // Throws InvalidArgument naming the field when a size is not positive.
  void validate() const;
};

// Offsets (in elements) of one layer/direction's tensors inside the flat parameter array.
struct RnnParamOffsets {
  std::int64_t w_ih = 0;  // [G*H, I_l]
  std::int64_t w_hh = 0;  // [G*H, H]
  std::int64_t b_ih = 0;  // [G*H]
  std::int64_t b_hh = 0;  // [G*H]
  std::int64_t input_size = 0;  // I_l
};

RnnParamOffsets rnn_param_offsets(const RnnDesc& desc, std::int64_t layer, int direction);
std::int64_t rnn_param_count(const RnnDesc& desc);

}  // namespace prnn
