// The GPU kernels of the dynamic-graph executors (graph/gpu_executor.cpp), one host launcher per
// kernel family; the kernels live in graph/gpu_kernels.cu, each with its contract there.
//
// Conventions shared by every family (a "batch" is B members of one signature; the per-node
// executor calls the same launchers with B = 1):
//   - x tables: DEVICE arrays of device pointers, [B * A]: entry b*A + a is member b's argument a;
//   - y, dy: the batch's own values / gradients, contiguous [B, out] (member b at b*out);
//   - dx tables: like x tables, pointing where dL/d(argument) is ACCUMULATED (+=). Within one
//     launch every dx entry must point to distinct memory (the executor routes repeated
//     arguments through zeroed scratch and scatter_add);
//   - int64 tables (labels, node ids, offsets) and double tables (dropout rates) are device
//     arrays too: every per-node attribute is passed per member, never taken from the first.
// All launches are asynchronous on `stream`, check the launch (PRNN_CHECK_LAUNCH) and do nothing
// when the work is empty. fp32 throughout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace prnn::graph::gpu {

// Elementwise ops over equally shaped arguments (the executor's "flat" family).
enum class Pointwise : std::uint8_t { Add, Sub, CMult, Tanh, Logistic, Relu, Sum };

// How a backward kernel writes dL/d(argument) through its dx table: Add accumulates (+=) into
// the arguments' gradients; Store overwrites (=) scratch pieces that a scatter_add adds in
// afterwards (the executor's route for repeated arguments), so the scratch needs no zeroing.
enum class GradWrite : std::uint8_t { Add, Store };

// dst[b*width + offs[a] + j] = src[b*A + a][j]  for j < offs[a+1] - offs[a]; offs [A+1] with
// offs[0] = 0, offs[A] = width. (lookup, pick_range, concatenate, packing GEMM inputs)
void gather_pieces(int B, int A, std::int64_t width, const std::int64_t* offs,
                   const float* const* src, float* dst, cudaStream_t stream);

// dst[d][i] = src[d][i]  for i < size[d], d < D (tables [D]); destinations distinct memory;
// max_size >= every size[d] (sizes the grid). (an AffineTransform's biases into y and the
// packing of GEMM inputs, all in one launch)
void copy_pieces(int D, std::int64_t max_size, float* const* dst, const std::int64_t* size,
                 const float* const* src, cudaStream_t stream);

// For every destination d < D, in order of its sources s in [first[d], first[d+1]):
//   dst[d][i] += src[s][i]   (i < size[d]),  and *flag[d] = 1 when flag[d] is non-null.
// Destinations must be distinct memory; each is summed by one thread per element in the order
// given, so the result is deterministic. flag may be null (no flags at all). max_size >= every
// size[d] (sizes the grid: a destination is spread over many blocks).
void scatter_add(int D, std::int64_t max_size, float* const* dst, const std::int64_t* size,
                 const std::int64_t* first, const float* const* src, std::uint8_t* const* flag,
                 cudaStream_t stream);

// y[b*n + i] = f(x[b*A + 0][i], ..., x[b*A + A-1][i]);  A = 2 for Add/Sub/CMult, 1 for the
// activations, >= 1 for Sum.
void pointwise_forward(Pointwise op, int B, int A, std::int64_t n, const float* const* x,
                       float* y, cudaStream_t stream);
// dx[b*A + a][i] += ∂f/∂x_a(b, i) · dy[b*n + i]   (y: this op's output [B, n]; = with Store)
void pointwise_backward(Pointwise op, GradWrite write, int B, int A, std::int64_t n,
                        const float* const* x, const float* y, const float* dy, float* const* dx,
                        cudaStream_t stream);

// Member b: column x[b] [n].  y[b*n + i] = x_i - log Σ_j exp x_j.
void log_softmax_forward(int B, std::int64_t n, const float* const* x, float* y,
                         cudaStream_t stream);
// dx[b][i] += dy_i - exp(y_i) · Σ_j dy_j   (= with Store)
void log_softmax_backward(GradWrite write, int B, std::int64_t n, const float* y, const float* dy,
                          float* const* dx, cudaStream_t stream);

// y[b] = log Σ_j exp x_j - x[label[b]]   (x[b] [n], label [B] in [0, n))
void pick_neg_log_softmax_forward(int B, std::int64_t n, const float* const* x,
                                  const std::int64_t* label, float* y, cudaStream_t stream);
// dx[b][i] += dy[b] · (softmax(x)_i - [i == label[b]])   (= with Store)
void pick_neg_log_softmax_backward(GradWrite write, int B, std::int64_t n, const float* const* x,
                                   const std::int64_t* label, const float* dy, float* const* dx,
                                   cudaStream_t stream);

// Inverted dropout with graph/dropout_hash.h's mask of (seed, node[b], i, p[b]): y = x · scale,
// scale 1 when not training or p[b] == 0. The node id and the rate are per member (node [B],
// p [B]): a batch may hold dropout nodes of different rates (the rate is not in the signature).
struct DropoutArgs {
  std::uint64_t seed = 0;
  bool training = false;
};
void dropout_forward(const DropoutArgs& d, int B, std::int64_t n, const std::int64_t* node,
                     const double* p, const float* const* x, float* y, cudaStream_t stream);
// dx[b][i] += dy[b*n + i] · scale(b, i)   (= with Store)
void dropout_backward(const DropoutArgs& d, GradWrite write, int B, std::int64_t n,
                      const std::int64_t* node, const double* p, const float* dy, float* const* dx,
                      cudaStream_t stream);

// ---- Fused elementwise groups (graph/autobatch.h): a whole group in one launch per direction --
// The op of one instruction: the Pointwise ops (same values, same codes) and dropout.
enum class FusedOp : std::uint8_t { Add, Sub, CMult, Tanh, Logistic, Relu, Sum, Dropout };

// Registers per thread for a lane's values and gradients: the most instructions of one lane
// (the planner's kMaxLaneNodes).
inline constexpr int kFusedLaneSlots = 16;

// A group of L lanes over n elements each, as a program in the uploaded tables. Lane l runs
// instructions [lane_first[l], lane_first[l+1]) in order, at most kFusedLaneSlots of them;
// instruction k computes one node's value y[k] [n] from its operands o in
// [arg_first[k], arg_first[k+1]) (2 for add, sub, cmult; 1 for tanh, logistic, relu, dropout;
// >= 1 for sum). Operand o is the value of instruction lane_first[l] + src[o] of the same lane
// when src[o] >= 0 (kept in registers; src[o] < k - lane_first[l]), else x[o] [n] from memory.
struct FusedElementwise {
  int L = 0;
  std::int64_t n = 0;
  const std::int64_t* lane_first = nullptr;  // [L+1]
  const std::int64_t* op = nullptr;          // [I] FusedOp codes
  const std::int64_t* arg_first = nullptr;   // [I+1]
  const std::int64_t* src = nullptr;         // [O] slot of an in-lane operand, else -1
  const float* const* x = nullptr;           // [O] operand values (read where src < 0)
  float* const* y = nullptr;                 // [I] node values: forward writes, backward reads
  const std::int64_t* node = nullptr;        // [I] node ids, the dropout mask's hash input
  const double* rate = nullptr;              // [I] dropout rates (node and rate null: no dropout)
  DropoutArgs dropout;
  float* const* dy = nullptr;                // [I] backward: dL/d(node), see below
  float* const* dx = nullptr;                // [O] backward: dL/d(operand) += (where src < 0)
};
// y[k][i] = f_k(operands at element i)  for every lane's instructions in order.
void fused_elementwise_forward(const FusedElementwise& p, cudaStream_t stream);
// Per (lane, element), instructions in reverse: dy[k][i] holds on entry what users outside the
// group added, plus (in registers) what later instructions of the lane add; the sum is stored
// back as the node's gradient, then each operand (positions in order) receives ∂f_k/∂x · dy[k][i]:
// in registers within the lane, else dx[o][i] += . Every memory element is read and written by
// one thread only: the host guarantees that no two lanes' dx spans share memory and that a lane's
// dx spans are pairwise equal or disjoint. Deterministic; no atomics.
void fused_elementwise_backward(const FusedElementwise& p, cudaStream_t stream);

// ---- Small products: a whole MatMul / AffineTransform batch in one launch per direction ------
// A batch of B members of y = [bias +] Σ_{i<P} W_i · x_i with P >= 0 weights W_i [m, k_i]
// (row-major) shared by the batch, member b's x_i [k_i, n] and bias [m, n], y [B, m, n]
// contiguous. The batch has N = B·n "columns" q = b·n + c. Selected by the executor for
// N <= kSmallProductColumns (beyond that, cuBLAS GEMMs); the kernels keep one accumulator per
// column in registers, templated on the column count rounded up to 1, 2, 4, 8 or 16.
inline constexpr int kSmallProductColumns = 16;

struct SmallProductForward {
  int B = 0, P = 0;
  std::int64_t m = 0, n = 0;
  const float* const* w = nullptr;     // [P] table: W_i
  const std::int64_t* k = nullptr;     // [P] table: k_i
  const float* const* x = nullptr;     // [B*P] table: entry b*P + i is member b's x_i
  const float* const* bias = nullptr;  // [B] table: member b's bias, or null (MatMul)
  float* y = nullptr;                  // [B, m, n]
};
// y[b][r, c] = bias[b][r, c] + Σ_i Σ_j W_i[r, j] · x_i[b][j, c]; each row's dot products in a
// fixed lane order (deterministic), W read once per launch.
void small_product_forward(const SmallProductForward& p, cudaStream_t stream);

struct SmallProductBackward {
  int B = 0, P = 0;
  std::int64_t m = 0, n = 0;
  const float* const* w = nullptr;  // [P] table: W_i
  float* const* dw = nullptr;       // [P] table: dL/dW_i, accumulated (+=)
  const std::int64_t* k = nullptr;  // [P] table: k_i
  const float* const* x = nullptr;  // [B*P] table, as forward
  float* const* dx = nullptr;       // [B*P] table: where dL/dx_i of member b goes
  GradWrite dx_write = GradWrite::Add;
  const float* dy = nullptr;        // [B, m, n]
  float* const* dbias = nullptr;    // [B] table: dbias[b] += dy[b]; or null (no bias work)
  bool bias_shared = false;         // every dbias entry is one destination: += Σ_b dy[b]
  float* partial = nullptr;         // workspace, small_product_backward_workspace() floats
  unsigned* tickets = nullptr;      // [small_product_backward_tiles()] zeros; left zeros
};
// Column tiles of the backward launch (Σ_i ceil(k_i / 32)) for the host's ticket buffer, and
// the floats of its partial-sum workspace.
std::int64_t small_product_backward_tiles(const std::int64_t* k_host, int P);
std::int64_t small_product_backward_workspace(const std::int64_t* k_host, int P, std::int64_t m,
                                              std::int64_t columns);
// dW_i[r, j] += Σ_q dy_q[r] · x_i,q[j]   (q = (b, c) in member order, one thread per element)
// dx_i[b][j, c] += Σ_r W_i[r, j] · dy[b][r, c]   (= with Store; rows summed in a fixed order:
//   within a row chunk per warp, warps in order, chunks in order by the last CTA of the tile)
// dbias: per member dbias[b] += dy[b], or with bias_shared dbias[0] += dy[0] + dy[1] + ...
// Destinations of dw, dx and dbias must be pairwise disjoint memory (bias_shared aside), dw
// distinct per weight. k_host: the k_i on the host (the launch shape), equal to the k table.
void small_product_backward(const SmallProductBackward& p, const std::int64_t* k_host,
                            cudaStream_t stream);

// ---- SGD over the Model's device copies (graph/trainers.cpp; Adam is train/optim.h's) --------
// Over n elements of w, g (and state); with `touched` non-null, element i belongs to row
// i / row and is updated only when touched[row] != 0 (lookup tables: sparse updates). Every
// updated element's gradient is zeroed. Each product and sum is rounded on its own as the host
// loop of reference::sgd_update rounds it (no FMA contraction).
struct SgdScalars {
  float lr = 0.0f, momentum = 0.0f, weight_decay = 0.0f;
  bool use_momentum = false;  // momentum != 0: v = μ·v + g'; w -= lr·v; else w -= lr·g'
};
void sgd_update(const SgdScalars& s, std::int64_t n, std::int64_t row, const std::uint8_t* touched,
                float* w, float* g, float* velocity, cudaStream_t stream);

}  // namespace prnn::graph::gpu
