// Dynamic computation graphs with a DyNet-style C++ API.
//
// A Model owns the trainable parameters (fp32 values and gradients in host memory). A Graph is
// built afresh for every input (or batch of inputs) with free functions over Expr handles:
//
//   Model m;
//   Parameter W = m.add_parameters({8, 4}), b = m.add_parameters({8});
//   Graph g;
//   Expr h = tanh(affine_transform({parameter(g, b), parameter(g, W), input(g, {4}, x)}));
//   Expr loss = pick_neg_log_softmax(h, label);
//   CpuExecutor ex;  ex.forward(g, loss);  ex.backward(g, loss);  trainer.update();
//
// Shapes: every value is a matrix Dim{rows, cols}, column vectors ({n} = n x 1) by default, stored
// row-major (W [rows, cols] has W(r, c) at r*cols + c, PyTorch's layout, so W·x is `W * x`).
// Shape errors surface when an expression is built: InvalidArgument names the op and the shapes.
//
// Executors compute a Graph. They share one interface so the CPU reference (CpuExecutor, the
// oracle), AutobatchExecutor (host) and the GPU executors (GpuExecutor one kernel per node,
// GpuAutobatchExecutor; VPPS next) are interchangeable and must agree:
// forward(g, e) computes every node up to e in creation order; backward(g, loss) needs a 1x1 loss
// that was forwarded, writes dL/d(node) for every node the loss depends on and ACCUMULATES
// parameter gradients into the Model (lookup gradients per touched row); a Trainer's update()
// applies and clears them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace prnn::graph {

// ---- The op list: one line per op (enum name, user-facing name, number of arguments) -----------
// kVariadic ops take one or more arguments. Shape rule, forward and backward of each live in the
// registry in src/graph/ops.cpp, generated from this same list.
inline constexpr int kVariadic = -1;

#define PRNN_GRAPH_OPS(X)                           \
  X(Input, "input", 0)                              \
  X(Parameter, "parameter", 0)                      \
  X(Lookup, "lookup", 0)                            \
  X(AffineTransform, "affine_transform", kVariadic) \
  X(MatMul, "matmul", 2)                            \
  X(Add, "add", 2)                                  \
  X(Sub, "sub", 2)                                  \
  X(CMult, "cmult", 2)                              \
  X(Concatenate, "concatenate", kVariadic)          \
  X(PickRange, "pick_range", 1)                     \
  X(Tanh, "tanh", 1)                                \
  X(Logistic, "logistic", 1)                        \
  X(Relu, "relu", 1)                                \
  X(LogSoftmax, "log_softmax", 1)                   \
  X(PickNegLogSoftmax, "pick_neg_log_softmax", 1)   \
  X(Sum, "sum", kVariadic)                          \
  X(Dropout, "dropout", 1)

enum class Op : std::uint8_t {
#define PRNN_GRAPH_OP_ENUM(id, name, arity) id,
  PRNN_GRAPH_OPS(PRNN_GRAPH_OP_ENUM)
#undef PRNN_GRAPH_OP_ENUM
};

#define PRNN_GRAPH_OP_COUNT(id, name, arity) +1
inline constexpr int kOpCount = 0 PRNN_GRAPH_OPS(PRNN_GRAPH_OP_COUNT);
#undef PRNN_GRAPH_OP_COUNT

const char* to_string(Op op);
// kVariadic or the exact number of arguments.
int arity(Op op);

// ---- Shapes ------------------------------------------------------------------------------------

struct Dim {
  std::int64_t rows = 1;
  std::int64_t cols = 1;

  constexpr Dim() = default;
  constexpr Dim(std::int64_t r, std::int64_t c = 1) : rows(r), cols(c) {}  // NOLINT: {n} is n x 1
  constexpr std::int64_t size() const { return rows * cols; }
  constexpr bool operator==(const Dim&) const = default;
};
std::string to_string(const Dim& d);  // "3x4"

// ---- Parameters --------------------------------------------------------------------------------

struct Initializer {
  enum class Kind : std::uint8_t { GlorotUniform, Uniform, Constant, Normal };
  Kind kind = Kind::GlorotUniform;
  double a = 0.0;  // Uniform: the bound (values in [-a, a]); Constant: the value; Normal: mean
  double b = 0.0;  // Normal: standard deviation

  // U(-s, s), s = sqrt(6 / (rows + cols)) of the parameter (of one row for lookup parameters).
  static Initializer glorot_uniform() { return {Kind::GlorotUniform, 0.0, 0.0}; }
  static Initializer uniform(double bound) { return {Kind::Uniform, bound, 0.0}; }
  static Initializer constant(double value) { return {Kind::Constant, value, 0.0}; }
  static Initializer normal(double mean, double stddev) { return {Kind::Normal, mean, stddev}; }
};

class Model;

// A handle to one dense parameter of a Model; valid while the Model lives.
class Parameter {
 public:
  Parameter() = default;
  Dim dim() const;
  std::span<float> values() const;     // [rows, cols] row-major
  std::span<float> gradients() const;  // same shape, accumulated by backward
  Model* model() const { return model_; }
  int index() const { return index_; }
  bool valid() const { return model_ != nullptr; }

 private:
  friend class Model;
  Parameter(Model* m, int i) : model_(m), index_(i) {}
  Model* model_ = nullptr;
  int index_ = -1;
};

// A handle to a table of `size()` parameters of one Dim each (embeddings); gradients are sparse:
// backward marks the rows it touched and trainers update only those.
class LookupParameter {
 public:
  LookupParameter() = default;
  std::int64_t size() const;
  Dim dim() const;  // of one row
  std::span<float> values(std::int64_t row) const;
  std::span<float> gradients(std::int64_t row) const;
  // Rows with a gradient since the last clear, ascending.
  std::vector<std::int64_t> touched_rows() const;
  Model* model() const { return model_; }
  int index() const { return index_; }
  bool valid() const { return model_ != nullptr; }

 private:
  friend class Model;
  LookupParameter(Model* m, int i) : model_(m), index_(i) {}
  Model* model_ = nullptr;
  int index_ = -1;
};

// Owns parameters. Not copyable or movable (handles point at it).
//
// File format of save/load (little endian): "PRNNGRPH", u32 version, u32 #parameters,
// u32 #lookup tables; per parameter i64 rows, i64 cols; per table i64 size, rows, cols; then all
// parameter values, then all table values (fp32); then u64 FNV-1a checksum of every byte before it.
class Model {
 public:
  explicit Model(std::uint64_t seed = 1);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  Parameter add_parameters(Dim dim, Initializer init = Initializer::glorot_uniform());
  LookupParameter add_lookup_parameters(std::int64_t n, Dim dim,
                                        Initializer init = Initializer::glorot_uniform());

  std::size_t parameter_count() const;  // dense parameters
  std::size_t lookup_count() const;     // lookup tables
  Parameter parameter(std::size_t i);
  LookupParameter lookup_parameter(std::size_t i);

  void zero_gradients();
  // Throws RuntimeError when the file cannot be written.
  void save(const std::string& path) const;
  // Replaces every value and clears gradients. Throws InvalidArgument naming the file and what
  // differs (magic, version, checksum, parameter count, a shape) and leaves the model unchanged.
  void load(const std::string& path);

  // ---- Device copies (GPU executors) ----
  // A GPU executor (GpuExecutor, GpuAutobatchExecutor) makes device copies of every value,
  // gradient and touched-row flag the first time it computes with this Model (parameters added
  // later are copied when next used). From then on the DEVICE copy is the master: GPU backward
  // accumulates gradients there and the trainers update there (on the default stream). The host
  // vectors (Parameter::values(), gradients(), touched_rows()) are refreshed only by
  // copy_to_host(); after editing values on the host, copy_to_device() pushes them. save() copies
  // to the host first, load() and zero_gradients() act on both copies. CpuExecutor and
  // AutobatchExecutor refuse (InvalidArgument) a Model whose host copy is stale; on a current one
  // their backward accumulates into the host gradients and then uploads them, so the gradients of
  // a host backward reach the device master too (copy_to_host() and the device trainers see
  // them). In a build without CUDA no Model is ever on the device.
  bool on_device() const;
  // Device values, gradients and touched rows -> host; no-op unless on_device().
  void copy_to_host();
  // Host values -> device (gradients stay as they are); no-op unless on_device().
  void copy_to_device();

  struct Storage;  // internal
  Storage& storage() { return *storage_; }
  const Storage& storage() const { return *storage_; }

 private:
  std::unique_ptr<Storage> storage_;
};

// ---- Graphs and expressions --------------------------------------------------------------------

class Graph;
using NodeId = std::int32_t;

// An expression: a node of a Graph.
struct Expr {
  Graph* graph = nullptr;
  NodeId id = -1;
  bool valid() const { return graph != nullptr && id >= 0; }
  Dim dim() const;
};

// One node of the IR. `args` are earlier nodes; the other fields are op attributes.
struct Node {
  Op op = Op::Input;
  Dim dim;  // set by Graph::add from the shape rule; Input: given; PickRange: rows to pick
  std::vector<NodeId> args;
  std::int64_t index = 0;        // Lookup: row; PickNegLogSoftmax: label; PickRange: first row
  double p = 0.0;                // Dropout: drop probability
  std::size_t input_offset = 0;  // Input: offset of its values in Graph::input_values()
  Parameter param;               // Parameter
  LookupParameter lookup;        // Lookup
};

class Graph {
 public:
  // `seed` drives the dropout masks; `training` false makes dropout the identity.
  explicit Graph(std::uint64_t seed = 0, bool training = true);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  std::size_t size() const { return nodes_.size(); }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<std::size_t>(id)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<double>& input_values() const { return input_values_; }
  std::uint64_t seed() const { return seed_; }
  bool training() const { return training_; }
  void set_training(bool t) { training_ = t; }

  // Appends a node after checking its arguments belong to this graph and its shape rule holds;
  // the builder functions below are the usual way in.
  Expr add(Node node);
  Expr add_input(Dim dim, std::vector<double> values);

 private:
  std::vector<Node> nodes_;
  std::vector<double> input_values_;
  std::uint64_t seed_;
  bool training_;
};

// Builders. `values` are row-major and must hold dim.size() elements.
Expr input(Graph& g, Dim dim, const std::vector<float>& values);
Expr input(Graph& g, Dim dim, const std::vector<double>& values);
Expr input(Graph& g, float scalar);
Expr parameter(Graph& g, Parameter p);
Expr lookup(Graph& g, LookupParameter lp, std::int64_t index);
// b + Σ W_i·x_i over {b, W1, x1, W2, x2, ...}; every W_i·x_i has b's shape.
Expr affine_transform(const std::vector<Expr>& xs);
Expr operator*(Expr w, Expr x);  // matrix product: [m, k]·[k, n] -> [m, n]
Expr operator+(Expr a, Expr b);  // elementwise, equal shapes
Expr operator-(Expr a, Expr b);
Expr cmult(Expr a, Expr b);
// Stacks rows: [r1, c], [r2, c], ... -> [Σ r_i, c].
Expr concatenate(const std::vector<Expr>& xs);
// Rows [begin, end) of x: [r, c] -> [end - begin, c].
Expr pick_range(Expr x, std::int64_t begin, std::int64_t end);
Expr tanh(Expr x);
Expr logistic(Expr x);
Expr relu(Expr x);
// Over the rows of a column vector [n, 1].
Expr log_softmax(Expr x);
// -log softmax(x)[label] of a column vector [n, 1] -> [1, 1].
Expr pick_neg_log_softmax(Expr x, std::int64_t label);
// Σ of equally shaped expressions.
Expr sum(const std::vector<Expr>& xs);
// Inverted dropout: each element kept with probability 1 - p and scaled by 1/(1 - p); the mask
// is a deterministic function of (graph seed, node, element). Identity when p == 0 or the graph
// is not training. 0 <= p < 1.
Expr dropout(Expr x, double p);

// ---- Executors ---------------------------------------------------------------------------------

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  // Computes every node of g up to and including `last`.
  virtual void forward(Graph& g, Expr last) = 0;
  // Needs forward(g, e) with e.id >= loss.id first; loss must be 1x1. See the header comment.
  virtual void backward(Graph& g, Expr loss) = 0;
  // Results of the last forward/backward, row-major, as double whatever the precision.
  virtual std::vector<double> value(Expr e) const = 0;
  virtual std::vector<double> gradient(Expr e) const = 0;

  double scalar(Expr e) const;  // value of a 1x1 expression
};

enum class Precision : std::uint8_t { F32, F64 };

// The reference: literal loops in fp32 (or fp64 for gradient checks; parameters are read from the
// fp32 Model and their gradients accumulated back into it).
class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(Precision precision = Precision::F32);
  ~CpuExecutor() override;
  const char* name() const override { return "cpu"; }
  void forward(Graph& g, Expr last) override;
  void backward(Graph& g, Expr loss) override;
  std::vector<double> value(Expr e) const override;
  std::vector<double> gradient(Expr e) const override;
  Precision precision() const { return precision_; }

  struct State;  // internal

 private:
  Precision precision_;
  std::unique_ptr<State> state_;
};

// DyNet-style on-the-fly autobatching (Neubig et al. 2017). Before executing, a planner groups the
// nodes of the graph (the super-graph of a mini-batch) into batches of nodes with one signature
// (same op and shapes; for matrix products the same weight node, DyNet's "sharing the same
// weights"; lookups per LookupParameter) whose arguments all come from earlier batches; each batch
// then runs as one batched operation (W·[x_1 .. x_n] as one matrix product, elementwise ops over
// the concatenated batch) and backward runs the batches in reverse.
enum class BatchStrategy : std::uint8_t {
  Depth,   // one batch per (depth, signature), depth = longest path from a leaf
  Agenda,  // DyNet's default: repeatedly run the ready signature of lowest average depth
};
const char* to_string(BatchStrategy s);

// Elementwise (loop) fusion after batching: a run of consecutive batches of elementwise ops (add,
// sub, cmult, tanh, logistic, relu, sum, dropout) over equally sized values executes as one
// fused group - on the GPU one kernel launch per direction instead of one per batch. Nodes split
// into lanes (the group's connected components), each run element by element on its own; results
// equal unfused execution up to fp32 rounding (graph/autobatch.h states the guarantee).
enum class Fusion : std::uint8_t {
  None,         // every batch runs on its own
  Elementwise,  // runs of elementwise batches run as fused groups
};
const char* to_string(Fusion f);

// What the last forward/backward of an AutobatchExecutor did. Times are host wall clock.
struct AutobatchStats {
  struct PerSignature {
    std::string name;  // e.g. "affine_transform 20x1 W=#3,#5"
    std::size_t batches = 0;
    std::size_t nodes = 0;
  };
  std::size_t nodes = 0;          // nodes planned (0..last)
  std::size_t batches = 0;        // batches run by forward
  std::size_t groups = 0;         // fused groups (Fusion::Elementwise)
  std::size_t fused_batches = 0;  // batches inside those groups
  // Operations forward runs: batches outside groups plus one per group.
  std::size_t operations() const { return batches - fused_batches + groups; }
  double average_batch_size() const {
    return batches == 0 ? 0.0 : static_cast<double>(nodes) / static_cast<double>(batches);
  }
  double plan_seconds = 0.0;      // building the schedule
  double forward_seconds = 0.0;   // executing it, planning excluded
  double backward_seconds = 0.0;
  std::vector<PerSignature> per_signature;  // in order of first appearance in the graph
};

// fp32 on the host. Agrees with CpuExecutor up to the summation order inside batched products.
// A fused group runs lane by lane, each lane's nodes in order (the registry's loops per node).
class AutobatchExecutor final : public Executor {
 public:
  explicit AutobatchExecutor(BatchStrategy strategy = BatchStrategy::Agenda,
                             Fusion fusion = Fusion::Elementwise);
  ~AutobatchExecutor() override;
  const char* name() const override { return "autobatch-cpu"; }
  void forward(Graph& g, Expr last) override;
  void backward(Graph& g, Expr loss) override;
  std::vector<double> value(Expr e) const override;
  std::vector<double> gradient(Expr e) const override;
  BatchStrategy strategy() const { return strategy_; }
  Fusion fusion() const { return fusion_; }
  const AutobatchStats& stats() const;

  struct State;  // internal

 private:
  BatchStrategy strategy_;
  Fusion fusion_;
  std::unique_ptr<State> state_;
};

// Device time of the last forward / backward of a GPU executor: CUDA events recorded before its
// first and after its last launch on the stream, so the span also holds the gaps in which the
// GPU waited for the host to issue the next launch (launch-bound graphs show up as such).
struct DeviceTimes {
  double forward_seconds = 0.0;
  double backward_seconds = 0.0;
  // GPU operations issued by forward: kernel launches, cuBLAS calls, memsets and host-to-device
  // copies (the uploads of inputs and launch tables included).
  std::size_t forward_launches = 0;
  std::size_t backward_launches = 0;  // ... by backward
  // Host time forward / backward spent deciding what to issue (layout, launch tables, checks),
  // before issuing the first operation: the executor's own host cost, apart from the CUDA calls.
  double forward_build_seconds = 0.0;
  double backward_build_seconds = 0.0;
  // Host time forward / backward spent in the CUDA and cuBLAS calls that issue those operations
  // (after the build). Where it is close to forward/backward_seconds, the GPU waits on the host.
  double forward_issue_seconds = 0.0;
  double backward_issue_seconds = 0.0;
};

// The eager-framework baseline on the GPU: one kernel or one cuBLAS call per node (a node's
// backward may add one scatter kernel when arguments repeat, and products one per argument), fp32
// (cuBLAS with CUBLAS_PEDANTIC_MATH: no TF32). Parameters are read from and gradients accumulated
// into the Model's device copies (see Model::on_device). Values and gradients of the last
// forward/backward stay on the device; value() and gradient() copy one node back (synchronising).
// Throws Unsupported when prnn was built without CUDA or no GPU is present.
class GpuExecutor final : public Executor {
 public:
  GpuExecutor();
  ~GpuExecutor() override;
  const char* name() const override { return "gpu"; }
  void forward(Graph& g, Expr last) override;
  void backward(Graph& g, Expr loss) override;
  std::vector<double> value(Expr e) const override;
  std::vector<double> gradient(Expr e) const override;
  // Waits for the device, then reports the last forward / backward.
  DeviceTimes device_times() const;

  struct State;  // internal

 private:
  std::unique_ptr<State> state_;
};

// AutobatchExecutor's batching plans (the same planner, both strategies) run on the GPU:
// matmul / affine_transform batches of at most 16 columns (members × x columns) as one fused
// kernel (b + Σ W_i x_i, each W read once; its backward one kernel too), larger ones as one cuBLAS
// GEMM per (batch, weight) over the gathered inputs (W·[x_1 .. x_n]; outputs contiguous per
// batch), one small kernel per batch for the other ops,
// and backward in reverse batch order with deterministic segmented scatter-adds (no float
// atomics: results are identical run to run). fp32, no TF32. Model copies as GpuExecutor.
// With Fusion::Elementwise a fused group is one kernel per direction (one thread per lane and
// element; its backward falls back to one launch per batch when two lanes would add into the same
// gradient memory). Agrees with CpuExecutor up to fp32 summation order (cuBLAS's inside products).
class GpuAutobatchExecutor final : public Executor {
 public:
  explicit GpuAutobatchExecutor(BatchStrategy strategy = BatchStrategy::Agenda,
                                Fusion fusion = Fusion::Elementwise);
  ~GpuAutobatchExecutor() override;
  const char* name() const override { return "autobatch-gpu"; }
  void forward(Graph& g, Expr last) override;
  void backward(Graph& g, Expr loss) override;
  std::vector<double> value(Expr e) const override;
  std::vector<double> gradient(Expr e) const override;
  BatchStrategy strategy() const { return strategy_; }
  Fusion fusion() const { return fusion_; }
  // Planning and host-side times as AutobatchExecutor's (forward_seconds / backward_seconds are
  // host wall clock of building and issuing the launches, without waiting for the device).
  const AutobatchStats& stats() const;
  DeviceTimes device_times() const;

  struct State;  // internal

 private:
  BatchStrategy strategy_;
  Fusion fusion_;
  std::unique_ptr<State> state_;
};

// Executors by name, for command lines and benchmarks: "cpu" (CpuExecutor, fp32),
// "cpu-autobatch" (AutobatchExecutor, agenda), "cpu-autobatch-depth", "gpu" (GpuExecutor),
// "gpu-autobatch" (GpuAutobatchExecutor, agenda), "gpu-autobatch-depth"; the autobatching ones
// fuse elementwise batches, and with the suffix "-unfused" do not. Throws InvalidArgument for
// another name, Unsupported for a GPU executor without CUDA or a GPU.
inline constexpr const char* kExecutorNames[] = {
    "cpu",
    "cpu-autobatch",
    "cpu-autobatch-depth",
    "cpu-autobatch-unfused",
    "cpu-autobatch-depth-unfused",
    "gpu",
    "gpu-autobatch",
    "gpu-autobatch-depth",
    "gpu-autobatch-unfused",
    "gpu-autobatch-depth-unfused"};
std::unique_ptr<Executor> make_executor(const std::string& name);

// ---- Trainers ----------------------------------------------------------------------------------

class Trainer {
 public:
  virtual ~Trainer() = default;
  // Applies the accumulated gradients to every dense parameter and every touched lookup row,
  // then clears the gradients. On a Model that is on the device (Model::on_device) the update
  // runs there, as kernels over the device copies with the optimizer state kept on the device
  // (taken over from the host state at the first device update); the rule is the same, each
  // element rounded as the host loop rounds it.
  virtual void update() = 0;

  // DyNet's sparse_updates_enabled. true (the default): a lookup table is updated only on the
  // rows backward touched since the last update, with optimizer state per row. false: every
  // row is updated, as a dense parameter is, so rows without a gradient still move by their
  // optimizer state (SGD momentum, Adam's moments).
  void set_sparse_updates(bool sparse) { sparse_updates_ = sparse; }
  bool sparse_updates() const { return sparse_updates_; }

  struct DeviceState;  // internal: optimizer state on the device

 protected:
  bool sparse_updates_ = true;
};

// PyTorch SGD (reference::sgd_update): g' = g + wd·w; v = μ·v + g'; w -= lr·v.
class SimpleSgdTrainer final : public Trainer {
 public:
  explicit SimpleSgdTrainer(Model& model, double lr = 0.1, double momentum = 0.0,
                            double weight_decay = 0.0);
  ~SimpleSgdTrainer() override;
  void update() override;

 private:
  void update_on_device();
  Model& model_;
  double lr_, momentum_, weight_decay_;
  std::vector<std::vector<float>> velocity_;  // per dense parameter, then per lookup table
  std::unique_ptr<DeviceState> device_;
};

// PyTorch Adam (reference::adam_update); one step counter for the whole model.
class AdamTrainer final : public Trainer {
 public:
  explicit AdamTrainer(Model& model, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
                       double eps = 1e-8);
  ~AdamTrainer() override;
  void update() override;

 private:
  void update_on_device();
  Model& model_;
  double lr_, beta1_, beta2_, eps_;
  std::int64_t step_ = 0;
  std::vector<std::vector<float>> m_, v_;  // per dense parameter, then per lookup table
  std::unique_ptr<DeviceState> device_;
};

// ---- Recurrent builders ------------------------------------------------------------------------

// One LSTM layer, PyTorch layout and gate order (i, f, g, o):
//   gates = W_ih x + b_ih + W_hh h + b_hh   [4H]
//   c' = σ(f)⊙c + σ(i)⊙tanh(g);  h' = σ(o)⊙tanh(c')
// Parameters W_ih [4H, I], W_hh [4H, H], b_ih [4H], b_hh [4H].
class LstmBuilder {
 public:
  LstmBuilder(Model& model, std::int64_t input_dim, std::int64_t hidden_dim);
  // Adds the parameters to g; call once per graph before start_new_sequence.
  void new_graph(Graph& g);
  // Zero state unless h0/c0 ([H]) are given.
  void start_new_sequence(Expr h0 = {}, Expr c0 = {});
  // x [I] -> h [H]
  Expr add_input(Expr x);
  Expr back() const { return h_; }  // h of the last step
  Expr cell() const { return c_; }  // c of the last step
  std::int64_t input_dim() const { return input_dim_; }
  std::int64_t hidden_dim() const { return hidden_dim_; }
  Parameter w_ih, w_hh, b_ih, b_hh;

 private:
  std::int64_t input_dim_, hidden_dim_;
  Graph* graph_ = nullptr;
  Expr e_w_ih_, e_w_hh_, e_b_ih_, e_b_hh_;
  Expr h_, c_;
};

// How a binary Tree-LSTM's forget gate of a child is computed.
enum class TreeForget : std::uint8_t {
  AllChildren,  // Tai et al. 2015 (N-ary, N = 2): f_L, f_R from both children's h
  OwnChild,     // each from its own child's h only, one shared bias (DyNet's benchmark cell)
};

// Binary (N-ary with N = 2) Tree-LSTM of Tai et al. 2015, separate forget gates per child:
//   z = W x + U_L h_L + U_R h_R + b   [5H], gates in order i, f_L, f_R, o, u
//   c = σ(i)⊙tanh(u) + σ(f_L)⊙c_L + σ(f_R)⊙c_R;  h = σ(o)⊙tanh(c)
// Parameters W [5H, I], U_L [5H, H], U_R [5H, H], b [5H]. A leaf has no children (zero h, c);
// an inner node may have no input x.
// TreeForget::OwnChild (the cell of DyNet's Tree-LSTM benchmark):
//   z = W x + U_L h_L + U_R h_R + b   [3H], gates in order i, o, u
//   f_L = σ(Uf_L h_L + b_f), f_R = σ(Uf_R h_R + b_f)   [H] each
//   c and h as above. Parameters W [3H, I], U_L [3H, H], U_R [3H, H], b [3H], Uf_L [H, H],
//   Uf_R [H, H], b_f [H].
class TreeLstmBuilder {
 public:
  struct State {
    Expr h, c;  // [H] each
  };
  TreeLstmBuilder(Model& model, std::int64_t input_dim, std::int64_t hidden_dim,
                  TreeForget forget = TreeForget::AllChildren);
  void new_graph(Graph& g);
  State leaf(Expr x);
  State compose(const State& left, const State& right, Expr x = {});
  std::int64_t input_dim() const { return input_dim_; }
  std::int64_t hidden_dim() const { return hidden_dim_; }
  TreeForget forget() const { return forget_; }
  Parameter w, u_left, u_right, b;
  Parameter uf_left, uf_right, b_f;  // TreeForget::OwnChild only

 private:
  State combine(Expr z, const State* left, const State* right);
  std::int64_t input_dim_, hidden_dim_;
  TreeForget forget_;
  Graph* graph_ = nullptr;
  Expr e_w_, e_ul_, e_ur_, e_b_, e_ufl_, e_ufr_, e_bf_;
  Expr zero_;
};

// Bidirectional LSTM over a sequence: out_t = [h_fwd_t ; h_bwd_t]  [2H].
class BiLstmBuilder {
 public:
  BiLstmBuilder(Model& model, std::int64_t input_dim, std::int64_t hidden_dim);
  void new_graph(Graph& g);
  std::vector<Expr> transduce(const std::vector<Expr>& xs);
  LstmBuilder forward_lstm, backward_lstm;
};

}  // namespace prnn::graph
