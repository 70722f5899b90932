// AutobatchExecutor: runs the schedule of graph/autobatch.h on the host, one batched operation per
// batch, fp32.
//   Storage:  per batch one contiguous value buffer [B, size] and one gradient buffer [B, size],
//             member k at k*size (the plan's slot); a node's value is a view into its batch.
//   Forward:  per batch, gather each non-shared argument position into a packed [B, size_p]
//             array, then one operation per op family:
//               matmul / affine_transform   Yᵀ = Xᵀ·Wᵀ over all B·n columns of the batch at once
//                                           ([B·n, k]·[k, m]), the bias gathered, shared W as is;
//               add, sub, cmult, tanh, logistic, relu, sum
//                                           the registry's kernel over the concatenated batch;
//               row-wise ops (leaves, concatenate, pick_range, log_softmax,
//               pick_neg_log_softmax, dropout)
//                                           the registry's kernel per row of the packed arrays.
//   Backward: batches in reverse, restricted to members the loss depends on: gather y, dy and the
//             arguments, compute packed dx per position, scatter-add into the arguments'
//             gradients; a shared W gets dW = Σ over the whole batch, accumulated once per batch.
//   Fused groups (graph/autobatch.h): lane after lane, forward the lane's nodes in order, backward
//             in reverse (nodes the loss depends on only), each node by the registry's loop over
//             its elements, reading and accumulating in place. Per element this is the GPU's
//             program order; lanes run one after the other in both directions, so an argument
//             edge between two lanes (which the planner must never produce) reads an unfinished
//             value in one direction or the other and shows up in the comparisons with CpuExecutor.
// Matches CpuExecutor up to the summation order of dW (one sum over the batch instead of one per
// node) and of gradient scatter-adds: about 1e-6 relative in fp32.
#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "graph/autobatch.h"
#include "graph/device_model.h"
#include "graph/ops.h"
#include "prnn/graph.h"

namespace prnn::graph {
namespace {

using std::size_t;
using Clock = std::chrono::steady_clock;

static_assert(kOpCount == 17, "a new op needs a batched kernel family in autobatch_executor.cpp");

size_t numel(Dim d) {
  return static_cast<size_t>(d.size());
}
size_t idx(std::int64_t i) {
  return static_cast<size_t>(i);
}
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

enum class Family : std::uint8_t { RowWise, Flat, Product };

Family family(Op op) {
  if (op == Op::MatMul || op == Op::AffineTransform) return Family::Product;
  return op_info(op).pointwise ? Family::Flat : Family::RowWise;
}

// ---- Products over transposed column blocks ------------------------------------------------
// A member's x [k, n] is n columns; the batch's columns are stacked as rows of Xt [B·n, k].

// Xt[(b·n + c)·k + r] = x_b[r·n + c] from packed x [B, k·n].
void to_columns(const float* x, size_t B, size_t k, size_t n, float* xt) {
  for (size_t b = 0; b < B; ++b)
    for (size_t r = 0; r < k; ++r)
      for (size_t c = 0; c < n; ++c) xt[(b * n + c) * k + r] = x[b * k * n + r * n + c];
}
// y_b[r·n + c] += Yt[(b·n + c)·m + r]
void add_from_columns(const float* yt, size_t B, size_t m, size_t n, float* y) {
  for (size_t b = 0; b < B; ++b)
    for (size_t r = 0; r < m; ++r)
      for (size_t c = 0; c < n; ++c) y[b * m * n + r * n + c] += yt[(b * n + c) * m + r];
}
// Yt [J, m] = Xt [J, k] · Wᵀ, W [m, k]; each entry summed over k in order from 0, as the reference.
void product(const float* xt, const float* w, size_t J, size_t m, size_t k, float* yt) {
  for (size_t j = 0; j < J; ++j)
    for (size_t r = 0; r < m; ++r) {
      float acc = 0;
      for (size_t i = 0; i < k; ++i) acc += xt[j * k + i] * w[r * k + i];
      yt[j * m + r] = acc;
    }
}
// dW [m, k] += dYtᵀ · Xt;  dXt [J, k] = dYt [J, m] · W
void product_backward(const float* xt, const float* w, const float* dyt, size_t J, size_t m,
                      size_t k, float* dw, float* dxt) {
  for (size_t r = 0; r < m; ++r)
    for (size_t i = 0; i < k; ++i) {
      float acc = 0;
      for (size_t j = 0; j < J; ++j) acc += dyt[j * m + r] * xt[j * k + i];
      dw[r * k + i] += acc;
    }
  for (size_t j = 0; j < J; ++j)
    for (size_t i = 0; i < k; ++i) {
      float acc = 0;
      for (size_t r = 0; r < m; ++r) acc += dyt[j * m + r] * w[r * k + i];
      dxt[j * k + i] = acc;
    }
}

// ---- Packed batches ---------------------------------------------------------------------------

struct Buffers {
  std::vector<std::vector<float>> value;  // per batch [B, size]
  std::vector<std::vector<float>> grad;   // per batch [B, size]
};

struct Packed {
  std::vector<NodeId> members;
  const Node* first = nullptr;             // any member: op, dims, shared arguments
  std::vector<std::vector<float>> x;       // per position [B, size_p]; empty when shared
  std::vector<const float*> shared;        // per position: the shared node's value, else null
  std::vector<Dim> arg_dims;               // per position
};

class Runner {
 public:
  Runner(const Graph& g, const BatchPlan& plan, Buffers& buf) : g_(g), plan_(plan), buf_(buf) {}

  float* value(NodeId id) { return slot(buf_.value, id); }
  float* grad(NodeId id) { return slot(buf_.grad, id); }

  Packed pack(const std::vector<NodeId>& members) {
    Packed p;
    p.members = members;
    p.first = &g_.node(members.front());
    const size_t B = members.size(), n_args = p.first->args.size();
    p.x.resize(n_args);
    p.shared.assign(n_args, nullptr);
    for (size_t a = 0; a < n_args; ++a) {
      const Dim d = g_.node(p.first->args[a]).dim;
      p.arg_dims.push_back(d);
      if (is_shared_argument(p.first->op, a)) {
        p.shared[a] = value(p.first->args[a]);
        continue;
      }
      p.x[a].resize(B * numel(d));
      for (size_t b = 0; b < B; ++b) {
        const float* src = value(g_.node(members[b]).args[a]);
        std::copy(src, src + numel(d), p.x[a].begin() + static_cast<std::ptrdiff_t>(b * numel(d)));
      }
    }
    return p;
  }

  void forward(const Batch& batch) {
    Packed p = pack(batch.nodes);
    float* y = buf_.value[idx(plan_.batch_of[idx(batch.nodes.front())])].data();
    const size_t B = p.members.size(), out = numel(p.first->dim);
    switch (family(p.first->op)) {
      case Family::Product: {
        std::vector<float> yt;
        if (p.first->op == Op::AffineTransform)
          std::copy(p.x[0].begin(), p.x[0].end(), y);
        else
          std::fill(y, y + B * out, 0.0f);
        const size_t first_w = p.first->op == Op::AffineTransform ? 1 : 0;
        std::vector<float> xt;
        for (size_t a = first_w; a < p.x.size(); a += 2) {
          const Dim w = p.arg_dims[a], x = p.arg_dims[a + 1];
          const size_t m = idx(w.rows), k = idx(w.cols), n = idx(x.cols);
          xt.resize(B * n * k);
          yt.resize(B * n * m);
          to_columns(p.x[a + 1].data(), B, k, n, xt.data());
          product(xt.data(), p.shared[a], B * n, m, k, yt.data());
          add_from_columns(yt.data(), B, m, n, y);
        }
        break;
      }
      case Family::Flat: {
        Node whole = *p.first;
        whole.dim = Dim{static_cast<std::int64_t>(B) * p.first->dim.rows, p.first->dim.cols};
        std::vector<const float*> xs;
        for (const auto& x : p.x) xs.push_back(x.data());
        const OpCall<float> call{g_, whole, batch.nodes.front(), xs};
        op_info(whole.op).forward<float>()(call, y);
        break;
      }
      case Family::RowWise: {
        std::vector<const float*> xs(p.x.size());
        for (size_t b = 0; b < B; ++b) {
          for (size_t a = 0; a < p.x.size(); ++a) xs[a] = p.x[a].data() + b * numel(p.arg_dims[a]);
          const Node& node = g_.node(p.members[b]);
          const OpCall<float> call{g_, node, p.members[b], xs};
          op_info(node.op).forward<float>()(call, y + b * out);
        }
        break;
      }
    }
  }

  void forward(const FusedGroup& group) {
    std::vector<const float*> xs;
    for (NodeId id : group.nodes) {  // lane by lane, in lane order
      const Node& node = g_.node(id);
      xs.clear();
      for (NodeId a : node.args) xs.push_back(value(a));
      const OpCall<float> call{g_, node, id, xs};
      op_info(node.op).forward<float>()(call, value(id));
    }
  }

  // Lane by lane, each lane's nodes in reverse; nodes not `needed` are skipped.
  void backward(const FusedGroup& group, const std::vector<bool>& needed) {
    std::vector<const float*> xs;
    std::vector<float*> dxs;
    for (size_t l = 0; l < group.lanes(); ++l)
      for (int k = group.lane_first[l + 1]; k-- > group.lane_first[l];) {
        const NodeId id = group.nodes[static_cast<size_t>(k)];
        if (!needed[idx(id)]) continue;
        const Node& node = g_.node(id);
        xs.clear();
        dxs.clear();
        for (NodeId a : node.args) {
          xs.push_back(value(a));
          dxs.push_back(grad(a));
        }
        const OpCall<float> call{g_, node, id, xs, value(id), grad(id)};
        op_info(node.op).backward<float>()(call, dxs);
      }
  }

  // Members of `batch` in `live` only; dL/d(member) must be final (all users done).
  void backward(const std::vector<NodeId>& live) {
    Packed p = pack(live);
    const size_t B = live.size(), out = numel(p.first->dim);
    std::vector<float> y(B * out), dy(B * out);
    for (size_t b = 0; b < B; ++b) {
      std::copy(value(live[b]), value(live[b]) + out, y.begin() + static_cast<std::ptrdiff_t>(b * out));
      std::copy(grad(live[b]), grad(live[b]) + out, dy.begin() + static_cast<std::ptrdiff_t>(b * out));
    }
    // Packed dL/d(argument) per position ([B, size_p]); a shared position accumulates straight
    // into the shared node's gradient.
    std::vector<std::vector<float>> dx(p.x.size());
    for (size_t a = 0; a < p.x.size(); ++a)
      if (p.shared[a] == nullptr) dx[a].assign(p.x[a].size(), 0.0f);

    switch (family(p.first->op)) {
      case Family::Product: {
        const size_t first_w = p.first->op == Op::AffineTransform ? 1 : 0;
        if (first_w == 1) dx[0] = dy;  // the bias
        std::vector<float> xt, dyt, dxt;
        for (size_t a = first_w; a < p.x.size(); a += 2) {
          const Dim w = p.arg_dims[a], x = p.arg_dims[a + 1];
          const size_t m = idx(w.rows), k = idx(w.cols), n = idx(x.cols);
          xt.resize(B * n * k);
          dyt.resize(B * n * m);
          dxt.resize(B * n * k);
          to_columns(p.x[a + 1].data(), B, k, n, xt.data());
          to_columns(dy.data(), B, m, n, dyt.data());
          product_backward(xt.data(), p.shared[a], dyt.data(), B * n, m, k,
                           grad(p.first->args[a]), dxt.data());
          add_from_columns(dxt.data(), B, k, n, dx[a + 1].data());
        }
        break;
      }
      case Family::Flat: {
        Node whole = *p.first;
        whole.dim = Dim{static_cast<std::int64_t>(B) * p.first->dim.rows, p.first->dim.cols};
        std::vector<const float*> xs;
        std::vector<float*> dxs;
        for (size_t a = 0; a < p.x.size(); ++a) {
          xs.push_back(p.x[a].data());
          dxs.push_back(dx[a].data());
        }
        const OpCall<float> call{g_, whole, live.front(), xs, y.data(), dy.data()};
        op_info(whole.op).backward<float>()(call, dxs);
        break;
      }
      case Family::RowWise: {
        std::vector<const float*> xs(p.x.size());
        std::vector<float*> dxs(p.x.size());
        for (size_t b = 0; b < B; ++b) {
          for (size_t a = 0; a < p.x.size(); ++a) {
            xs[a] = p.x[a].data() + b * numel(p.arg_dims[a]);
            dxs[a] = dx[a].data() + b * numel(p.arg_dims[a]);
          }
          const Node& node = g_.node(live[b]);
          const OpCall<float> call{g_, node, live[b], xs, y.data() + b * out, dy.data() + b * out};
          op_info(node.op).backward<float>()(call, dxs);
        }
        break;
      }
    }
    // Scatter-add the packed argument gradients.
    for (size_t a = 0; a < dx.size(); ++a) {
      if (p.shared[a] != nullptr) continue;
      const size_t n = numel(p.arg_dims[a]);
      for (size_t b = 0; b < B; ++b) {
        float* dst = grad(g_.node(live[b]).args[a]);
        const float* src = dx[a].data() + b * n;
        for (size_t i = 0; i < n; ++i) dst[i] += src[i];
      }
    }
  }

 private:
  float* slot(std::vector<std::vector<float>>& per_batch, NodeId id) {
    const size_t node = idx(id);
    return per_batch[idx(plan_.batch_of[node])].data() +
           idx(plan_.slot_of[node]) * numel(g_.node(id).dim);
  }

  const Graph& g_;
  const BatchPlan& plan_;
  Buffers& buf_;
};

}  // namespace

struct AutobatchExecutor::State {
  const Graph* graph = nullptr;
  std::size_t computed = 0;
  bool has_gradients = false;
  BatchPlan plan;
  Buffers buffers;
  AutobatchStats stats;
};

AutobatchExecutor::AutobatchExecutor(BatchStrategy strategy, Fusion fusion)
    : strategy_(strategy), fusion_(fusion), state_(std::make_unique<State>()) {}

AutobatchExecutor::~AutobatchExecutor() = default;

const AutobatchStats& AutobatchExecutor::stats() const {
  return state_->stats;
}

void AutobatchExecutor::forward(Graph& g, Expr last) {
  PRNN_EXPECT(last.valid() && last.graph == &g,
              "autobatch executor: forward: the expression does not belong to this graph");
  check_host_copy_current(g, last.id, "autobatch executor");
  State& s = *state_;
  s.graph = nullptr;
  s.has_gradients = false;

  const auto t_plan = Clock::now();
  s.plan = plan_batches(g, last.id, strategy_, fusion_);
  AutobatchStats stats = plan_statistics(s.plan, seconds_since(t_plan));

  const auto t_run = Clock::now();
  s.buffers.value.assign(s.plan.batches.size(), {});
  s.buffers.grad.clear();
  for (std::size_t b = 0; b < s.plan.batches.size(); ++b) {
    const Batch& batch = s.plan.batches[b];
    s.buffers.value[b].assign(batch.nodes.size() * numel(g.node(batch.nodes.front()).dim), 0.0f);
  }
  Runner run(g, s.plan, s.buffers);
  for (std::size_t b = 0; b < s.plan.batches.size();) {
    const int group = s.plan.group_of[b];
    if (group < 0) {
      run.forward(s.plan.batches[b++]);
      continue;
    }
    run.forward(s.plan.groups[idx(group)]);
    b = idx(s.plan.groups[idx(group)].end);
  }
  stats.forward_seconds = seconds_since(t_run);

  s.stats = std::move(stats);
  s.graph = &g;
  s.computed = static_cast<std::size_t>(last.id) + 1;
}

void AutobatchExecutor::backward(Graph& g, Expr loss) {
  PRNN_EXPECT(loss.valid() && loss.graph == &g,
              "autobatch executor: backward: the loss does not belong to this graph");
  State& s = *state_;
  PRNN_EXPECT(s.graph == &g && static_cast<std::size_t>(loss.id) < s.computed,
              "autobatch executor: backward: node {} was not computed; call forward(g, loss) first",
              loss.id);
  PRNN_EXPECT(loss.dim() == Dim(1, 1), "autobatch executor: backward: the loss must be 1x1, got {}",
              to_string(loss.dim()));
  check_host_copy_current(g, loss.id, "autobatch executor");
  const auto t0 = Clock::now();
  const std::size_t n = static_cast<std::size_t>(loss.id) + 1;
  std::vector<bool> needed(s.computed, false);
  needed[n - 1] = true;
  for (std::size_t id = n; id-- > 0;)
    if (needed[id])
      for (NodeId a : g.nodes()[id].args) needed[idx(a)] = true;

  s.buffers.grad.resize(s.buffers.value.size());
  for (std::size_t b = 0; b < s.buffers.value.size(); ++b)
    s.buffers.grad[b].assign(s.buffers.value[b].size(), 0.0f);
  Runner run(g, s.plan, s.buffers);
  run.grad(loss.id)[0] = 1.0f;
  std::vector<NodeId> live;
  for (std::size_t b = s.plan.batches.size(); b-- > 0;) {
    if (const int group = s.plan.group_of[b]; group >= 0) {
      const FusedGroup& fused = s.plan.groups[idx(group)];
      run.backward(fused, needed);
      b = idx(fused.begin);  // the loop steps on to the batch before the group
      continue;
    }
    live.clear();
    for (NodeId id : s.plan.batches[b].nodes)
      if (needed[idx(id)]) live.push_back(id);
    if (!live.empty()) run.backward(live);
  }
  push_host_gradients(g, loss.id);  // a Model on the device keeps the master copy there
  s.stats.backward_seconds = seconds_since(t0);
  s.has_gradients = true;
}

std::vector<double> AutobatchExecutor::value(Expr e) const {
  const State& s = *state_;
  PRNN_EXPECT(e.valid() && e.graph == s.graph && static_cast<std::size_t>(e.id) < s.computed,
              "autobatch executor: value: node {} was not computed by the last forward", e.id);
  const std::size_t node = idx(e.id), n = numel(e.dim());
  const float* v = s.buffers.value[idx(s.plan.batch_of[node])].data() + idx(s.plan.slot_of[node]) * n;
  return std::vector<double>(v, v + n);
}

std::vector<double> AutobatchExecutor::gradient(Expr e) const {
  const State& s = *state_;
  PRNN_EXPECT(s.has_gradients && e.valid() && e.graph == s.graph &&
                  static_cast<std::size_t>(e.id) < s.computed,
              "autobatch executor: gradient: node {} has no gradient from the last backward", e.id);
  const std::size_t node = idx(e.id), n = numel(e.dim());
  const float* v = s.buffers.grad[idx(s.plan.batch_of[node])].data() + idx(s.plan.slot_of[node]) * n;
  return std::vector<double>(v, v + n);
}

}  // namespace prnn::graph
