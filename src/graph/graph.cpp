// Graph construction: the builder functions of prnn/graph.h. Each one checks that its arguments
// are non-empty expressions of one graph and appends a node; Graph::add runs the op's shape rule
// from the registry, so a bad shape throws before the node exists.
#include "prnn/graph.h"

#include <utility>

#include "core/check.h"
#include "graph/ops.h"

namespace prnn::graph {
namespace {

// The graph every argument belongs to; throws naming the op and the offending argument.
Graph& common_graph(const char* op, const std::vector<Expr>& xs) {
  PRNN_EXPECT(!xs.empty(), "{}: expected at least one argument, got none", op);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    PRNN_EXPECT(xs[i].valid(), "{}: argument {} is an empty expression", op, i + 1);
    PRNN_EXPECT(xs[i].graph == xs[0].graph,
                "{}: argument {} belongs to a different graph than argument 1", op, i + 1);
  }
  return *xs[0].graph;
}

Expr make(Op op, const std::vector<Expr>& xs, Node node = {}) {
  Graph& g = common_graph(to_string(op), xs);
  node.op = op;
  node.args.clear();
  for (const Expr& x : xs) node.args.push_back(x.id);
  return g.add(std::move(node));
}

}  // namespace

std::string to_string(const Dim& d) {
  return fmt::format("{}x{}", d.rows, d.cols);
}

Dim Expr::dim() const {
  PRNN_EXPECT(valid(), "Expr::dim: empty expression");
  return graph->node(id).dim;
}

Graph::Graph(std::uint64_t seed, bool training) : seed_(seed), training_(training) {}

Expr Graph::add(Node node) {
  const OpInfo& info = op_info(node.op);
  const auto n_args = static_cast<int>(node.args.size());
  PRNN_EXPECT(info.arity == kVariadic ? n_args >= 1 : n_args == info.arity,
              "{}: expected {} arguments, got {}", info.name,
              info.arity == kVariadic ? "one or more" : std::to_string(info.arity), n_args);
  for (NodeId a : node.args)
    PRNN_EXPECT(a >= 0 && static_cast<std::size_t>(a) < nodes_.size(),
                "{}: argument node {} does not exist (the graph has {} nodes)", info.name, a,
                nodes_.size());
  node.dim = info.shape(*this, node);
  nodes_.push_back(std::move(node));
  return Expr{this, static_cast<NodeId>(nodes_.size() - 1)};
}

Expr Graph::add_input(Dim dim, std::vector<double> values) {
  PRNN_EXPECT(dim.rows >= 1 && dim.cols >= 1, "input: dim must be positive, got {}",
              to_string(dim));
  PRNN_EXPECT(values.size() == static_cast<std::size_t>(dim.size()),
              "input: {} needs {} values, got {}", to_string(dim), dim.size(), values.size());
  Node node;
  node.op = Op::Input;
  node.dim = dim;
  node.input_offset = input_values_.size();
  input_values_.insert(input_values_.end(), values.begin(), values.end());
  return add(std::move(node));
}

Expr input(Graph& g, Dim dim, const std::vector<double>& values) {
  return g.add_input(dim, values);
}
Expr input(Graph& g, Dim dim, const std::vector<float>& values) {
  return g.add_input(dim, std::vector<double>(values.begin(), values.end()));
}
Expr input(Graph& g, float scalar) {
  return g.add_input({1, 1}, {static_cast<double>(scalar)});
}

Expr parameter(Graph& g, Parameter p) {
  Node node;
  node.op = Op::Parameter;
  node.param = p;
  return g.add(std::move(node));
}

Expr lookup(Graph& g, LookupParameter lp, std::int64_t index) {
  Node node;
  node.op = Op::Lookup;
  node.lookup = lp;
  node.index = index;
  return g.add(std::move(node));
}

Expr affine_transform(const std::vector<Expr>& xs) {
  return make(Op::AffineTransform, xs);
}
Expr operator*(Expr w, Expr x) {
  return make(Op::MatMul, {w, x});
}
Expr operator+(Expr a, Expr b) {
  return make(Op::Add, {a, b});
}
Expr operator-(Expr a, Expr b) {
  return make(Op::Sub, {a, b});
}
Expr cmult(Expr a, Expr b) {
  return make(Op::CMult, {a, b});
}
Expr concatenate(const std::vector<Expr>& xs) {
  return make(Op::Concatenate, xs);
}

Expr pick_range(Expr x, std::int64_t begin, std::int64_t end) {
  PRNN_EXPECT(begin < end, "pick_range: rows [{}, {}) are empty", begin, end);
  Node node;
  node.index = begin;
  node.dim = {end - begin, 1};
  return make(Op::PickRange, {x}, std::move(node));
}

Expr tanh(Expr x) {
  return make(Op::Tanh, {x});
}
Expr logistic(Expr x) {
  return make(Op::Logistic, {x});
}
Expr relu(Expr x) {
  return make(Op::Relu, {x});
}
Expr log_softmax(Expr x) {
  return make(Op::LogSoftmax, {x});
}

Expr pick_neg_log_softmax(Expr x, std::int64_t label) {
  Node node;
  node.index = label;
  return make(Op::PickNegLogSoftmax, {x}, std::move(node));
}

Expr sum(const std::vector<Expr>& xs) {
  return make(Op::Sum, xs);
}

Expr dropout(Expr x, double p) {
  Node node;
  node.p = p;
  return make(Op::Dropout, {x}, std::move(node));
}

double Executor::scalar(Expr e) const {
  const std::vector<double> v = value(e);
  PRNN_EXPECT(v.size() == 1, "{}: scalar: expected a 1x1 expression, got {} values", name(),
              v.size());
  return v[0];
}

}  // namespace prnn::graph
