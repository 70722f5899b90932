// CpuExecutor: the reference executor, the oracle the GPU executors are tested against.
//   forward(g, last):  every node 0..last in creation order, through the registry's forward.
//   backward(g, loss): dL/dloss = 1; nodes the loss depends on, in reverse creation order, each
//                      accumulating into its arguments' gradients (and leaves into the Model;
//                      a Model on the device gets the host gradients uploaded afterwards).
// Values and gradients are one vector per node in the chosen precision (T = float or double).
#include <algorithm>
#include <variant>

#include "core/check.h"
#include "graph/device_model.h"
#include "graph/ops.h"
#include "prnn/graph.h"

namespace prnn::graph {
namespace {

template <class T>
struct Buffers {
  std::vector<std::vector<T>> value;  // per node [dim]
  std::vector<std::vector<T>> grad;   // per node [dim]; empty until backward
};

template <class T>
void run_forward(const Graph& g, NodeId last, Buffers<T>& b) {
  const auto n = static_cast<std::size_t>(last) + 1;
  b.value.assign(n, {});
  b.grad.clear();
  std::vector<const T*> args;
  for (std::size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    args.clear();
    for (NodeId a : node.args) args.push_back(b.value[static_cast<std::size_t>(a)].data());
    b.value[id].assign(static_cast<std::size_t>(node.dim.size()), T{0});
    const OpCall<T> call{g, node, static_cast<NodeId>(id), args};
    op_info(node.op).forward<T>()(call, b.value[id].data());
  }
}

template <class T>
void run_backward(const Graph& g, NodeId loss, Buffers<T>& b) {
  const auto n = static_cast<std::size_t>(loss) + 1;
  // Which nodes the loss depends on: a reverse sweep, since arguments precede their users.
  std::vector<bool> needed(n, false);
  needed[n - 1] = true;
  for (std::size_t id = n; id-- > 0;)
    if (needed[id])
      for (NodeId a : g.nodes()[id].args) needed[static_cast<std::size_t>(a)] = true;

  b.grad.assign(b.value.size(), {});
  for (std::size_t id = 0; id < b.value.size(); ++id) b.grad[id].assign(b.value[id].size(), T{0});
  b.grad[n - 1][0] = T{1};

  std::vector<const T*> args;
  std::vector<T*> dargs;
  for (std::size_t id = n; id-- > 0;) {
    if (!needed[id]) continue;
    const Node& node = g.nodes()[id];
    args.clear();
    dargs.clear();
    for (NodeId a : node.args) {
      args.push_back(b.value[static_cast<std::size_t>(a)].data());
      dargs.push_back(b.grad[static_cast<std::size_t>(a)].data());
    }
    const OpCall<T> call{
        g, node, static_cast<NodeId>(id), args, b.value[id].data(), b.grad[id].data()};
    op_info(node.op).backward<T>()(call, dargs);
  }
}

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace

struct CpuExecutor::State {
  const Graph* graph = nullptr;
  std::size_t computed = 0;  // nodes with a value
  bool has_gradients = false;
  std::variant<Buffers<float>, Buffers<double>> buffers;
};

CpuExecutor::CpuExecutor(Precision precision)
    : precision_(precision), state_(std::make_unique<State>()) {
  if (precision == Precision::F64) state_->buffers = Buffers<double>{};
}

CpuExecutor::~CpuExecutor() = default;

void CpuExecutor::forward(Graph& g, Expr last) {
  PRNN_EXPECT(last.valid() && last.graph == &g,
              "cpu executor: forward: the expression does not belong to this graph");
  check_host_copy_current(g, last.id, "cpu executor");
  state_->graph = &g;
  state_->has_gradients = false;
  std::visit([&](auto& b) { run_forward(g, last.id, b); }, state_->buffers);
  state_->computed = static_cast<std::size_t>(last.id) + 1;
}

void CpuExecutor::backward(Graph& g, Expr loss) {
  PRNN_EXPECT(loss.valid() && loss.graph == &g,
              "cpu executor: backward: the loss does not belong to this graph");
  PRNN_EXPECT(state_->graph == &g && static_cast<std::size_t>(loss.id) < state_->computed,
              "cpu executor: backward: node {} was not computed; call forward(g, loss) first",
              loss.id);
  PRNN_EXPECT(loss.dim() == Dim(1, 1), "cpu executor: backward: the loss must be 1x1, got {}",
              to_string(loss.dim()));
  check_host_copy_current(g, loss.id, "cpu executor");
  std::visit([&](auto& b) { run_backward(g, loss.id, b); }, state_->buffers);
  push_host_gradients(g, loss.id);
  state_->has_gradients = true;
}

std::vector<double> CpuExecutor::value(Expr e) const {
  PRNN_EXPECT(
      e.valid() && e.graph == state_->graph && static_cast<std::size_t>(e.id) < state_->computed,
      "cpu executor: value: node {} was not computed by the last forward", e.id);
  return std::visit(
      [&](const auto& b) { return as_double(b.value[static_cast<std::size_t>(e.id)]); },
      state_->buffers);
}

std::vector<double> CpuExecutor::gradient(Expr e) const {
  PRNN_EXPECT(state_->has_gradients && e.valid() && e.graph == state_->graph &&
                  static_cast<std::size_t>(e.id) < state_->computed,
              "cpu executor: gradient: node {} has no gradient from the last backward", e.id);
  return std::visit(
      [&](const auto& b) { return as_double(b.grad[static_cast<std::size_t>(e.id)]); },
      state_->buffers);
}

}  // namespace prnn::graph
