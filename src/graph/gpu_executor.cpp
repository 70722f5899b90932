// GpuExecutor and GpuAutobatchExecutor (contracts in prnn/graph.h): one runner over a BatchPlan,
// the trivial one-node-per-batch plan for the per-node executor, the autobatching planner's
// (graph/autobatch.h) for the other, so both share every kernel and every layout rule.
//
// Layout (device, fp32, row-major as the host):
//   values arena  [node values | input values | scratch]: every node has a slot at offset[node],
//                 the members of a batch contiguous in slot order (member k at k*size), so a
//                 batch's output is one [B, size] array; Input nodes read the uploaded input
//                 region, Parameter nodes the Model's device copy (no copy), PickRange nodes
//                 are views (a range of their argument's value), everything else its slot.
//                 Scratch is a per-batch bump region (stream order makes reuse safe).
//   grads arena   dL/d(node) for every node at the same offsets; zeroed by backward. A PickRange
//                 whose argument is used only by PickRanges of disjoint ranges uses the range of
//                 the argument's gradient instead (exact: nothing else flows there), so its
//                 backward needs no launch; other PickRanges scatter-add their slot into it.
//   tables        the pointer / int64 / double tables of all launches of one forward or backward,
//                 built on the host while planning the launches, uploaded with ONE copy, then
//                 the launches are issued (host closures, in order, on the default stream).
// Forward per batch: Input/Parameter/PickRange nothing; Lookup, Concatenate one gather;
//   MatMul/AffineTransform with at most kSmallProductColumns columns (members × x columns) one
//   small_product_forward (biases, every weight, no packing); beyond, one copy_pieces (biases
//   into y, the x's packed into scratch unless already contiguous) and one cuBLAS GEMM per weight
//   (n == 1: W·[x_1 .. x_B]; n > 1: strided-batched with the shared W); the others one kernel of
//   graph/gpu_kernels.h.
// Backward, batches in reverse, only those with a member the loss depends on: kernels accumulate
//   into the arguments' gradients directly when no two destinations of the launch share memory,
//   else store into scratch followed by a scatter_add grouped by destination (sources in
//   (argument position, member) order, the CPU autobatch executor's order); small products one
//   small_product_backward (dW, dx and the biases' gradient), cuBLAS products one copy_pieces
//   for packing and two GEMMs per weight (a shared W's dW from one GEMM over the batch, beta = 1);
//   Parameter and Lookup batches scatter-add into the Model's device gradients (lookups grouped
//   by row, marking the touched rows). No float atomics.
// Fused groups (graph/autobatch.h, Fusion::Elementwise): forward one fused_elementwise_forward
//   per group, the lanes' programs in the tables (an operand in the same lane from registers,
//   else from memory); backward one fused_elementwise_backward per group with a node the loss
//   depends on, when its gradient destinations allow a thread to own every element it adds to
//   (no memory shared between lanes, a lane's spans pairwise equal or disjoint); otherwise the
//   group's batches one by one in reverse, as unfused.
// Launch counts: every kernel launch, cuBLAS call, memset and copy is counted (DeviceTimes).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>

#include "core/check.h"
#include "graph/autobatch.h"
#include "graph/device_model.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/graph.h"
#include "prnn/tensor.h"

#if PRNN_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/cublas.h"
#include "core/cuda_check.h"
#include "core/event_timer.h"
#include "graph/gpu_kernels.h"
#endif

namespace prnn::graph {

#if PRNN_WITH_CUDA
namespace {

using std::size_t;
using Clock = std::chrono::steady_clock;

static_assert(kOpCount == 17, "a new op needs a GPU kernel family in gpu_executor.cpp");
static_assert(kMaxLaneNodes <= gpu::kFusedLaneSlots,
              "a lane of a fused group must fit the fused kernels' registers");

constexpr cudaStream_t kStream = nullptr;  // the legacy default stream: ordered with the trainers
constexpr size_t kAlignFloats = 4;         // 16-byte aligned batch slots and scratch pieces
constexpr double kGrowth = 1.5;            // arena growth factor

size_t numel(Dim d) {
  return static_cast<size_t>(d.size());
}
size_t idx(std::int64_t i) {
  return static_cast<size_t>(i);
}
size_t align_up(size_t n) {
  return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
int as_int(size_t v, const char* what) {
  if (v > static_cast<size_t>(INT_MAX))
    throw Unsupported("GPU graph executor",
                      fmt::format("cuBLAS and the kernels take 32-bit sizes: {} = {}", what, v));
  return static_cast<int>(v);
}

// A device buffer that only grows (by kGrowth), so steady-state training does not allocate.
class Arena {
 public:
  void* reserve(size_t bytes) {
    if (buf_.bytes() < bytes)
      buf_ = DeviceBuffer(std::max(bytes, static_cast<size_t>(static_cast<double>(buf_.bytes()) *
                                                               kGrowth)));
    return buf_.data();
  }
  float* floats() const { return buf_.data_as<float>(); }

 private:
  DeviceBuffer buf_;
};

// Tables of one forward or backward: 64-bit words appended on the host, uploaded at once.
class Tables {
 public:
  void clear() { words_.clear(); }
  template <class P>
  size_t pointers(const std::vector<P*>& ptrs) {
    const size_t at = words_.size();
    for (P* p : ptrs) words_.push_back(std::bit_cast<std::uint64_t>(p));
    return at;
  }
  size_t ints(const std::vector<std::int64_t>& v) {
    const size_t at = words_.size();
    for (std::int64_t x : v) words_.push_back(static_cast<std::uint64_t>(x));
    return at;
  }
  size_t reals(const std::vector<double>& v) {
    const size_t at = words_.size();
    for (double x : v) words_.push_back(std::bit_cast<std::uint64_t>(x));
    return at;
  }
  // Room for n words at the end, filled in place through words(at) (valid until the next
  // append); returns where they start.
  size_t append(size_t n) {
    const size_t at = words_.size();
    words_.resize(at + n);
    return at;
  }
  std::uint64_t* words(size_t at) { return words_.data() + at; }
  template <class P>
  static std::uint64_t word(P* p) {
    return std::bit_cast<std::uint64_t>(p);
  }
  static std::uint64_t word(std::int64_t v) { return static_cast<std::uint64_t>(v); }
  static std::uint64_t word(double v) { return std::bit_cast<std::uint64_t>(v); }
  // Returns whether a copy was issued (none for empty tables).
  bool upload(Arena& dev) {
    base_ = static_cast<std::uint64_t*>(dev.reserve(std::max<size_t>(words_.size(), 1) * 8));
    if (words_.empty()) return false;
    PRNN_CUDA_CHECK(cudaMemcpyAsync(base_, words_.data(), words_.size() * 8,
                                    cudaMemcpyHostToDevice, kStream));
    return true;
  }
  // Device address of the table at word `at` (valid after upload).
  template <class T>
  T* at(size_t at) const {
    return reinterpret_cast<T*>(base_ + at);
  }

 private:
  std::vector<std::uint64_t> words_;
  std::uint64_t* base_ = nullptr;
};

// One contribution dst[i] += src[i] (i < size) of a scatter_add.
struct Contribution {
  float* dst;
  std::int64_t size;
  const float* src;
  std::uint8_t* flag;  // set to 1 with the add, or null
};

gpu::Pointwise pointwise_of(Op op) {
  switch (op) {
    case Op::Add: return gpu::Pointwise::Add;
    case Op::Sub: return gpu::Pointwise::Sub;
    case Op::CMult: return gpu::Pointwise::CMult;
    case Op::Tanh: return gpu::Pointwise::Tanh;
    case Op::Logistic: return gpu::Pointwise::Logistic;
    case Op::Relu: return gpu::Pointwise::Relu;
    case Op::Sum: return gpu::Pointwise::Sum;
    default: break;
  }
  PRNN_ASSERT(false);
  return gpu::Pointwise::Add;
}

gpu::FusedOp fused_op_of(Op op) {
  if (op == Op::Dropout) return gpu::FusedOp::Dropout;
  return static_cast<gpu::FusedOp>(pointwise_of(op));  // the same codes (gpu_kernels.cu checks)
}

bool contiguous(const std::vector<const float*>& xs, size_t stride) {
  for (size_t b = 1; b < xs.size(); ++b)
    if (xs[b] != xs[0] + b * stride) return false;
  return true;
}

// Device memory [begin, begin + size) floats.
struct Span {
  const float* begin;
  size_t size;
};

// Whether no two spans share a float (views make partial overlaps possible, so equality of the
// start pointers is not enough).
bool disjoint(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return std::less<>{}(a.begin, b.begin); });
  for (size_t i = 1; i < spans.size(); ++i)
    if (std::less<>{}(spans[i].begin, spans[i - 1].begin + spans[i - 1].size)) return false;
  return true;
}

// A MatMul / AffineTransform batch: y [m, n] = [bias +] Σ_i W_i x_i over P weights at argument
// positions first_weight, first_weight + 2, ...; k[i] the columns of W_i.
struct ProductShape {
  bool affine = false;
  size_t first_weight = 0;
  int P = 0;
  int B = 0;
  std::int64_t m = 0, n = 0;
  std::vector<std::int64_t> k;
  std::int64_t columns() const { return static_cast<std::int64_t>(B) * n; }
  // The fused kernels (gpu::small_product_*) up to kSmallProductColumns columns (members × x
  // columns): each reads W once per launch and is bound by that read, where cuBLAS would issue
  // a bias gather, argument packing and one GEMM per weight (two in backward), each launch
  // costing more than the W read. Beyond it, cuBLAS's tiled GEMMs reuse W across columns better.
  bool small() const { return columns() <= gpu::kSmallProductColumns; }
};

ProductShape product_shape(const Graph& g, const std::vector<NodeId>& members) {
  const Node& f = g.node(members.front());
  ProductShape ps;
  ps.affine = f.op == Op::AffineTransform;
  ps.first_weight = ps.affine ? 1 : 0;
  ps.B = static_cast<int>(std::min<size_t>(members.size(), INT_MAX));
  ps.m = f.dim.rows;
  ps.n = f.dim.cols;
  for (size_t a = ps.first_weight; a < f.args.size(); a += 2) ps.k.push_back(g.node(f.args[a]).dim.cols);
  ps.P = static_cast<int>(ps.k.size());
  return ps;
}

// The runner: device state that persists across graphs, plus the layout of the current one.
class Runner {
 public:
  // ---- per graph ------------------------------------------------------------------------------
  const Graph* graph = nullptr;
  size_t computed = 0;
  bool has_gradients = false;
  BatchPlan plan;
  DeviceTimes times;

  void forward(const Graph& g, NodeId last, BatchPlan p) {
    const auto built_from = Clock::now();
    graph = nullptr;
    has_gradients = false;
    plan = std::move(p);
    g_ = &g;
    layout(g, last);
    tables_.clear();
    launches_.clear();
    for (size_t b = 0; b < plan.batches.size();) {
      const int group = plan.group_of[b];
      if (group < 0) {
        build_forward(plan.batches[b++]);
        continue;
      }
      const FusedGroup& fused = plan.groups[idx(group)];
      build_forward_group(fused);
      b = idx(fused.end);
    }
    std::vector<float>& inputs = inputs_;
    inputs.assign(input_floats_, 0.0f);
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g.nodes()[id];
      if (node.op != Op::Input) continue;
      const auto& v = g.input_values();
      for (size_t i = 0; i < numel(node.dim); ++i)
        inputs[input_offset_[id] + i] = static_cast<float>(v[node.input_offset + i]);
    }
    const double build = seconds_since(built_from);
    const auto issued_from = Clock::now();
    fwd_events_.start();
    issued_ = 0;
    if (!inputs.empty()) copy_to_device(input_base_, inputs.data(), inputs.size() * sizeof(float));
    upload_tables(fwd_tables_);
    for (const auto& launch : launches_) launch();
    fwd_events_.stop();
    times = DeviceTimes{};
    times.forward_issue_seconds = seconds_since(issued_from);
    times.forward_launches = issued_;
    times.forward_build_seconds = build;
    graph = &g;
    computed = n_;
  }

  void backward(const Graph& g, NodeId loss) {
    const auto built_from = Clock::now();
    const size_t n = idx(loss) + 1;
    needed_.assign(n_, false);
    needed_[n - 1] = true;
    for (size_t id = n; id-- > 0;)
      if (needed_[id])
        for (NodeId a : g.nodes()[id].args) needed_[idx(a)] = true;
    tables_.clear();
    launches_.clear();
    tickets_needed_ = 0;
    for (size_t b = plan.batches.size(); b-- > 0;) {
      if (const int group = plan.group_of[b]; group >= 0) {
        const FusedGroup& fused = plan.groups[idx(group)];
        build_backward_group(fused);
        b = idx(fused.begin);  // the loop steps on to the batch before the group
        continue;
      }
      build_backward(plan.batches[b]);
    }
    times.backward_build_seconds = seconds_since(built_from);

    const auto issued_from = Clock::now();
    bwd_events_.start();
    issued_ = 0;
    if (tickets_.bytes() < tickets_needed_ * sizeof(unsigned)) {
      tickets_ = DeviceBuffer(tickets_needed_ * sizeof(unsigned));  // the kernels leave them 0
      PRNN_CUDA_CHECK(cudaMemsetAsync(tickets_.data(), 0, tickets_.bytes(), kStream));
      ++issued_;
    }
    float* grads = grads_.floats();
    zero_async(grads, value_floats_);
    static const float kOne = 1.0f;
    copy_to_device(grad(loss), &kOne, sizeof(float));
    upload_tables(bwd_tables_);
    for (const auto& launch : launches_) launch();
    bwd_events_.stop();
    times.backward_issue_seconds = seconds_since(issued_from);
    times.backward_launches = issued_;
    has_gradients = true;
  }

  std::vector<double> read(NodeId id, bool gradient) const {
    const size_t n = numel(g_->node(id).dim);
    std::vector<float> host(n);
    const float* src = gradient ? grad_[idx(id)] : value_[idx(id)];
    PRNN_CUDA_CHECK(cudaMemcpy(host.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost));
    return std::vector<double>(host.begin(), host.end());
  }

  DeviceTimes device_times() const {
    DeviceTimes t = times;
    t.forward_seconds = fwd_events_.seconds();
    t.backward_seconds = has_gradients ? bwd_events_.seconds() : 0.0;
    return t;
  }

 private:
  // ---- layout ---------------------------------------------------------------------------------

  void layout(const Graph& g, NodeId last) {
    n_ = idx(last) + 1;
    offset_.assign(n_, 0);
    input_offset_.assign(n_, 0);
    size_t cursor = 0, inputs = 0, scratch = 0;
    for (const Batch& batch : plan.batches) {
      const Node& first = g.node(batch.nodes.front());
      cursor = align_up(cursor);
      for (NodeId id : batch.nodes) {
        offset_[idx(id)] = cursor;
        cursor += numel(g.node(id).dim);
      }
      // Scratch bound of the batch: packed inputs and packed argument gradients, two per
      // non-shared argument position (products pack x and dX), plus a small product's partial
      // sums.
      size_t need = 0;
      for (size_t a = 0; a < first.args.size(); ++a)
        if (!is_shared_argument(first.op, a))
          need += 2 * align_up(batch.nodes.size() * numel(g.node(first.args[a]).dim));
      if (first.op == Op::MatMul || first.op == Op::AffineTransform) {
        const ProductShape ps = product_shape(g, batch.nodes);
        if (ps.small())
          need += align_up(static_cast<size_t>(gpu::small_product_backward_workspace(
              ps.k.data(), ps.P, ps.m, ps.columns())));
      }
      scratch = std::max(scratch, need);
    }
    for (size_t id = 0; id < n_; ++id)
      if (g.nodes()[id].op == Op::Input) {
        input_offset_[id] = inputs;
        inputs += numel(g.nodes()[id].dim);
      }
    value_floats_ = align_up(cursor);
    input_floats_ = inputs;
    scratch_floats_ = scratch;
    const size_t total = value_floats_ + align_up(inputs) + scratch;
    values_.reserve(std::max<size_t>(total, 1) * sizeof(float));
    grads_.reserve(std::max<size_t>(value_floats_, 1) * sizeof(float));
    float* base = values_.floats();
    input_base_ = base + value_floats_;
    scratch_base_ = input_base_ + align_up(inputs);

    // A PickRange's gradient is a view of its argument's where that is exact: every user of
    // the argument is a PickRange and their ranges are disjoint, so the range receives exactly
    // what flows through the pick. Elsewhere the pick keeps its own gradient slot.
    picks_.clear();  // (argument, begin, end) of every PickRange
    exclusive_.assign(n_, true);
    std::vector<bool>& exclusive = exclusive_;
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g.nodes()[id];
      for (NodeId a : node.args) {
        if (node.op == Op::PickRange)
          picks_.push_back({a, node.index, node.index + node.dim.rows});
        else
          exclusive[idx(a)] = false;
      }
    }
    // Overlapping ranges of one argument: the picks grouped by argument (a counting sort), each
    // argument's few ranges sorted by begin, neighbours compared.
    pick_first_.assign(n_ + 1, 0);
    for (const Pick& p : picks_) ++pick_first_[idx(p.arg) + 1];
    for (size_t a = 0; a < n_; ++a) pick_first_[a + 1] += pick_first_[a];
    pick_cursor_.assign(pick_first_.begin(), pick_first_.end() - 1);
    by_arg_.resize(picks_.size());
    for (const Pick& p : picks_) by_arg_[pick_cursor_[idx(p.arg)]++] = p;
    for (size_t a = 0; a < n_; ++a) {
      const auto lo = by_arg_.begin() + static_cast<std::ptrdiff_t>(pick_first_[a]);
      const auto hi = by_arg_.begin() + static_cast<std::ptrdiff_t>(pick_first_[a + 1]);
      if (hi - lo < 2) continue;
      std::sort(lo, hi, [](const Pick& x, const Pick& y) { return x.begin < y.begin; });
      for (auto it = lo + 1; it != hi; ++it)
        if (it->begin < (it - 1)->end) exclusive[a] = false;
    }
    value_.assign(n_, nullptr);
    grad_.assign(n_, nullptr);
    grad_view_.assign(n_, false);
    lane_of_.assign(n_, -1);
    lane_slot_.assign(n_, -1);
    touched_.assign(n_, Touch{});
    touch_epoch_ = 0;
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g.nodes()[id];
      grad_[id] = grads_.floats() + offset_[id];
      switch (node.op) {
        case Op::Input:
          value_[id] = input_base_ + input_offset_[id];
          break;
        case Op::Parameter: {
          DeviceMirror& m = device_mirror(*node.param.model());
          value_[id] = m.params[idx(node.param.index())].value.data_as<float>();
          break;
        }
        case Op::PickRange: {  // rows [index, index + rows) of a row-major argument: contiguous
          const size_t at = idx(node.index * node.dim.cols), arg = idx(node.args[0]);
          value_[id] = value_[arg] + at;
          if (exclusive[arg]) {
            grad_[id] = grad_[arg] + at;
            grad_view_[id] = true;
          }
          break;
        }
        default:
          value_[id] = base + offset_[id];
      }
    }
  }

  const float* value(NodeId id) const { return value_[idx(id)]; }
  float* grad(NodeId id) const { return grad_[idx(id)]; }
  Dim dim(NodeId id) const { return g_->node(id).dim; }

  // Bump allocation in the scratch region, reset per batch.
  float* scratch(size_t floats) {
    float* p = scratch_base_ + scratch_used_;
    scratch_used_ += align_up(floats);
    PRNN_ASSERT(scratch_used_ <= scratch_floats_);
    return p;
  }

  // ---- launch helpers -------------------------------------------------------------------------

  // Every GPU operation goes through one of these, so `issued_` counts what a forward or
  // backward issues (DeviceTimes::forward_launches / backward_launches).
  //   launch(f)       f issues exactly one kernel (a launcher of graph/gpu_kernels.h);
  //   launch_blas(f)  f issues cuBLAS calls, each on the handle blas() returns (counted there);
  //   zero_async, copy_to_device, upload_tables: one memset / copy each, issued at once.
  template <class F>
  void launch(F&& f) {
    launches_.emplace_back([this, f = std::forward<F>(f)]() mutable {
      f();
      ++issued_;
    });
  }
  template <class F>
  void launch_blas(F&& f) {
    launches_.emplace_back(std::forward<F>(f));
  }
  cublasHandle_t blas() {
    ++issued_;
    return cublas_.get();
  }
  void zero_async(float* p, size_t floats) {
    PRNN_CUDA_CHECK(cudaMemsetAsync(p, 0, floats * sizeof(float), kStream));
    ++issued_;
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) {
    PRNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, kStream));
    ++issued_;
  }
  void upload_tables(Arena& dev) {
    if (tables_.upload(dev)) ++issued_;
  }

  // dst [B, width] from pieces src[b*A + a] of widths given by `widths`.
  void gather(const std::vector<const float*>& src, const std::vector<std::int64_t>& widths,
              float* dst) {
    const int A = static_cast<int>(widths.size());
    const int B = as_int(src.size() / widths.size(), "batch");
    std::vector<std::int64_t> offs(widths.size() + 1, 0);
    for (size_t a = 0; a < widths.size(); ++a) offs[a + 1] = offs[a] + widths[a];
    const size_t t_offs = tables_.ints(offs), t_src = tables_.pointers(src);
    const std::int64_t width = offs.back();
    launch([this, B, A, width, t_offs, t_src, dst] {
      gpu::gather_pieces(B, A, width, tables_.at<const std::int64_t>(t_offs),
                         tables_.at<const float* const>(t_src), dst, kStream);
    });
  }

  // scatter_add over the contributions, grouped by destination in order of first appearance,
  // each destination's sources in the order given: one launch, or one per destination when
  // destinations partly overlap (views), in order of first appearance.
  void scatter(const std::vector<Contribution>& list) {
    if (list.empty()) return;
    // Group by destination without a map: the indices stably sorted by destination give the
    // groups (sources in list order); the groups then in order of first appearance.
    std::vector<size_t>& order = scatter_order_;
    order.resize(list.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return std::less<>{}(list[x].dst, list[y].dst);
    });
    std::vector<Run>& runs = scatter_runs_;
    runs.clear();
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || list[order[i]].dst != list[order[i - 1]].dst) runs.push_back({i, i});
      PRNN_ASSERT(list[order[runs.back().begin]].size == list[order[i]].size);  // one node, one size
      runs.back().end = i + 1;
    }
    // Sorted by address, so adjacent runs decide disjointness.
    bool disjoint_runs = true;
    for (size_t r = 1; r < runs.size(); ++r) {
      const Contribution& prev = list[order[runs[r - 1].begin]];
      if (std::less<>{}(list[order[runs[r].begin]].dst, prev.dst + prev.size)) disjoint_runs = false;
    }
    std::sort(runs.begin(), runs.end(),
              [&](const Run& x, const Run& y) { return order[x.begin] < order[y.begin]; });
    if (disjoint_runs) {
      scatter_groups(list, runs);
      return;
    }
    for (const Run& r : runs) scatter_groups(list, {r});
  }

  // scatter_add launches over groups of contributions: run r is order[r.begin .. r.end).
  struct Run {
    size_t begin, end;
  };
  void scatter_groups(const std::vector<Contribution>& list, const std::vector<Run>& runs) {
    const std::vector<size_t>& order = scatter_order_;
    std::vector<float*> dst;
    std::vector<std::int64_t> size, first{0};
    std::vector<const float*> src;
    std::vector<std::uint8_t*> flag;
    bool any_flag = false;
    for (const Run& r : runs) {
      const Contribution& head = list[order[r.begin]];
      dst.push_back(head.dst);
      size.push_back(head.size);
      flag.push_back(head.flag);
      any_flag = any_flag || head.flag != nullptr;
      for (size_t k = r.begin; k < r.end; ++k) src.push_back(list[order[k]].src);
      first.push_back(static_cast<std::int64_t>(src.size()));
    }
    const int D = as_int(dst.size(), "scatter destinations");
    const std::int64_t max_size = *std::max_element(size.begin(), size.end());
    const size_t t_dst = tables_.pointers(dst), t_size = tables_.ints(size),
                 t_first = tables_.ints(first), t_src = tables_.pointers(src),
                 t_flag = any_flag ? tables_.pointers(flag) : 0;
    launch([this, D, max_size, t_dst, t_size, t_first, t_src, t_flag, any_flag] {
      gpu::scatter_add(D, max_size, tables_.at<float* const>(t_dst),
                       tables_.at<const std::int64_t>(t_size),
                       tables_.at<const std::int64_t>(t_first),
                       tables_.at<const float* const>(t_src),
                       any_flag ? tables_.at<std::uint8_t* const>(t_flag) : nullptr, kStream);
    });
  }

  // Where a backward kernel writes dL/d(argument a of member b) (table [B*A], b-major): added
  // into the arguments' gradients when no two of them share memory; else stored into scratch
  // pieces, and `pending` adds them in afterwards ((a, b) order) by scatter().
  struct Accumulate {
    size_t table = 0;
    gpu::GradWrite write = gpu::GradWrite::Add;
    std::vector<Contribution> pending;
  };
  Accumulate route(const std::vector<NodeId>& members) {
    const Node& first = g_->node(members.front());
    const size_t B = members.size(), A = first.args.size();
    std::vector<float*> dests(B * A);
    std::vector<Span> spans;
    for (size_t b = 0; b < B; ++b)
      for (size_t a = 0; a < A; ++a) {
        const NodeId arg = g_->node(members[b]).args[a];
        dests[b * A + a] = grad(arg);
        spans.push_back({grad(arg), numel(dim(arg))});
      }
    Accumulate r;
    if (disjoint(spans)) {
      r.table = tables_.pointers(dests);
      return r;
    }
    std::vector<float*> into(B * A);
    for (size_t a = 0; a < A; ++a) {
      const size_t size = numel(dim(first.args[a]));
      float* s = scratch(B * size);
      for (size_t b = 0; b < B; ++b) {
        into[b * A + a] = s + b * size;
        r.pending.push_back(
            {dests[b * A + a], static_cast<std::int64_t>(size), s + b * size, nullptr});
      }
    }
    r.table = tables_.pointers(into);
    r.write = gpu::GradWrite::Store;
    return r;
  }

  // ---- products ------------------------------------------------------------------------------
  // Up to kSmallProductColumns columns one fused kernel per direction (ProductShape::small);
  // else cuBLAS, row-major buffers seen as column-major transposes: a member's W [m, k] row-major
  // is the column-major k×m matrix Wᵀ (ld k); with n == 1 the packed x [B, k] is the column-major
  // k×B matrix X (ld k) and y [B, m] is Y (m×B, ld m).

  // The members' x_i (argument position a + 1 for the weight at a), member-major [B*P].
  std::vector<const float*> product_inputs(const std::vector<NodeId>& members,
                                           const ProductShape& ps) const {
    std::vector<const float*> xs;
    for (NodeId id : members)
      for (int i = 0; i < ps.P; ++i)
        xs.push_back(value(g_->node(id).args[ps.first_weight + 2 * idx(i) + 1]));
    return xs;
  }

  // For cuBLAS: each weight's x's as one [B, k_i·n] array, the members' slots when contiguous,
  // else a scratch copy recorded in `copies` (dst, src, size) for one copy_pieces launch.
  struct Copies {
    std::vector<float*> dst;
    std::vector<const float*> src;
    std::vector<std::int64_t> size;
    void add(float* d, const float* s, size_t n) {
      dst.push_back(d);
      src.push_back(s);
      size.push_back(static_cast<std::int64_t>(n));
    }
  };
  std::vector<const float*> packed_inputs(const std::vector<NodeId>& members,
                                          const ProductShape& ps, Copies& copies) {
    std::vector<const float*> packed;
    const std::vector<const float*> xs = product_inputs(members, ps);
    const size_t B = members.size(), P = idx(ps.P);
    for (size_t i = 0; i < P; ++i) {
      const size_t size = idx(ps.k[i] * ps.n);
      std::vector<const float*> mine;
      for (size_t b = 0; b < B; ++b) mine.push_back(xs[b * P + i]);
      if (contiguous(mine, size)) {
        packed.push_back(mine.front());
        continue;
      }
      float* dst = scratch(B * size);
      for (size_t b = 0; b < B; ++b) copies.add(dst + b * size, mine[b], size);
      packed.push_back(dst);
    }
    return packed;
  }
  void copy(const Copies& c) {
    if (c.dst.empty()) return;
    const int D = as_int(c.dst.size(), "copies");
    const std::int64_t max_size = *std::max_element(c.size.begin(), c.size.end());
    const size_t t_dst = tables_.pointers(c.dst), t_src = tables_.pointers(c.src),
                 t_size = tables_.ints(c.size);
    launch([this, D, max_size, t_dst, t_src, t_size] {
      gpu::copy_pieces(D, max_size, tables_.at<float* const>(t_dst),
                       tables_.at<const std::int64_t>(t_size),
                       tables_.at<const float* const>(t_src), kStream);
    });
  }

  void product_forward(const std::vector<NodeId>& members, float* y) {
    const Node& f = g_->node(members.front());
    const ProductShape ps = product_shape(*g_, members);
    const size_t B = members.size(), out = numel(f.dim);
    std::vector<const float*> weights, bias;
    for (int i = 0; i < ps.P; ++i) weights.push_back(value(f.args[ps.first_weight + 2 * idx(i)]));
    if (ps.affine)
      for (NodeId id : members) bias.push_back(value(g_->node(id).args[0]));
    if (ps.small()) {
      gpu::SmallProductForward p;
      p.B = ps.B;
      p.P = ps.P;
      p.m = ps.m;
      p.n = ps.n;
      p.y = y;
      const size_t t_w = tables_.pointers(weights), t_k = tables_.ints(ps.k),
                   t_x = tables_.pointers(product_inputs(members, ps)),
                   t_b = ps.affine ? tables_.pointers(bias) : 0;
      const bool affine = ps.affine;
      launch([this, p, t_w, t_k, t_x, t_b, affine]() mutable {
        p.w = tables_.at<const float* const>(t_w);
        p.k = tables_.at<const std::int64_t>(t_k);
        p.x = tables_.at<const float* const>(t_x);
        p.bias = affine ? tables_.at<const float* const>(t_b) : nullptr;
        gpu::small_product_forward(p, kStream);
      });
      return;
    }
    // cuBLAS: the biases into y and the x's packing in one copy, then one GEMM per weight.
    Copies copies;
    for (size_t b = 0; b < bias.size(); ++b) copies.add(y + b * out, bias[b], out);
    const std::vector<const float*> X = packed_inputs(members, ps, copies);
    copy(copies);
    const int m = as_int(idx(ps.m), "rows"), n = as_int(idx(ps.n), "cols"),
              batch = as_int(B, "batch");
    for (int i = 0; i < ps.P; ++i) {
      const int k = as_int(idx(ps.k[idx(i)]), "cols");
      const float* W = weights[idx(i)];
      const float* Xi = X[idx(i)];
      const float beta = (ps.affine || i > 0) ? 1.0f : 0.0f;
      launch_blas([this, m, k, n, batch, W, Xi, y, beta] {
        const float one = 1.0f;
        if (n == 1) {
          // Y (m×B) = W · X
          PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, m, batch, k, &one, W, k,
                                        Xi, k, &beta, y, m));
        } else {
          // per member: yᵀ (n×m) = xᵀ (n×k) · Wᵀ (k×m)
          PRNN_CUBLAS_CHECK(cublasSgemmStridedBatched(
              blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, Xi, n,
              static_cast<long long>(k) * n, W, k, 0, &beta, y, n, static_cast<long long>(m) * n,
              batch));
        }
      });
    }
  }

  void product_backward(const std::vector<NodeId>& members, const float* dy) {
    const Node& f = g_->node(members.front());
    const ProductShape ps = product_shape(*g_, members);
    const size_t B = members.size(), P = idx(ps.P), out = numel(f.dim);
    std::vector<const float*> weights;
    std::vector<float*> dweights;
    std::vector<Span> dw_spans;
    for (size_t i = 0; i < P; ++i) {
      const NodeId w = f.args[ps.first_weight + 2 * i];
      weights.push_back(value(w));
      dweights.push_back(grad(w));
      dw_spans.push_back({grad(w), numel(dim(w))});
    }
    std::vector<float*> dbias;
    std::vector<Span> bias_spans;
    if (ps.affine)
      for (NodeId id : members) {
        dbias.push_back(grad(g_->node(id).args[0]));
        bias_spans.push_back({dbias.back(), out});
      }
    // dx destinations, member-major [B*P]
    std::vector<float*> dx;
    std::vector<Span> dx_spans;
    for (NodeId id : members)
      for (size_t i = 0; i < P; ++i) {
        const NodeId x = g_->node(id).args[ps.first_weight + 2 * i + 1];
        dx.push_back(grad(x));
        dx_spans.push_back({grad(x), numel(dim(x))});
      }
    const auto joined = [](std::vector<Span> a, const std::vector<Span>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    std::vector<Contribution> list;  // added after the products: biases, then dx's in (i, b) order
    if (ps.small() && disjoint(dw_spans)) {
      // One launch: dW, dx (added in place when disjoint from each other and every dW, else
      // stored to scratch and scattered) and, when its destinations allow, the biases.
      gpu::SmallProductBackward p;
      p.B = ps.B;
      p.P = ps.P;
      p.m = ps.m;
      p.n = ps.n;
      p.dy = dy;
      const bool dx_direct = disjoint(joined(dx_spans, dw_spans));
      std::vector<float*> dx_into = dx;
      if (!dx_direct) {
        p.dx_write = gpu::GradWrite::Store;
        for (size_t i = 0; i < P; ++i) {
          const size_t size = idx(ps.k[i] * ps.n);
          float* s = scratch(B * size);
          for (size_t b = 0; b < B; ++b) dx_into[b * P + i] = s + b * size;
        }
      }
      bool bias_in_kernel = false;
      if (ps.affine) {
        const bool shared = std::all_of(dbias.begin(), dbias.end(),
                                        [&](float* d) { return d == dbias.front(); });
        std::vector<Span> others = dw_spans;
        if (dx_direct) others = joined(others, dx_spans);
        if (shared && disjoint(joined(others, {bias_spans.front()}))) {
          bias_in_kernel = true;
          p.bias_shared = true;
        } else if (disjoint(joined(others, bias_spans))) {
          bias_in_kernel = true;
        }
        if (!bias_in_kernel)
          for (size_t b = 0; b < B; ++b)
            list.push_back({dbias[b], static_cast<std::int64_t>(out), dy + b * out, nullptr});
      }
      if (!dx_direct)
        for (size_t i = 0; i < P; ++i)
          for (size_t b = 0; b < B; ++b)
            list.push_back({dx[b * P + i], ps.k[i] * ps.n, dx_into[b * P + i], nullptr});
      const std::int64_t workspace =
          gpu::small_product_backward_workspace(ps.k.data(), ps.P, ps.m, ps.columns());
      if (workspace > 0) {  // more than one row chunk: partial sums and a ticket per tile
        p.partial = scratch(idx(workspace));
        tickets_needed_ = std::max(
            tickets_needed_, idx(gpu::small_product_backward_tiles(ps.k.data(), ps.P)));
      }
      const size_t t_w = tables_.pointers(weights), t_dw = tables_.pointers(dweights),
                   t_k = tables_.ints(ps.k), t_x = tables_.pointers(product_inputs(members, ps)),
                   t_dx = tables_.pointers(dx_into),
                   t_db = bias_in_kernel ? tables_.pointers(dbias) : 0;
      launch([this, p, k = ps.k, t_w, t_dw, t_k, t_x, t_dx, t_db, bias_in_kernel]() mutable {
        p.w = tables_.at<const float* const>(t_w);
        p.dw = tables_.at<float* const>(t_dw);
        p.k = tables_.at<const std::int64_t>(t_k);
        p.x = tables_.at<const float* const>(t_x);
        p.dx = tables_.at<float* const>(t_dx);
        p.dbias = bias_in_kernel ? tables_.at<float* const>(t_db) : nullptr;
        p.tickets = tickets_.data_as<unsigned>();
        gpu::small_product_backward(p, k.data(), kStream);
      });
      scatter(list);
      return;
    }
    // cuBLAS: the x's packing in one copy; per weight dW += X·dYᵀ (over the members in order)
    // and dX = Wᵀ·dY into scratch; then one scatter of the biases and the dX's.
    if (ps.affine)
      for (size_t b = 0; b < B; ++b)
        list.push_back({dbias[b], static_cast<std::int64_t>(out), dy + b * out, nullptr});
    Copies copies;
    const std::vector<const float*> X = packed_inputs(members, ps, copies);
    copy(copies);
    const int m = as_int(idx(ps.m), "rows"), n = as_int(idx(ps.n), "cols"),
              batch = as_int(B, "batch");
    for (size_t i = 0; i < P; ++i) {
      const int k = as_int(idx(ps.k[i]), "cols");
      const float* W = weights[i];
      float* dW = dweights[i];
      const float* Xi = X[i];
      const size_t xsize = idx(ps.k[i] * ps.n);
      float* dX = scratch(B * xsize);
      launch_blas([this, m, k, n, batch, W, dW, Xi, dX, dy] {
        const float one = 1.0f, zero = 0.0f;
        if (n == 1) {
          // dWᵀ (k×m) += X (k×B) · dYᵀ;  dX (k×B) = Wᵀ (k×m) · dY (m×B)
          PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_N, CUBLAS_OP_T, k, m, batch, &one, Xi,
                                        k, dy, m, &one, dW, k));
          PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_N, CUBLAS_OP_N, k, batch, m, &one, W, k,
                                        dy, m, &zero, dX, k));
        } else {
          // per member, in member order: dWᵀ (k×m) += x (k×n) · dyᵀ (n×m)
          const size_t xs = static_cast<size_t>(k) * n, ys = static_cast<size_t>(m) * n;
          for (int b = 0; b < batch; ++b)
            PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, k, m, n, &one,
                                          Xi + b * xs, n, dy + b * ys, n, &one, dW, k));
          // per member: dxᵀ (n×k) = dyᵀ (n×m) · W (m×k)
          PRNN_CUBLAS_CHECK(cublasSgemmStridedBatched(
              blas(), CUBLAS_OP_N, CUBLAS_OP_T, n, k, m, &one, dy, n,
              static_cast<long long>(ys), W, k, 0, &zero, dX, n, static_cast<long long>(xs),
              batch));
        }
      });
      for (size_t b = 0; b < B; ++b)
        list.push_back({dx[b * P + i], static_cast<std::int64_t>(xsize), dX + b * xsize, nullptr});
    }
    scatter(list);
  }

  // ---- fused elementwise groups -------------------------------------------------------------

  // Where a group's program lies in the tables (gpu::FusedElementwise).
  struct FusedTables {
    size_t lane_first = 0, op = 0, arg_first = 0, src = 0, x = 0, y = 0, node = 0, rate = 0;
    size_t dy = 0, dx = 0;
    bool dropout = false, backward = false;
  };

  // Appends the program of `group` to the tables: per lane its nodes in order, per node its op
  // and operands (an argument in the group is in the same lane, earlier: its slot; else -1).
  // Written in place: room for every table first, then one pass over the lanes.
  FusedTables fused_tables(const FusedGroup& group, bool backward) {
    const size_t L = group.lanes(), I = group.nodes.size();
    size_t O = 0;
    FusedTables t;
    t.backward = backward;
    for (NodeId id : group.nodes) {
      const Node& node = g_->node(id);
      O += node.args.size();
      t.dropout = t.dropout || node.op == Op::Dropout;
    }
    t.lane_first = tables_.append(L + 1);
    t.op = tables_.append(I);
    t.arg_first = tables_.append(I + 1);
    t.src = tables_.append(O);
    t.x = tables_.append(O);
    t.y = tables_.append(I);
    if (t.dropout) {
      t.node = tables_.append(I);
      t.rate = tables_.append(I);
    }
    if (backward) {
      t.dy = tables_.append(I);
      t.dx = tables_.append(O);
    }
    std::uint64_t* const lane_first = tables_.words(t.lane_first);
    std::uint64_t* const ops = tables_.words(t.op);
    std::uint64_t* const arg_first = tables_.words(t.arg_first);
    std::uint64_t* const src = tables_.words(t.src);
    std::uint64_t* const xs = tables_.words(t.x);
    std::uint64_t* const ys = tables_.words(t.y);
    std::uint64_t* const ids = t.dropout ? tables_.words(t.node) : nullptr;
    std::uint64_t* const rates = t.dropout ? tables_.words(t.rate) : nullptr;
    std::uint64_t* const dys = backward ? tables_.words(t.dy) : nullptr;
    std::uint64_t* const dxs = backward ? tables_.words(t.dx) : nullptr;
    size_t o = 0;
    arg_first[0] = 0;
    for (size_t l = 0; l <= L; ++l) lane_first[l] = Tables::word(std::int64_t{group.lane_first[l]});
    for (size_t l = 0; l < L; ++l) {
      const size_t k0 = idx(group.lane_first[l]), k1 = idx(group.lane_first[l + 1]);
      PRNN_ASSERT(k1 - k0 <= idx(gpu::kFusedLaneSlots));
      for (size_t k = k0; k < k1; ++k) {
        lane_of_[idx(group.nodes[k])] = static_cast<int>(l);
        lane_slot_[idx(group.nodes[k])] = static_cast<int>(k - k0);
      }
      for (size_t k = k0; k < k1; ++k) {
        const NodeId id = group.nodes[k];
        const Node& node = g_->node(id);
        ops[k] = Tables::word(static_cast<std::int64_t>(fused_op_of(node.op)));
        for (NodeId a : node.args) {
          const int ab = plan.batch_of[idx(a)];
          const bool inside = ab >= group.begin && ab < group.end;
          PRNN_ASSERT(!inside || (lane_of_[idx(a)] == static_cast<int>(l) &&
                                  idx(lane_slot_[idx(a)]) < k - k0));
          src[o] = Tables::word(std::int64_t{inside ? lane_slot_[idx(a)] : -1});
          xs[o] = Tables::word(value(a));
          if (backward) dxs[o] = Tables::word(grad(a));
          ++o;
        }
        arg_first[k + 1] = Tables::word(static_cast<std::int64_t>(o));
        ys[k] = Tables::word(values_.floats() + offset_[idx(id)]);
        if (backward) dys[k] = Tables::word(grad(id));
        if (t.dropout) {
          ids[k] = Tables::word(static_cast<std::int64_t>(id));
          rates[k] = Tables::word(node.p);
        }
      }
    }
    PRNN_ASSERT(o == O);
    return t;
  }

  gpu::FusedElementwise fused_params(const FusedGroup& group) const {
    gpu::FusedElementwise p;
    p.L = as_int(group.lanes(), "lanes");
    p.n = group.size;
    p.dropout = dropout_args();
    return p;
  }

  // The table pointers of p (valid once the tables are uploaded: call inside a launch).
  void bind(gpu::FusedElementwise& p, const FusedTables& t) const {
    p.lane_first = tables_.at<const std::int64_t>(t.lane_first);
    p.op = tables_.at<const std::int64_t>(t.op);
    p.arg_first = tables_.at<const std::int64_t>(t.arg_first);
    p.src = tables_.at<const std::int64_t>(t.src);
    p.x = tables_.at<const float* const>(t.x);
    p.y = tables_.at<float* const>(t.y);
    p.node = t.dropout ? tables_.at<const std::int64_t>(t.node) : nullptr;
    p.rate = t.dropout ? tables_.at<const double>(t.rate) : nullptr;
    p.dy = t.backward ? tables_.at<float* const>(t.dy) : nullptr;
    p.dx = t.backward ? tables_.at<float* const>(t.dx) : nullptr;
  }

  void build_forward_group(const FusedGroup& group) {
    const FusedTables t = fused_tables(group, false);
    launch([this, p = fused_params(group), t]() mutable {
      bind(p, t);
      gpu::fused_elementwise_forward(p, kStream);
    });
  }

  // Whether one thread owns every gradient element it adds to: no node's gradient is touched by
  // two lanes (a lane touching one node twice is one thread). Node ids decide it in one pass: the
  // gradients touched are those of the group's elementwise nodes (own slots) and of their
  // arguments, each an own slot or a PickRange view, i.e. a range of an argument whose users are
  // all PickRanges of disjoint ranges (layout), which no elementwise node touches itself; so the
  // gradients of two distinct touched nodes never share memory. (GpuFusion's tests run groups
  // on both sides of this decision against the unfused executor.)
  bool fused_destinations_disjoint(const FusedGroup& group) {
    ++touch_epoch_;
    bool disjoint_lanes = true;
    for (size_t l = 0; l < group.lanes() && disjoint_lanes; ++l) {
      const auto touch = [&](NodeId id) {
        Touch& t = touched_[idx(id)];
        if (t.epoch != touch_epoch_) t = Touch{touch_epoch_, static_cast<int>(l)};
        if (t.lane != static_cast<int>(l)) disjoint_lanes = false;
      };
      for (int k = group.lane_first[l]; k < group.lane_first[l + 1]; ++k) {
        const NodeId id = group.nodes[idx(k)];
        touch(id);
        for (NodeId a : g_->node(id).args) touch(a);
      }
    }
    return disjoint_lanes;
  }

  void build_backward_group(const FusedGroup& group) {
    if (std::none_of(group.nodes.begin(), group.nodes.end(),
                     [&](NodeId id) { return needed_[idx(id)]; }))
      return;
    if (!fused_destinations_disjoint(group)) {  // unfused, batch by batch
      for (int b = group.end; b-- > group.begin;) build_backward(plan.batches[idx(b)]);
      return;
    }
    const FusedTables t = fused_tables(group, true);
    launch([this, p = fused_params(group), t]() mutable {
      bind(p, t);
      gpu::fused_elementwise_backward(p, kStream);
    });
  }

  // ---- forward / backward of one batch ---------------------------------------------------------

  std::vector<const float*> argument_values(const std::vector<NodeId>& members) const {
    std::vector<const float*> xs;
    for (NodeId id : members)
      for (NodeId a : g_->node(id).args) xs.push_back(value(a));
    return xs;
  }
  // Dropout's per-member tables: node ids (the mask's hash input) and rates. The rate is not in
  // the signature, so one batch may mix rates; nothing per node is taken from the first member.
  struct DropoutTables {
    size_t ids = 0, rates = 0;
  };
  DropoutTables dropout_tables(const std::vector<NodeId>& members) {
    std::vector<std::int64_t> ids;
    std::vector<double> rates;
    for (NodeId id : members) {
      ids.push_back(id);
      rates.push_back(g_->node(id).p);
    }
    return {tables_.ints(ids), tables_.reals(rates)};
  }
  gpu::DropoutArgs dropout_args() const { return {g_->seed(), g_->training()}; }

  void build_forward(const Batch& batch) {
    scratch_used_ = 0;
    const std::vector<NodeId>& members = batch.nodes;
    const Node& f = g_->node(members.front());
    const int B = as_int(members.size(), "batch");
    const auto out = static_cast<std::int64_t>(numel(f.dim));
    float* y = values_.floats() + offset_[idx(members.front())];
    switch (f.op) {
      case Op::Input:
      case Op::Parameter:
        return;
      case Op::Lookup: {
        // The signature names the table by its index only: each member reads its own Model's.
        std::vector<const float*> rows;
        for (NodeId id : members) {
          const Node& node = g_->node(id);
          const DeviceMirror::Table& t =
              device_mirror(*node.lookup.model()).tables[idx(node.lookup.index())];
          rows.push_back(t.value.data_as<float>() + idx(node.index) * t.row);
        }
        gather(rows, {out}, y);
        return;
      }
      case Op::PickRange:  // a view (layout): nothing to compute
        return;
      case Op::Concatenate: {
        std::vector<std::int64_t> widths;
        for (NodeId a : f.args) widths.push_back(static_cast<std::int64_t>(numel(dim(a))));
        gather(argument_values(members), widths, y);
        return;
      }
      case Op::MatMul:
      case Op::AffineTransform:
        product_forward(members, y);
        return;
      case Op::Add:
      case Op::Sub:
      case Op::CMult:
      case Op::Tanh:
      case Op::Logistic:
      case Op::Relu:
      case Op::Sum: {
        const size_t t_x = tables_.pointers(argument_values(members));
        const gpu::Pointwise op = pointwise_of(f.op);
        const int A = static_cast<int>(f.args.size());
        launch([this, op, B, A, out, t_x, y] {
          gpu::pointwise_forward(op, B, A, out, tables_.at<const float* const>(t_x), y, kStream);
        });
        return;
      }
      case Op::LogSoftmax: {
        const size_t t_x = tables_.pointers(argument_values(members));
        launch([this, B, out, t_x, y] {
          gpu::log_softmax_forward(B, out, tables_.at<const float* const>(t_x), y, kStream);
        });
        return;
      }
      case Op::PickNegLogSoftmax: {
        std::vector<std::int64_t> labels;
        for (NodeId id : members) labels.push_back(g_->node(id).index);
        const size_t t_x = tables_.pointers(argument_values(members)), t_l = tables_.ints(labels);
        const auto n = static_cast<std::int64_t>(numel(dim(f.args[0])));
        launch([this, B, n, t_x, t_l, y] {
          gpu::pick_neg_log_softmax_forward(B, n, tables_.at<const float* const>(t_x),
                                            tables_.at<const std::int64_t>(t_l), y, kStream);
        });
        return;
      }
      case Op::Dropout: {
        const size_t t_x = tables_.pointers(argument_values(members));
        const DropoutTables t = dropout_tables(members);
        const gpu::DropoutArgs d = dropout_args();
        launch([this, d, B, out, t_x, t, y] {
          gpu::dropout_forward(d, B, out, tables_.at<const std::int64_t>(t.ids),
                               tables_.at<const double>(t.rates),
                               tables_.at<const float* const>(t_x), y, kStream);
        });
        return;
      }
    }
    PRNN_ASSERT(false);
  }

  void build_backward(const Batch& batch) {
    scratch_used_ = 0;
    std::vector<NodeId> live;
    for (NodeId id : batch.nodes)
      if (needed_[idx(id)]) live.push_back(id);
    if (live.empty()) return;
    // All members take part (a member the loss does not depend on has dy = 0 and adds exactly
    // zero), except leaves, whose backward marks rows touched: those run on `live` only.
    const std::vector<NodeId>& members = batch.nodes;
    const Node& f = g_->node(members.front());
    const int B = as_int(members.size(), "batch");
    const auto out = static_cast<std::int64_t>(numel(f.dim));
    const float* y = value(members.front());
    const float* dy = grad(members.front());
    switch (f.op) {
      case Op::Input:
        return;
      case Op::Parameter: {
        Model& model = *f.param.model();
        DeviceMirror& mirror = device_mirror(model);
        float* dst = mirror.params[idx(f.param.index())].grad.data_as<float>();
        model.storage().host_stale = true;
        scatter({{dst, out, dy, nullptr}});
        return;
      }
      case Op::Lookup: {
        std::vector<Contribution> list;
        for (NodeId id : live) {
          const Node& node = g_->node(id);
          Model& model = *node.lookup.model();
          DeviceMirror::Table& t = device_mirror(model).tables[idx(node.lookup.index())];
          model.storage().host_stale = true;
          const size_t row = idx(node.index);
          list.push_back({t.grad.data_as<float>() + row * t.row, out, grad(id),
                          t.touched.data_as<std::uint8_t>() + row});
        }
        scatter(list);
        return;
      }
      case Op::PickRange: {  // views: their users accumulated into the argument's gradient
        std::vector<Contribution> list;
        for (NodeId id : members) {
          if (grad_view_[idx(id)]) continue;
          const Node& node = g_->node(id);
          list.push_back({grad(node.args[0]) + idx(node.index * node.dim.cols), out, grad(id),
                          nullptr});
        }
        scatter(list);
        return;
      }
      case Op::Concatenate: {
        std::vector<Contribution> list;
        size_t off = 0;
        for (size_t a = 0; a < f.args.size(); ++a) {
          const size_t w = numel(dim(f.args[a]));
          for (size_t b = 0; b < members.size(); ++b)
            list.push_back({grad(g_->node(members[b]).args[a]), static_cast<std::int64_t>(w),
                            dy + b * idx(out) + off, nullptr});
          off += w;
        }
        scatter(list);
        return;
      }
      case Op::MatMul:
      case Op::AffineTransform:
        product_backward(members, dy);
        return;
      case Op::Add:
      case Op::Sub:
      case Op::CMult:
      case Op::Tanh:
      case Op::Logistic:
      case Op::Relu:
      case Op::Sum: {
        const size_t t_x = tables_.pointers(argument_values(members));
        const Accumulate acc = route(members);
        const gpu::Pointwise op = pointwise_of(f.op);
        const int A = static_cast<int>(f.args.size());
        const size_t t_dx = acc.table;
        const gpu::GradWrite write = acc.write;
        launch([this, op, write, B, A, out, t_x, y, dy, t_dx] {
          gpu::pointwise_backward(op, write, B, A, out, tables_.at<const float* const>(t_x), y, dy,
                                  tables_.at<float* const>(t_dx), kStream);
        });
        scatter(acc.pending);
        return;
      }
      case Op::LogSoftmax: {
        const Accumulate acc = route(members);
        const size_t t_dx = acc.table;
        const gpu::GradWrite write = acc.write;
        launch([this, write, B, out, y, dy, t_dx] {
          gpu::log_softmax_backward(write, B, out, y, dy, tables_.at<float* const>(t_dx), kStream);
        });
        scatter(acc.pending);
        return;
      }
      case Op::PickNegLogSoftmax: {
        std::vector<std::int64_t> labels;
        for (NodeId id : members) labels.push_back(g_->node(id).index);
        const size_t t_x = tables_.pointers(argument_values(members)), t_l = tables_.ints(labels);
        const Accumulate acc = route(members);
        const size_t t_dx = acc.table;
        const auto n = static_cast<std::int64_t>(numel(dim(f.args[0])));
        const gpu::GradWrite write = acc.write;
        launch([this, write, B, n, t_x, t_l, dy, t_dx] {
          gpu::pick_neg_log_softmax_backward(write, B, n, tables_.at<const float* const>(t_x),
                                             tables_.at<const std::int64_t>(t_l), dy,
                                             tables_.at<float* const>(t_dx), kStream);
        });
        scatter(acc.pending);
        return;
      }
      case Op::Dropout: {
        const DropoutTables t = dropout_tables(members);
        const Accumulate acc = route(members);
        const size_t t_dx = acc.table;
        const gpu::DropoutArgs d = dropout_args();
        const gpu::GradWrite write = acc.write;
        launch([this, d, write, B, out, t, dy, t_dx] {
          gpu::dropout_backward(d, write, B, out, tables_.at<const std::int64_t>(t.ids),
                                tables_.at<const double>(t.rates), dy,
                                tables_.at<float* const>(t_dx), kStream);
        });
        scatter(acc.pending);
        return;
      }
    }
    PRNN_ASSERT(false);
  }

  const Graph* g_ = nullptr;
  size_t n_ = 0;
  std::vector<size_t> offset_, input_offset_;
  std::vector<const float*> value_;
  std::vector<float*> grad_;     // where dL/d(node) lives: its slot, or inside its argument's
  std::vector<bool> grad_view_;  // ... inside its argument's (an exclusive PickRange)
  std::vector<bool> needed_;
  std::vector<int> lane_of_, lane_slot_;  // per node of the group being built: lane, slot in it
  // Per node: the lane of the fused group being checked that touched its gradient (valid when
  // epoch is touch_epoch_, which every check advances).
  struct Touch {
    std::uint64_t epoch = 0;
    int lane = -1;
  };
  std::vector<Touch> touched_;
  // layout's scratch, kept across graphs: the PickRanges by argument, and whether an argument is
  // used by PickRanges of disjoint ranges only.
  struct Pick {
    NodeId arg;
    std::int64_t begin, end;
  };
  std::vector<Pick> picks_;
  std::vector<Pick> by_arg_;                    // picks_ grouped by argument
  std::vector<size_t> pick_first_, pick_cursor_;  // per argument: where its picks start
  std::vector<bool> exclusive_;
  std::vector<float> inputs_;  // forward's input values, staged for the one upload
  std::vector<size_t> scatter_order_;  // scatter's scratch: contributions by destination
  std::vector<Run> scatter_runs_;      // ... and its groups
  std::uint64_t touch_epoch_ = 0;
  size_t value_floats_ = 0, input_floats_ = 0, scratch_floats_ = 0, scratch_used_ = 0;
  float* input_base_ = nullptr;
  float* scratch_base_ = nullptr;
  Arena values_, grads_, fwd_tables_, bwd_tables_;
  DeviceBuffer tickets_;       // small product backward's per-tile tickets, zero between launches
  size_t tickets_needed_ = 0;  // ... as many as the current backward's largest launch takes
  Tables tables_;
  std::vector<std::function<void()>> launches_;
  size_t issued_ = 0;  // GPU operations issued by the current forward or backward
  CublasHandle cublas_{GemmMath::Fp32, kStream};  // PEDANTIC: fp32, no TF32
  EventTimer fwd_events_{kStream}, bwd_events_{kStream};
};

void require_gpu(const char* who) {
  if (device_count() == 0) throw Unsupported(who, "no GPU: " + no_device_reason());
}

}  // namespace

struct GpuExecutor::State {
  Runner run;
};
struct GpuAutobatchExecutor::State {
  Runner run;
  AutobatchStats stats;
};

namespace {

void check_forward(const char* who, Graph& g, Expr last) {
  PRNN_EXPECT(last.valid() && last.graph == &g,
              "{}: forward: the expression does not belong to this graph", who);
}

void check_backward(const char* who, const Runner& run, Graph& g, Expr loss) {
  PRNN_EXPECT(loss.valid() && loss.graph == &g, "{}: backward: the loss does not belong to this graph",
              who);
  PRNN_EXPECT(run.graph == &g && idx(loss.id) < run.computed,
              "{}: backward: node {} was not computed; call forward(g, loss) first", who, loss.id);
  PRNN_EXPECT(loss.dim() == Dim(1, 1), "{}: backward: the loss must be 1x1, got {}", who,
              to_string(loss.dim()));
}

std::vector<double> read_node(const char* who, const Runner& run, Expr e, bool gradient) {
  if (gradient)
    PRNN_EXPECT(run.has_gradients && e.valid() && e.graph == run.graph && idx(e.id) < run.computed,
                "{}: gradient: node {} has no gradient from the last backward", who, e.id);
  else
    PRNN_EXPECT(e.valid() && e.graph == run.graph && idx(e.id) < run.computed,
                "{}: value: node {} was not computed by the last forward", who, e.id);
  return run.read(e.id, gradient);
}

}  // namespace

// ---- GpuExecutor ---------------------------------------------------------------------------------

GpuExecutor::GpuExecutor() {
  require_gpu("GpuExecutor");
  state_ = std::make_unique<State>();
}
GpuExecutor::~GpuExecutor() = default;

void GpuExecutor::forward(Graph& g, Expr last) {
  check_forward("gpu executor", g, last);
  state_->run.forward(g, last.id, plan_per_node(g, last.id));
}
void GpuExecutor::backward(Graph& g, Expr loss) {
  check_backward("gpu executor", state_->run, g, loss);
  state_->run.backward(g, loss.id);
}
std::vector<double> GpuExecutor::value(Expr e) const {
  return read_node("gpu executor", state_->run, e, false);
}
std::vector<double> GpuExecutor::gradient(Expr e) const {
  return read_node("gpu executor", state_->run, e, true);
}
DeviceTimes GpuExecutor::device_times() const {
  return state_->run.device_times();
}

// ---- GpuAutobatchExecutor ------------------------------------------------------------------------

GpuAutobatchExecutor::GpuAutobatchExecutor(BatchStrategy strategy, Fusion fusion)
    : strategy_(strategy), fusion_(fusion) {
  require_gpu("GpuAutobatchExecutor");
  state_ = std::make_unique<State>();
}
GpuAutobatchExecutor::~GpuAutobatchExecutor() = default;

void GpuAutobatchExecutor::forward(Graph& g, Expr last) {
  check_forward("gpu autobatch executor", g, last);
  State& s = *state_;
  const auto t_plan = Clock::now();
  BatchPlan plan = plan_batches(g, last.id, strategy_, fusion_);
  AutobatchStats stats = plan_statistics(plan, seconds_since(t_plan));
  const auto t_run = Clock::now();
  s.run.forward(g, last.id, std::move(plan));
  stats.forward_seconds = seconds_since(t_run);
  s.stats = std::move(stats);
}
void GpuAutobatchExecutor::backward(Graph& g, Expr loss) {
  check_backward("gpu autobatch executor", state_->run, g, loss);
  const auto t0 = Clock::now();
  state_->run.backward(g, loss.id);
  state_->stats.backward_seconds = seconds_since(t0);
}
std::vector<double> GpuAutobatchExecutor::value(Expr e) const {
  return read_node("gpu autobatch executor", state_->run, e, false);
}
std::vector<double> GpuAutobatchExecutor::gradient(Expr e) const {
  return read_node("gpu autobatch executor", state_->run, e, true);
}
const AutobatchStats& GpuAutobatchExecutor::stats() const {
  return state_->stats;
}
DeviceTimes GpuAutobatchExecutor::device_times() const {
  return state_->run.device_times();
}

#else  // !PRNN_WITH_CUDA

namespace {
[[noreturn]] void no_cuda(const char* who) {
  throw Unsupported(who, "prnn was built without CUDA (PRNN_CUDA=OFF)");
}
}  // namespace

struct GpuExecutor::State {};
struct GpuAutobatchExecutor::State {
  AutobatchStats stats;
};

GpuExecutor::GpuExecutor() {
  no_cuda("GpuExecutor");
}
GpuExecutor::~GpuExecutor() = default;
void GpuExecutor::forward(Graph&, Expr) {
  no_cuda("GpuExecutor");
}
void GpuExecutor::backward(Graph&, Expr) {
  no_cuda("GpuExecutor");
}
std::vector<double> GpuExecutor::value(Expr) const {
  no_cuda("GpuExecutor");
}
std::vector<double> GpuExecutor::gradient(Expr) const {
  no_cuda("GpuExecutor");
}
DeviceTimes GpuExecutor::device_times() const {
  no_cuda("GpuExecutor");
}

GpuAutobatchExecutor::GpuAutobatchExecutor(BatchStrategy strategy, Fusion fusion)
    : strategy_(strategy), fusion_(fusion) {
  no_cuda("GpuAutobatchExecutor");
}
GpuAutobatchExecutor::~GpuAutobatchExecutor() = default;
void GpuAutobatchExecutor::forward(Graph&, Expr) {
  no_cuda("GpuAutobatchExecutor");
}
void GpuAutobatchExecutor::backward(Graph&, Expr) {
  no_cuda("GpuAutobatchExecutor");
}
std::vector<double> GpuAutobatchExecutor::value(Expr) const {
  no_cuda("GpuAutobatchExecutor");
}
std::vector<double> GpuAutobatchExecutor::gradient(Expr) const {
  no_cuda("GpuAutobatchExecutor");
}
const AutobatchStats& GpuAutobatchExecutor::stats() const {
  no_cuda("GpuAutobatchExecutor");
}
DeviceTimes GpuAutobatchExecutor::device_times() const {
  no_cuda("GpuAutobatchExecutor");
}

#endif  // PRNN_WITH_CUDA

}  // namespace prnn::graph
