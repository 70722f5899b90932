// GpuExecutor and GpuAutobatchExecutor (contracts in prnn/graph.h): one runner over a BatchPlan,
// the trivial one-node-per-batch plan for the per-node executor, the autobatching planner's
// (graph/autobatch.h) for the other, so both share every kernel and every layout rule.
//
// Layout (device, fp32, row-major as the host):
//   values arena  [node values | input values | scratch]: every node has a slot at offset[node],
//                 the members of a batch contiguous in slot order (member k at k*size), so a
//                 batch's output is one [B, size] array; Input nodes read the uploaded input
//                 region, Parameter nodes the Model's device copy (no copy), everything else
//                 its slot. Scratch is a per-batch bump region (stream order makes reuse safe).
//   grads arena   dL/d(node) for every node at the same offsets; zeroed by backward.
//   tables        the pointer / int64 / double tables of all launches of one forward or backward,
//                 built on the host while planning the launches, uploaded with ONE copy, then
//                 the launches are issued (host closures, in order, on the default stream).
// Forward per batch: Input/Parameter nothing; Lookup, PickRange, Concatenate one gather;
//   MatMul/AffineTransform the bias gathered into y, then per weight one cuBLAS GEMM over the
//   batch (n == 1: W·[x_1 .. x_B]; n > 1: strided-batched with the shared W), the x's packed into
//   scratch unless already contiguous; the others one kernel of graph/gpu_kernels.h.
// Backward, batches in reverse, only those with a member the loss depends on: kernels accumulate
//   into the arguments' gradients directly when no destination repeats within the launch, else
//   into zeroed scratch followed by a scatter_add grouped by destination (sources in (argument
//   position, member) order, the CPU autobatch executor's order); a shared W gets dW from one
//   GEMM over the batch (beta = 1); Parameter and Lookup batches scatter-add into the Model's
//   device gradients (lookups grouped by row, marking the touched rows). No float atomics.
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

#include "core/cuda_check.h"
#include "graph/gpu_kernels.h"
#endif

namespace prnn::graph {

#if PRNN_WITH_CUDA
namespace {

using std::size_t;
using Clock = std::chrono::steady_clock;

static_assert(kOpCount == 17, "a new op needs a GPU kernel family in gpu_executor.cpp");

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

class CublasHandle {
 public:
  CublasHandle() {
    PRNN_CUBLAS_CHECK(cublasCreate(&h_));
    PRNN_CUBLAS_CHECK(cublasSetMathMode(h_, CUBLAS_PEDANTIC_MATH));  // fp32, no TF32
    PRNN_CUBLAS_CHECK(cublasSetStream(h_, kStream));
  }
  ~CublasHandle() {
    if (h_ != nullptr) cublasDestroy(h_);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

class EventPair {
 public:
  EventPair() {
    PRNN_CUDA_CHECK(cudaEventCreate(&start_));
    PRNN_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventPair() {
    PRNN_CUDA_CHECK_NOTHROW(cudaEventDestroy(start_));
    PRNN_CUDA_CHECK_NOTHROW(cudaEventDestroy(stop_));
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start() {
    PRNN_CUDA_CHECK(cudaEventRecord(start_, kStream));
    recorded_ = false;
  }
  void stop() {
    PRNN_CUDA_CHECK(cudaEventRecord(stop_, kStream));
    recorded_ = true;
  }
  double seconds() const {
    if (!recorded_) return 0.0;
    PRNN_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    PRNN_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e-3 * static_cast<double>(ms);
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool recorded_ = false;
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

bool contiguous(const std::vector<const float*>& xs, size_t stride) {
  for (size_t b = 1; b < xs.size(); ++b)
    if (xs[b] != xs[0] + b * stride) return false;
  return true;
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
    graph = nullptr;
    has_gradients = false;
    plan = std::move(p);
    g_ = &g;
    layout(g, last);
    tables_.clear();
    launches_.clear();
    for (const Batch& batch : plan.batches) build_forward(batch);
    std::vector<float> inputs(input_floats_);
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g.nodes()[id];
      if (node.op != Op::Input) continue;
      const auto& v = g.input_values();
      for (size_t i = 0; i < numel(node.dim); ++i)
        inputs[input_offset_[id] + i] = static_cast<float>(v[node.input_offset + i]);
    }
    fwd_events_.start();
    issued_ = 0;
    if (!inputs.empty()) copy_to_device(input_base_, inputs.data(), inputs.size() * sizeof(float));
    upload_tables(fwd_tables_);
    for (const auto& launch : launches_) launch();
    fwd_events_.stop();
    times = DeviceTimes{};
    times.forward_launches = issued_;
    graph = &g;
    computed = n_;
  }

  void backward(const Graph& g, NodeId loss) {
    const size_t n = idx(loss) + 1;
    needed_.assign(n_, false);
    needed_[n - 1] = true;
    for (size_t id = n; id-- > 0;)
      if (needed_[id])
        for (NodeId a : g.nodes()[id].args) needed_[idx(a)] = true;
    tables_.clear();
    launches_.clear();
    for (size_t b = plan.batches.size(); b-- > 0;) build_backward(plan.batches[b]);

    bwd_events_.start();
    issued_ = 0;
    float* grads = grads_.floats();
    zero_async(grads, value_floats_);
    static const float kOne = 1.0f;
    copy_to_device(grads + offset_[idx(loss)], &kOne, sizeof(float));
    upload_tables(bwd_tables_);
    for (const auto& launch : launches_) launch();
    bwd_events_.stop();
    times.backward_launches = issued_;
    has_gradients = true;
  }

  std::vector<double> read(NodeId id, bool gradient) const {
    const size_t n = numel(g_->node(id).dim);
    std::vector<float> host(n);
    const float* src = gradient ? grads_.floats() + offset_[idx(id)] : value_[idx(id)];
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
      cursor = align_up(cursor);
      for (NodeId id : batch.nodes) {
        offset_[idx(id)] = cursor;
        cursor += numel(g.node(id).dim);
      }
      // Scratch bound of the batch: packed inputs and packed argument gradients, two per
      // non-shared argument position (products pack x and dX).
      const Node& first = g.node(batch.nodes.front());
      size_t need = 0;
      for (size_t a = 0; a < first.args.size(); ++a)
        if (!is_shared_argument(first.op, a))
          need += 2 * align_up(batch.nodes.size() * numel(g.node(first.args[a]).dim));
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

    value_.assign(n_, nullptr);
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g.nodes()[id];
      switch (node.op) {
        case Op::Input:
          value_[id] = input_base_ + input_offset_[id];
          break;
        case Op::Parameter: {
          DeviceMirror& m = device_mirror(*node.param.model());
          value_[id] = m.params[idx(node.param.index())].value.data_as<float>();
          break;
        }
        default:
          value_[id] = base + offset_[id];
      }
    }
  }

  const float* value(NodeId id) const { return value_[idx(id)]; }
  float* grad(NodeId id) const { return grads_.floats() + offset_[idx(id)]; }
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

  // The members' argument `a`, packed [B, size] (the slots themselves when already contiguous).
  const float* packed_argument(const std::vector<NodeId>& members, size_t a) {
    std::vector<const float*> xs;
    const NodeId first_arg = g_->node(members.front()).args[a];
    const size_t size = numel(dim(first_arg));
    for (NodeId id : members) xs.push_back(value(g_->node(id).args[a]));
    if (contiguous(xs, size)) return xs.front();
    float* dst = scratch(members.size() * size);
    gather(xs, {static_cast<std::int64_t>(size)}, dst);
    return dst;
  }

  // One scatter_add over the contributions, grouped by destination in order of first appearance,
  // each destination's sources in the order given.
  void scatter(const std::vector<Contribution>& list) {
    if (list.empty()) return;
    std::unordered_map<float*, size_t> group;
    std::vector<std::vector<size_t>> members;
    for (size_t i = 0; i < list.size(); ++i) {
      auto [it, fresh] = group.try_emplace(list[i].dst, members.size());
      if (fresh) members.emplace_back();
      std::vector<size_t>& m = members[it->second];
      PRNN_ASSERT(m.empty() || list[m.front()].size == list[i].size);  // one node, one size
      m.push_back(i);
    }
    std::vector<float*> dst;
    std::vector<std::int64_t> size, first{0};
    std::vector<const float*> src;
    std::vector<std::uint8_t*> flag;
    bool any_flag = false;
    for (const auto& m : members) {
      dst.push_back(list[m.front()].dst);
      size.push_back(list[m.front()].size);
      flag.push_back(list[m.front()].flag);
      any_flag = any_flag || list[m.front()].flag != nullptr;
      for (size_t i : m) src.push_back(list[i].src);
      first.push_back(static_cast<std::int64_t>(src.size()));
    }
    const int D = as_int(dst.size(), "scatter destinations");
    const size_t t_dst = tables_.pointers(dst), t_size = tables_.ints(size),
                 t_first = tables_.ints(first), t_src = tables_.pointers(src),
                 t_flag = any_flag ? tables_.pointers(flag) : 0;
    launch([this, D, t_dst, t_size, t_first, t_src, t_flag, any_flag] {
      gpu::scatter_add(D, tables_.at<float* const>(t_dst), tables_.at<const std::int64_t>(t_size),
                       tables_.at<const std::int64_t>(t_first),
                       tables_.at<const float* const>(t_src),
                       any_flag ? tables_.at<std::uint8_t* const>(t_flag) : nullptr, kStream);
    });
  }

  // Where a backward kernel accumulates dL/d(argument a of member b) (table [B*A], b-major):
  // the arguments' gradients when all differ; else zeroed scratch, scattered afterwards by
  // finish_accumulate().
  struct Accumulate {
    size_t table = 0;
    std::vector<Contribution> pending;  // (a, b) order
  };
  Accumulate route(const std::vector<NodeId>& members) {
    const Node& first = g_->node(members.front());
    const size_t B = members.size(), A = first.args.size();
    std::vector<float*> dests(B * A);
    for (size_t b = 0; b < B; ++b)
      for (size_t a = 0; a < A; ++a) dests[b * A + a] = grad(g_->node(members[b]).args[a]);
    std::vector<float*> sorted = dests;
    std::sort(sorted.begin(), sorted.end());
    Accumulate r;
    if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) {
      r.table = tables_.pointers(dests);
      return r;
    }
    std::vector<float*> into(B * A);
    for (size_t a = 0; a < A; ++a) {
      const size_t size = numel(dim(first.args[a]));
      float* s = scratch(B * size);
      launches_.emplace_back([this, s, B, size] { zero_async(s, B * size); });
      for (size_t b = 0; b < B; ++b) {
        into[b * A + a] = s + b * size;
        r.pending.push_back(
            {dests[b * A + a], static_cast<std::int64_t>(size), s + b * size, nullptr});
      }
    }
    r.table = tables_.pointers(into);
    return r;
  }

  // ---- products (cuBLAS; row-major buffers seen as column-major transposes) ------------------
  // A member's W [m, k] row-major is the column-major k×m matrix Wᵀ (ld k); with n == 1 the packed
  // x [B, k] is the column-major k×B matrix X (ld k) and y [B, m] is Y (m×B, ld m).

  void product_forward(const std::vector<NodeId>& members, float* y) {
    const Node& f = g_->node(members.front());
    const bool affine = f.op == Op::AffineTransform;
    const size_t B = members.size();
    if (affine) {
      std::vector<const float*> bias;
      for (NodeId id : members) bias.push_back(value(g_->node(id).args[0]));
      gather(bias, {static_cast<std::int64_t>(numel(f.dim))}, y);
    }
    for (size_t a = affine ? 1 : 0; a < f.args.size(); a += 2) {
      const Dim wd = dim(f.args[a]), xd = dim(f.args[a + 1]);
      const int m = as_int(idx(wd.rows), "rows"), k = as_int(idx(wd.cols), "cols"),
                n = as_int(idx(xd.cols), "cols"), batch = as_int(B, "batch");
      const float* W = value(f.args[a]);
      const float* X = packed_argument(members, a + 1);
      const float beta = (affine || a > 0) ? 1.0f : 0.0f;
      launch_blas([this, m, k, n, batch, W, X, y, beta] {
        const float one = 1.0f;
        if (n == 1) {
          // Y (m×B) = W · X
          PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, m, batch, k, &one,
                                        W, k, X, k, &beta, y, m));
        } else {
          // per member: yᵀ (n×m) = xᵀ (n×k) · Wᵀ (k×m)
          PRNN_CUBLAS_CHECK(cublasSgemmStridedBatched(
              blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, X, n,
              static_cast<long long>(k) * n, W, k, 0, &beta, y, n, static_cast<long long>(m) * n,
              batch));
        }
      });
    }
  }

  void product_backward(const std::vector<NodeId>& members, const float* dy) {
    const Node& f = g_->node(members.front());
    const bool affine = f.op == Op::AffineTransform;
    const size_t B = members.size(), out = numel(f.dim);
    std::vector<Contribution> list;
    if (affine)
      for (size_t b = 0; b < B; ++b)
        list.push_back({grad(g_->node(members[b]).args[0]), static_cast<std::int64_t>(out),
                        dy + b * out, nullptr});
    for (size_t a = affine ? 1 : 0; a < f.args.size(); a += 2) {
      const Dim wd = dim(f.args[a]), xd = dim(f.args[a + 1]);
      const int m = as_int(idx(wd.rows), "rows"), k = as_int(idx(wd.cols), "cols"),
                n = as_int(idx(xd.cols), "cols"), batch = as_int(B, "batch");
      const float* W = value(f.args[a]);
      float* dW = grad(f.args[a]);
      const float* X = packed_argument(members, a + 1);
      const size_t xsize = numel(xd);
      float* dX = scratch(B * xsize);
      launch_blas([this, m, k, n, batch, W, dW, X, dX, dy] {
        const float one = 1.0f, zero = 0.0f;
        if (n == 1) {
          // dWᵀ (k×m) += X (k×B) · dYᵀ;  dX (k×B) = Wᵀ (k×m) · dY (m×B)
          PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_N, CUBLAS_OP_T, k, m, batch, &one,
                                        X, k, dy, m, &one, dW, k));
          PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_N, CUBLAS_OP_N, k, batch, m, &one,
                                        W, k, dy, m, &zero, dX, k));
        } else {
          // per member, in member order: dWᵀ (k×m) += x (k×n) · dyᵀ (n×m)
          const size_t xs = static_cast<size_t>(k) * n, ys = static_cast<size_t>(m) * n;
          for (int b = 0; b < batch; ++b)
            PRNN_CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, k, m, n, &one,
                                          X + b * xs, n, dy + b * ys, n, &one, dW, k));
          // per member: dxᵀ (n×k) = dyᵀ (n×m) · W (m×k)
          PRNN_CUBLAS_CHECK(cublasSgemmStridedBatched(
              blas(), CUBLAS_OP_N, CUBLAS_OP_T, n, k, m, &one, dy, n,
              static_cast<long long>(ys), W, k, 0, &zero, dX, n, static_cast<long long>(xs),
              batch));
        }
      });
      for (size_t b = 0; b < B; ++b)
        list.push_back({grad(g_->node(members[b]).args[a + 1]), static_cast<std::int64_t>(xsize),
                        dX + b * xsize, nullptr});
    }
    scatter(list);
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
      case Op::PickRange: {
        std::vector<const float*> src;
        for (NodeId id : members) {
          const Node& node = g_->node(id);
          src.push_back(value(node.args[0]) + idx(node.index * node.dim.cols));
        }
        gather(src, {out}, y);
        return;
      }
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
      case Op::PickRange: {
        std::vector<Contribution> list;
        for (size_t b = 0; b < members.size(); ++b) {
          const Node& node = g_->node(members[b]);
          list.push_back(
              {grad(node.args[0]) + idx(node.index * node.dim.cols), out, dy + b * idx(out), nullptr});
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
        launch([this, op, B, A, out, t_x, y, dy, t_dx] {
          gpu::pointwise_backward(op, B, A, out, tables_.at<const float* const>(t_x), y, dy,
                                  tables_.at<float* const>(t_dx), kStream);
        });
        scatter(acc.pending);
        return;
      }
      case Op::LogSoftmax: {
        const Accumulate acc = route(members);
        const size_t t_dx = acc.table;
        launch([this, B, out, y, dy, t_dx] {
          gpu::log_softmax_backward(B, out, y, dy, tables_.at<float* const>(t_dx), kStream);
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
        launch([this, B, n, t_x, t_l, dy, t_dx] {
          gpu::pick_neg_log_softmax_backward(B, n, tables_.at<const float* const>(t_x),
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
        launch([this, d, B, out, t, dy, t_dx] {
          gpu::dropout_backward(d, B, out, tables_.at<const std::int64_t>(t.ids),
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
  std::vector<bool> needed_;
  size_t value_floats_ = 0, input_floats_ = 0, scratch_floats_ = 0, scratch_used_ = 0;
  float* input_base_ = nullptr;
  float* scratch_base_ = nullptr;
  Arena values_, grads_, fwd_tables_, bwd_tables_;
  Tables tables_;
  std::vector<std::function<void()>> launches_;
  size_t issued_ = 0;  // GPU operations issued by the current forward or backward
  CublasHandle cublas_;
  EventPair fwd_events_, bwd_events_;
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

GpuAutobatchExecutor::GpuAutobatchExecutor(BatchStrategy strategy) : strategy_(strategy) {
  require_gpu("GpuAutobatchExecutor");
  state_ = std::make_unique<State>();
}
GpuAutobatchExecutor::~GpuAutobatchExecutor() = default;

void GpuAutobatchExecutor::forward(Graph& g, Expr last) {
  check_forward("gpu autobatch executor", g, last);
  State& s = *state_;
  const auto t_plan = Clock::now();
  BatchPlan plan = plan_batches(g, last.id, strategy_);
  AutobatchStats stats;
  stats.plan_seconds = seconds_since(t_plan);
  stats.nodes = idx(last.id) + 1;
  stats.batches = plan.batches.size();
  stats.per_signature.resize(plan.signatures.size());
  for (size_t i = 0; i < plan.signatures.size(); ++i)
    stats.per_signature[i].name = plan.signatures[i].name;
  for (const Batch& b : plan.batches) {
    auto& ps = stats.per_signature[idx(b.signature)];
    ps.batches += 1;
    ps.nodes += b.nodes.size();
  }
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

GpuAutobatchExecutor::GpuAutobatchExecutor(BatchStrategy strategy) : strategy_(strategy) {
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
