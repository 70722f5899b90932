// The op registry: for every op of PRNN_GRAPH_OPS (prnn/graph.h) its name, arity, shape rule
// and CPU reference forward and backward, in fp32 and fp64. Executors dispatch through it; an
// executor for another device keeps its own kernels but takes names, arities and shapes from here.
//
//   shape(g, node)        checks the arguments (shapes, attributes), returns the result's Dim or
//                         throws InvalidArgument naming the op and the shapes.
//   forward(call, y)      y [node.dim] from the argument values call.x[i] [arg dims].
//   backward(call, dx)    ACCUMULATES dL/dx_i into dx[i] for every argument given dL/dy = call.dy;
//                         leaves (parameter, lookup) accumulate into the Model's gradients.
//                         Arguments may repeat (cmult(x, x)): dx[i] may alias dx[j].
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "prnn/graph.h"

namespace prnn::graph {

template <class T>
struct OpCall {
  const Graph& graph;
  const Node& node;
  NodeId id;
  std::span<const T* const> x;  // argument values, one per node.args
  const T* y = nullptr;         // this node's value (backward only)
  const T* dy = nullptr;        // dL/dy (backward only)
};

template <class T>
using ForwardFn = void (*)(const OpCall<T>&, T* y);
template <class T>
using BackwardFn = void (*)(const OpCall<T>&, std::span<T* const> dx);

struct OpInfo {
  Op op;
  const char* name;
  int arity;  // kVariadic or exact
  Dim (*shape)(const Graph&, const Node&);
  ForwardFn<float> forward_f32;
  ForwardFn<double> forward_f64;
  BackwardFn<float> backward_f32;
  BackwardFn<double> backward_f64;
  // Element-wise: result element i from element i of every argument, all of the result's shape
  // (what a fused group may hold). Pointwise: the element-wise ops that are one formula of their
  // arguments' elements (all but dropout, whose mask also depends on the node).
  bool elementwise;
  bool pointwise;

  template <class T>
  ForwardFn<T> forward() const {
    if constexpr (std::is_same_v<T, float>)
      return forward_f32;
    else
      return forward_f64;
  }
  template <class T>
  BackwardFn<T> backward() const {
    if constexpr (std::is_same_v<T, float>)
      return backward_f32;
    else
      return backward_f64;
  }
};

const OpInfo& op_info(Op op);

// The dropout multiplier of element i of node `id`: 0 or 1/(1-p), from (seed, id, i) alone.
double dropout_scale(std::uint64_t seed, NodeId id, std::size_t i, double p);

}  // namespace prnn::graph
