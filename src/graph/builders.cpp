// Recurrent builders over the graph ops (contracts in prnn/graph.h): LSTM cell (PyTorch layout,
// gates i, f, g, o), binary Tree-LSTM (Tai et al. 2015), BiLSTM. Parameters start uniform in
// ±1/sqrt(H), as PyTorch's recurrent layers do.
#include <cmath>
#include <vector>

#include "core/check.h"
#include "prnn/graph.h"

namespace prnn::graph {
namespace {

Initializer recurrent_init(std::int64_t hidden) {
  return Initializer::uniform(1.0 / std::sqrt(static_cast<double>(hidden)));
}

void check_sizes(const char* who, std::int64_t input_dim, std::int64_t hidden_dim) {
  PRNN_EXPECT(input_dim >= 1 && hidden_dim >= 1,
              "{}: input_dim and hidden_dim must be positive, got {} and {}", who, input_dim,
              hidden_dim);
}

// Gate k (of height H) of a stacked gate vector.
Expr gate(Expr gates, std::int64_t k, std::int64_t hidden) {
  return pick_range(gates, k * hidden, (k + 1) * hidden);
}

Expr zeros(Graph& g, std::int64_t n) {
  return input(g, Dim{n}, std::vector<double>(static_cast<std::size_t>(n), 0.0));
}

}  // namespace

// ---- LSTM -----------------------------------------------------------------------------------

LstmBuilder::LstmBuilder(Model& model, std::int64_t input_dim, std::int64_t hidden_dim)
    : input_dim_(input_dim), hidden_dim_(hidden_dim) {
  check_sizes("LstmBuilder", input_dim, hidden_dim);
  const Initializer init = recurrent_init(hidden_dim);
  w_ih = model.add_parameters({4 * hidden_dim, input_dim}, init);
  w_hh = model.add_parameters({4 * hidden_dim, hidden_dim}, init);
  b_ih = model.add_parameters({4 * hidden_dim}, init);
  b_hh = model.add_parameters({4 * hidden_dim}, init);
}

void LstmBuilder::new_graph(Graph& g) {
  graph_ = &g;
  e_w_ih_ = parameter(g, w_ih);
  e_w_hh_ = parameter(g, w_hh);
  e_b_ih_ = parameter(g, b_ih);
  e_b_hh_ = parameter(g, b_hh);
  h_ = c_ = Expr{};
}

void LstmBuilder::start_new_sequence(Expr h0, Expr c0) {
  PRNN_EXPECT(graph_ != nullptr, "LstmBuilder: call new_graph before start_new_sequence");
  const Dim want{hidden_dim_};
  h_ = h0.valid() ? h0 : zeros(*graph_, hidden_dim_);
  c_ = c0.valid() ? c0 : zeros(*graph_, hidden_dim_);
  PRNN_EXPECT(h_.dim() == want && c_.dim() == want,
              "LstmBuilder::start_new_sequence: h0 and c0 must be {}, got {} and {}",
              to_string(want), to_string(h_.dim()), to_string(c_.dim()));
}

Expr LstmBuilder::add_input(Expr x) {
  PRNN_EXPECT(h_.valid(), "LstmBuilder: call start_new_sequence before add_input");
  const std::int64_t H = hidden_dim_;
  // [4H] = b_ih + W_ih x + W_hh h + b_hh
  const Expr gates = affine_transform({e_b_ih_, e_w_ih_, x, e_w_hh_, h_}) + e_b_hh_;
  const Expr i = logistic(gate(gates, 0, H));
  const Expr f = logistic(gate(gates, 1, H));
  const Expr g = tanh(gate(gates, 2, H));
  const Expr o = logistic(gate(gates, 3, H));
  c_ = cmult(f, c_) + cmult(i, g);
  h_ = cmult(o, tanh(c_));
  return h_;
}

// ---- Tree-LSTM ------------------------------------------------------------------------------

namespace {
// Gate rows of z, in units of H: TreeForget::AllChildren, then TreeForget::OwnChild.
constexpr std::int64_t kInput = 0, kForgetLeft = 1, kForgetRight = 2, kOutput = 3, kUpdate = 4,
                       kTreeGates = 5;
constexpr std::int64_t kOwnInput = 0, kOwnOutput = 1, kOwnUpdate = 2, kOwnChildGates = 3;
}  // namespace

TreeLstmBuilder::TreeLstmBuilder(Model& model, std::int64_t input_dim, std::int64_t hidden_dim,
                                 TreeForget forget)
    : input_dim_(input_dim), hidden_dim_(hidden_dim), forget_(forget) {
  check_sizes("TreeLstmBuilder", input_dim, hidden_dim);
  PRNN_EXPECT(forget == TreeForget::AllChildren || forget == TreeForget::OwnChild,
              "TreeLstmBuilder: unknown forget-gate form {}", static_cast<int>(forget));
  const Initializer init = recurrent_init(hidden_dim);
  const std::int64_t rows =
      (forget == TreeForget::AllChildren ? kTreeGates : kOwnChildGates) * hidden_dim;
  w = model.add_parameters({rows, input_dim}, init);
  u_left = model.add_parameters({rows, hidden_dim}, init);
  u_right = model.add_parameters({rows, hidden_dim}, init);
  b = model.add_parameters({rows}, init);
  if (forget == TreeForget::OwnChild) {
    uf_left = model.add_parameters({hidden_dim, hidden_dim}, init);
    uf_right = model.add_parameters({hidden_dim, hidden_dim}, init);
    b_f = model.add_parameters({hidden_dim}, init);
  }
}

void TreeLstmBuilder::new_graph(Graph& g) {
  graph_ = &g;
  e_w_ = parameter(g, w);
  e_ul_ = parameter(g, u_left);
  e_ur_ = parameter(g, u_right);
  e_b_ = parameter(g, b);
  if (forget_ == TreeForget::OwnChild) {
    e_ufl_ = parameter(g, uf_left);
    e_ufr_ = parameter(g, uf_right);
    e_bf_ = parameter(g, b_f);
  }
  zero_ = zeros(g, hidden_dim_);
}

TreeLstmBuilder::State TreeLstmBuilder::leaf(Expr x) {
  PRNN_EXPECT(graph_ != nullptr, "TreeLstmBuilder: call new_graph first");
  return combine(affine_transform({e_b_, e_w_, x}), nullptr, nullptr);
}

TreeLstmBuilder::State TreeLstmBuilder::compose(const State& left, const State& right, Expr x) {
  PRNN_EXPECT(graph_ != nullptr, "TreeLstmBuilder: call new_graph first");
  std::vector<Expr> terms = {e_b_, e_ul_, left.h, e_ur_, right.h};
  if (x.valid()) terms.insert(terms.end(), {e_w_, x});
  return combine(affine_transform(terms), &left, &right);
}

// z [5H] (OwnChild: [3H]) -> the new state; absent children contribute nothing.
TreeLstmBuilder::State TreeLstmBuilder::combine(Expr z, const State* left, const State* right) {
  const std::int64_t H = hidden_dim_;
  const bool own = forget_ == TreeForget::OwnChild;
  const Expr i = logistic(gate(z, own ? kOwnInput : kInput, H));
  const Expr o = logistic(gate(z, own ? kOwnOutput : kOutput, H));
  const Expr u = tanh(gate(z, own ? kOwnUpdate : kUpdate, H));
  auto forget_gate = [&](const State& child, std::int64_t all_children, Expr uf) {
    return logistic(own ? affine_transform({e_bf_, uf, child.h}) : gate(z, all_children, H));
  };
  Expr c = cmult(i, u);
  if (left != nullptr) c = c + cmult(forget_gate(*left, kForgetLeft, e_ufl_), left->c);
  if (right != nullptr) c = c + cmult(forget_gate(*right, kForgetRight, e_ufr_), right->c);
  return State{cmult(o, tanh(c)), c};
}

// ---- BiLSTM ---------------------------------------------------------------------------------

BiLstmBuilder::BiLstmBuilder(Model& model, std::int64_t input_dim, std::int64_t hidden_dim)
    : forward_lstm(model, input_dim, hidden_dim), backward_lstm(model, input_dim, hidden_dim) {}

void BiLstmBuilder::new_graph(Graph& g) {
  forward_lstm.new_graph(g);
  backward_lstm.new_graph(g);
}

std::vector<Expr> BiLstmBuilder::transduce(const std::vector<Expr>& xs) {
  const std::size_t T = xs.size();
  std::vector<Expr> fwd(T), bwd(T), out(T);
  forward_lstm.start_new_sequence();
  for (std::size_t t = 0; t < T; ++t) fwd[t] = forward_lstm.add_input(xs[t]);
  backward_lstm.start_new_sequence();
  for (std::size_t t = T; t-- > 0;) bwd[t] = backward_lstm.add_input(xs[t]);
  for (std::size_t t = 0; t < T; ++t) out[t] = concatenate({fwd[t], bwd[t]});
  return out;
}

}  // namespace prnn::graph
