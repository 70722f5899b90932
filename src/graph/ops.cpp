// The op registry (contract in graph/ops.h): one struct per op with its shape rule and its CPU
// reference forward and backward, literal loops over row-major [rows, cols] values, and the table
// built from PRNN_GRAPH_OPS. Adding an op: a line in PRNN_GRAPH_OPS, a struct <Name>Op here, a
// builder function in graph.h / graph.cpp, and a case in the tests' op list.
#include "graph/ops.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/check.h"
#include "graph/dropout_hash.h"
#include "graph/model_storage.h"

namespace prnn::graph {
namespace {

using std::size_t;

size_t numel(Dim d) {
  return static_cast<size_t>(d.size());
}
Dim arg_dim(const Graph& g, const Node& n, size_t i) {
  return g.node(n.args[i]).dim;
}

// Every argument has the shape of the first one; returns it.
Dim same_shapes(const char* op, const Graph& g, const Node& n) {
  const Dim d = arg_dim(g, n, 0);
  for (size_t i = 1; i < n.args.size(); ++i) {
    const Dim e = arg_dim(g, n, i);
    PRNN_EXPECT(e == d,
                "{}: arguments must have equal shapes, got {} (argument 1) and {} "
                "(argument {})",
                op, to_string(d), to_string(e), i + 1);
  }
  return d;
}

Dim column_vector(const char* op, const Graph& g, const Node& n) {
  const Dim d = arg_dim(g, n, 0);
  PRNN_EXPECT(d.cols == 1, "{}: expected a column vector [n x 1], got {}", op, to_string(d));
  return d;
}

// y [m, n] (+)= W [m, k] · x [k, n]
template <class T>
void matmul_acc(Dim w, Dim x, const T* W, const T* X, T* y) {
  for (std::int64_t r = 0; r < w.rows; ++r)
    for (std::int64_t c = 0; c < x.cols; ++c) {
      T acc = 0;
      for (std::int64_t k = 0; k < w.cols; ++k) acc += W[r * w.cols + k] * X[k * x.cols + c];
      y[r * x.cols + c] += acc;
    }
}

// dW [m, k] += dy [m, n] · xᵀ;  dx [k, n] += Wᵀ · dy
template <class T>
void matmul_backward_acc(Dim w, Dim x, const T* W, const T* X, const T* dy, T* dW, T* dX) {
  const std::int64_t m = w.rows, k = w.cols, n = x.cols;
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t j = 0; j < k; ++j) {
      T acc = 0;
      for (std::int64_t c = 0; c < n; ++c) acc += dy[r * n + c] * X[j * n + c];
      dW[r * k + j] += acc;
    }
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t c = 0; c < n; ++c) {
      T acc = 0;
      for (std::int64_t r = 0; r < m; ++r) acc += W[r * k + j] * dy[r * n + c];
      dX[j * n + c] += acc;
    }
}

Dim matmul_shape(const char* op, Dim w, Dim x) {
  PRNN_EXPECT(w.cols == x.rows, "{}: {} * {}: inner dimensions differ ({} vs {})", op, to_string(w),
              to_string(x), w.cols, x.rows);
  return {w.rows, x.cols};
}

// log Σ exp(x_i) over n values, stabilized by the maximum.
template <class T>
T log_sum_exp(const T* x, size_t n) {
  const T m = *std::max_element(x, x + n);
  T s = 0;
  for (size_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// ---- Leaves ---------------------------------------------------------------------------------

struct InputOp {
  static Dim shape(const Graph& g, const Node& n) {
    PRNN_EXPECT(n.dim.rows >= 1 && n.dim.cols >= 1, "input: dim must be positive, got {}",
                to_string(n.dim));
    PRNN_EXPECT(n.input_offset + numel(n.dim) <= g.input_values().size(),
                "input: values [{}, {}) lie outside the graph's {} input values", n.input_offset,
                n.input_offset + numel(n.dim), g.input_values().size());
    return n.dim;
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    const auto& v = c.graph.input_values();
    for (size_t i = 0; i < numel(c.node.dim); ++i)
      y[i] = static_cast<T>(v[c.node.input_offset + i]);
  }
  template <class T>
  static void backward(const OpCall<T>&, std::span<T* const>) {}
};

struct ParameterOp {
  static Dim shape(const Graph&, const Node& n) {
    PRNN_EXPECT(n.param.valid(), "parameter: the Parameter handle is empty");
    return n.param.dim();
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    const auto w = c.node.param.values();
    for (size_t i = 0; i < w.size(); ++i) y[i] = static_cast<T>(w[i]);
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const>) {
    const auto g = c.node.param.gradients();
    for (size_t i = 0; i < g.size(); ++i) g[i] += static_cast<float>(c.dy[i]);
  }
};

struct LookupOp {
  static Dim shape(const Graph&, const Node& n) {
    PRNN_EXPECT(n.lookup.valid(), "lookup: the LookupParameter handle is empty");
    PRNN_EXPECT(n.index >= 0 && n.index < n.lookup.size(), "lookup: index {} out of range [0, {})",
                n.index, n.lookup.size());
    return n.lookup.dim();
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    const auto w = c.node.lookup.values(c.node.index);
    for (size_t i = 0; i < w.size(); ++i) y[i] = static_cast<T>(w[i]);
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const>) {
    const auto g = c.node.lookup.gradients(c.node.index);
    for (size_t i = 0; i < g.size(); ++i) g[i] += static_cast<float>(c.dy[i]);
    auto& table =
        c.node.lookup.model()->storage().tables[static_cast<size_t>(c.node.lookup.index())];
    table.touched[static_cast<size_t>(c.node.index)] = true;
  }
};

// ---- Linear algebra -------------------------------------------------------------------------

// y = b + Σ W_i·x_i over args {b, W1, x1, W2, x2, ...}
struct AffineTransformOp {
  static Dim shape(const Graph& g, const Node& n) {
    PRNN_EXPECT(n.args.size() % 2 == 1,
                "affine_transform: expected {{b, W1, x1, W2, x2, ...}} (an odd count), got {} "
                "arguments",
                n.args.size());
    const Dim b = arg_dim(g, n, 0);
    for (size_t i = 1; i < n.args.size(); i += 2) {
      const Dim w = arg_dim(g, n, i), x = arg_dim(g, n, i + 1);
      const Dim wx = matmul_shape("affine_transform", w, x);
      PRNN_EXPECT(wx == b, "affine_transform: W{}·x{} = {} * {} has shape {}, the bias has {}",
                  (i + 1) / 2, (i + 1) / 2, to_string(w), to_string(x), to_string(wx),
                  to_string(b));
    }
    return b;
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    std::copy(c.x[0], c.x[0] + numel(c.node.dim), y);
    for (size_t i = 1; i < c.x.size(); i += 2)
      matmul_acc(arg_dim(c.graph, c.node, i), arg_dim(c.graph, c.node, i + 1), c.x[i], c.x[i + 1],
                 y);
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t j = 0; j < numel(c.node.dim); ++j) dx[0][j] += c.dy[j];
    for (size_t i = 1; i < c.x.size(); i += 2)
      matmul_backward_acc(arg_dim(c.graph, c.node, i), arg_dim(c.graph, c.node, i + 1), c.x[i],
                          c.x[i + 1], c.dy, dx[i], dx[i + 1]);
  }
};

struct MatMulOp {
  static Dim shape(const Graph& g, const Node& n) {
    return matmul_shape("matmul", arg_dim(g, n, 0), arg_dim(g, n, 1));
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    std::fill(y, y + numel(c.node.dim), T{0});
    matmul_acc(arg_dim(c.graph, c.node, 0), arg_dim(c.graph, c.node, 1), c.x[0], c.x[1], y);
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    matmul_backward_acc(arg_dim(c.graph, c.node, 0), arg_dim(c.graph, c.node, 1), c.x[0], c.x[1],
                        c.dy, dx[0], dx[1]);
  }
};

// ---- Elementwise ----------------------------------------------------------------------------

struct AddOp {
  static Dim shape(const Graph& g, const Node& n) { return same_shapes("add", g, n); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] = c.x[0][i] + c.x[1][i];
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) {
      dx[0][i] += c.dy[i];
      dx[1][i] += c.dy[i];
    }
  }
};

struct SubOp {
  static Dim shape(const Graph& g, const Node& n) { return same_shapes("sub", g, n); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] = c.x[0][i] - c.x[1][i];
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) {
      dx[0][i] += c.dy[i];
      dx[1][i] -= c.dy[i];
    }
  }
};

struct CMultOp {
  static Dim shape(const Graph& g, const Node& n) { return same_shapes("cmult", g, n); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] = c.x[0][i] * c.x[1][i];
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) {
      dx[0][i] += c.dy[i] * c.x[1][i];
      dx[1][i] += c.dy[i] * c.x[0][i];
    }
  }
};

// Row-major, so stacking rows is laying the arguments end to end.
struct ConcatenateOp {
  static Dim shape(const Graph& g, const Node& n) {
    Dim out = arg_dim(g, n, 0);
    for (size_t i = 1; i < n.args.size(); ++i) {
      const Dim d = arg_dim(g, n, i);
      PRNN_EXPECT(d.cols == out.cols,
                  "concatenate: arguments must have equal column counts, got "
                  "{} (argument 1) and {} (argument {})",
                  to_string(arg_dim(g, n, 0)), to_string(d), i + 1);
      out.rows += d.rows;
    }
    return out;
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < c.x.size(); ++i) {
      const size_t n = numel(arg_dim(c.graph, c.node, i));
      y = std::copy(c.x[i], c.x[i] + n, y);
    }
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    const T* dy = c.dy;
    for (size_t i = 0; i < c.x.size(); ++i) {
      const size_t n = numel(arg_dim(c.graph, c.node, i));
      for (size_t j = 0; j < n; ++j) dx[i][j] += dy[j];
      dy += n;
    }
  }
};

// Rows [index, index + dim.rows) of the argument.
struct PickRangeOp {
  static Dim shape(const Graph& g, const Node& n) {
    const Dim x = arg_dim(g, n, 0);
    const std::int64_t begin = n.index, end = n.index + n.dim.rows;
    PRNN_EXPECT(begin >= 0 && begin < end && end <= x.rows,
                "pick_range: rows [{}, {}) are not a non-empty range inside {}", begin, end,
                to_string(x));
    return {n.dim.rows, x.cols};
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    const T* x = c.x[0] + c.node.index * c.node.dim.cols;
    std::copy(x, x + numel(c.node.dim), y);
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    T* d = dx[0] + c.node.index * c.node.dim.cols;
    for (size_t i = 0; i < numel(c.node.dim); ++i) d[i] += c.dy[i];
  }
};

struct TanhOp {
  static Dim shape(const Graph& g, const Node& n) { return arg_dim(g, n, 0); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] = std::tanh(c.x[0][i]);
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) dx[0][i] += c.dy[i] * (1 - c.y[i] * c.y[i]);
  }
};

struct LogisticOp {
  static Dim shape(const Graph& g, const Node& n) { return arg_dim(g, n, 0); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] = 1 / (1 + std::exp(-c.x[0][i]));
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) dx[0][i] += c.dy[i] * c.y[i] * (1 - c.y[i]);
  }
};

struct ReluOp {
  static Dim shape(const Graph& g, const Node& n) { return arg_dim(g, n, 0); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] = std::max(c.x[0][i], T{0});
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t i = 0; i < numel(c.node.dim); ++i)
      if (c.x[0][i] > 0) dx[0][i] += c.dy[i];
  }
};

// ---- Softmax family (column vectors) --------------------------------------------------------

// y = x - log Σ exp x;  dx = dy - softmax(x) · Σ dy
struct LogSoftmaxOp {
  static Dim shape(const Graph& g, const Node& n) { return column_vector("log_softmax", g, n); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    const size_t n = numel(c.node.dim);
    const T lse = log_sum_exp(c.x[0], n);
    for (size_t i = 0; i < n; ++i) y[i] = c.x[0][i] - lse;
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    const size_t n = numel(c.node.dim);
    T total = 0;
    for (size_t i = 0; i < n; ++i) total += c.dy[i];
    for (size_t i = 0; i < n; ++i) dx[0][i] += c.dy[i] - std::exp(c.y[i]) * total;
  }
};

// y = log Σ exp x - x[label];  dx = dy · (softmax(x) - onehot(label))
struct PickNegLogSoftmaxOp {
  static Dim shape(const Graph& g, const Node& n) {
    const Dim x = column_vector("pick_neg_log_softmax", g, n);
    PRNN_EXPECT(n.index >= 0 && n.index < x.rows,
                "pick_neg_log_softmax: label {} out of range [0, {}) for {}", n.index, x.rows,
                to_string(x));
    return {1, 1};
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    const size_t n = numel(arg_dim(c.graph, c.node, 0));
    y[0] = log_sum_exp(c.x[0], n) - c.x[0][c.node.index];
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    const size_t n = numel(arg_dim(c.graph, c.node, 0));
    const T lse = log_sum_exp(c.x[0], n);
    for (size_t i = 0; i < n; ++i) dx[0][i] += c.dy[0] * std::exp(c.x[0][i] - lse);
    dx[0][c.node.index] -= c.dy[0];
  }
};

// ---- Reductions and regularizers ------------------------------------------------------------

struct SumOp {
  static Dim shape(const Graph& g, const Node& n) { return same_shapes("sum", g, n); }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    std::fill(y, y + numel(c.node.dim), T{0});
    for (const T* x : c.x)
      for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] += x[i];
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (T* d : dx)
      for (size_t i = 0; i < numel(c.node.dim); ++i) d[i] += c.dy[i];
  }
};

struct DropoutOp {
  static Dim shape(const Graph& g, const Node& n) {
    PRNN_EXPECT(n.p >= 0.0 && n.p < 1.0, "dropout: p must be in [0, 1), got {}", n.p);
    return arg_dim(g, n, 0);
  }
  template <class T>
  static T scale(const OpCall<T>& c, size_t i) {
    if (!c.graph.training() || c.node.p == 0.0) return T{1};
    return static_cast<T>(dropout_scale(c.graph.seed(), c.id, i, c.node.p));
  }
  template <class T>
  static void forward(const OpCall<T>& c, T* y) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) y[i] = c.x[0][i] * scale(c, i);
  }
  template <class T>
  static void backward(const OpCall<T>& c, std::span<T* const> dx) {
    for (size_t i = 0; i < numel(c.node.dim); ++i) dx[0][i] += c.dy[i] * scale(c, i);
  }
};

// ---- The table ------------------------------------------------------------------------------

// The pointwise ops (OpInfo::pointwise); with dropout, the element-wise ones.
constexpr bool is_pointwise(Op op) {
  return op == Op::Add || op == Op::Sub || op == Op::CMult || op == Op::Tanh ||
         op == Op::Logistic || op == Op::Relu || op == Op::Sum;
}

constexpr OpInfo kRegistry[] = {
#define PRNN_GRAPH_OP_ENTRY(id, name, arity)            \
  OpInfo{Op::id,                                        \
         name,                                          \
         arity,                                         \
         &id##Op::shape,                                \
         &id##Op::forward<float>,                       \
         &id##Op::forward<double>,                      \
         &id##Op::backward<float>,                      \
         &id##Op::backward<double>,                     \
         is_pointwise(Op::id) || Op::id == Op::Dropout, \
         is_pointwise(Op::id)},
    PRNN_GRAPH_OPS(PRNN_GRAPH_OP_ENTRY)
#undef PRNN_GRAPH_OP_ENTRY
};

static_assert(std::size(kRegistry) == static_cast<size_t>(kOpCount));
static_assert(kOpCount == 17, "a new op also needs a builder in graph.h and a case in the tests");

constexpr bool registry_in_enum_order() {
  for (size_t i = 0; i < std::size(kRegistry); ++i)
    if (static_cast<size_t>(kRegistry[i].op) != i) return false;
  return true;
}
static_assert(registry_in_enum_order());

}  // namespace

const OpInfo& op_info(Op op) {
  const auto i = static_cast<size_t>(op);
  PRNN_ASSERT(i < std::size(kRegistry));
  return kRegistry[i];
}

const char* to_string(Op op) {
  return op_info(op).name;
}
int arity(Op op) {
  return op_info(op).arity;
}

double dropout_scale(std::uint64_t seed, NodeId id, size_t i, double p) {
  return dropout_mask_scale(seed, id, i, p);
}

}  // namespace prnn::graph
