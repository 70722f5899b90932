// GPU prnn::Rnn against the CPU reference in double, for both GPU algorithms: Persistent (the
// persistent kernels, W_hh in registers, one cooperative launch per layer direction) and
// GemmPerStep (cuBLAS GEMM per step + fused bias/activation kernel, captured into CUDA graphs).
// Cases: every vanilla cell (relu, clipped relu, tanh), one, two and three layers,
// unidirectional and bidirectional, with and without initial states, H ∈ {1, 32, 1000, 1152,
// 1537, 2048}, B ∈ {1, 3, 4, 5, 7, 16}, T ∈ {1, 2, 333}; GRU and LSTM the same way with
// H ∈ {1, 32, 515, 1000, 1024, 1152} (1152: the largest each holds in registers), and in 16 bits
// up to H = 2048 (the tensor-core shapes with part of W_hh in shared memory). Checked: y, hn, dx, dh0 (LSTM: cn, dc0) and dparams per
// block (W_ih, W_hh, b_ih, b_hh of every layer and direction). Outputs are poisoned with 0xFF
// bytes (NaN) before every run, so an element the layer fails to write fails.
// Every case runs three times (fresh, same pointers again, other output buffers); the three must
// agree bit for bit (deterministic).
// Tolerance: relative L2 error ≤ 1e-5 (fp32 tensors and math, no TF32, vs the double reference
// on the same fp32-rounded inputs; f16 / bf16 tensors: ≤ 1e-2 on 16-bit-rounded inputs; fp32
// tensors with RnnDesc::gemm_math = Tf32, names ending in _tf32: ≤ 3e-3, see kTolTf32),
// for every output and every parameter block (a block of
// fewer than 16 elements against its layer direction's gradient norm: see kMinBlock). The relu and
// clipped-relu data keep pre-activations away from the kinks (rnn_case.h says why), so the bound
// holds at H = 1537, T = 333 too.
// The full issue grid (every H × B × T × activation above, one layer; GRU and LSTM over
// H ∈ {1, 32, 515, 1000, 1024, 1152}) is also run as a cross-check Persistent vs GemmPerStep, both on
// the GPU (the reference would cost hours there): relative error between them ≤ 2e-5, the sum
// of their two bounds against the reference.
// The references are computed in parallel threads (only those of the selected tests), since a
// large case costs the double reference ~10 G multiply-adds.
// Stacks: residual connections every 1 and 2 layers (2 and 3 layers) and per-sequence lengths
// ({T, 1, T-3, ...} in one batch: padding is an identity step, y = 0 and dx = 0 there), every
// cell, both directions, odd sizes; names end in _res<k> and/or _len<lengths>
// (--gtest_filter='*_res*:*_len*').
// Safety: a CTA stalled past the wait bound (PRNN_PERSISTENT_STALL) turns into RuntimeError from
// check(), and the next Rnn runs correctly.
// Sanitize/*: four-step cases of every persistent kernel and pass, which compute-sanitizer's
// racecheck and synccheck also run (tests/CMakeLists.txt, sanitize_*; there without the replays,
// which gpu-check runs unsanitized); RnnGpuSanitize checks that the tiling picks every kernel
// among them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gemm_rnn/gemm_rnn.h"
#include "persistent/rnn_kernels.h"
#include "persistent/tiling.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/rnn.h"
#include "rnn/rnn_case.h"
#include "support/env.h"
#include "support/random.h"
#include "support/selection.h"

namespace prnn {
namespace {

using test::EnvScope;
using test::RnnCase;
using test::RnnData;

constexpr double kTolF32 = 1e-5;
constexpr double kTol16 = 1e-2;  // f16 / bf16 tensors: fp32 math, the outputs rounded to 16 bits
// fp32 tensors, TF32 GEMMs over all timesteps: each product's operands rounded to 10 mantissa
// bits (2^-11 relative each), so a GEMM's result is off by about 2^-11 ≈ 5e-4 relative; the
// recurrence and the gradients through it carry that, a few times over.
constexpr double kTolTf32 = 3e-3;
double tolerance_of(const RnnCase& c) {
  return c.dtype != DType::F32 ? kTol16 : c.gemm_math == GemmMath::Tf32 ? kTolTf32 : kTolF32;
}

// The tolerance of the check running now: kTolF32 but inside a 16-bit MatchesReference case.
double g_tol = kTolF32;
struct ToleranceScope {
  explicit ToleranceScope(double tol) { g_tol = tol; }
  ~ToleranceScope() { g_tol = kTolF32; }
  ToleranceScope(const ToleranceScope&) = delete;
  ToleranceScope& operator=(const ToleranceScope&) = delete;
};

std::vector<RnnCase> cases() {
  struct Shape5 {
    std::int64_t T, B, I, H, L;
    bool bi, state;
  };
  const Shape5 shapes[] = {
      {1, 1, 1, 1, 1, false, true},        // the smallest problem
      {333, 3, 3, 1, 1, true, true},       // H = 1, long, bidirectional
      {2, 5, 7, 32, 2, false, true},       // two layers, two steps
      {333, 7, 16, 32, 2, true, true},     // two bidirectional layers, long
      {333, 1, 5, 32, 1, false, false},    // no states (h0 zeros, hn/dhn/dh0 absent)
      {2, 3, 64, 1000, 1, true, true},     // H = 1000, bidirectional
      {333, 1, 32, 1000, 1, false, true},  // H = 1000, long
      {2, 5, 100, 1537, 2, true, true},    // H = 1537, two bidirectional layers
      {333, 1, 64, 1537, 1, false, true},  // H = 1537, long
      {1, 7, 7, 1537, 3, true, false},     // three bidirectional layers, T = 1, no states
  };
  std::vector<RnnCase> v;
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh})
    for (const Shape5& s : shapes) v.push_back({cell, s.T, s.B, s.I, s.H, s.L, s.bi, s.state});
  v.push_back({Cell::ReLU, 333, 3, 64, 1537, 1, false, true});  // H = 1537, long, B = 3
  v.push_back({Cell::Tanh, 333, 5, 1, 1000, 1, true, false});   // I = 1, bidirectional, long
  v.push_back({Cell::ReLU, 333, 4, 32, 1152, 1, false, true});  // the target layer
  v.push_back({Cell::ReLU, 333, 2, 16, 700, 1, false, true});   // B = 2, H = 700 (kRec = 8)
  v.push_back({Cell::ReLU, 333, 8, 32, 1152, 1, false, true});  // warp rows, 2 per warp, 4 groups
  v.push_back({Cell::ClippedReLU, 100, 6, 8, 700, 1, false, true});  // 2 per warp, 3 groups
  {
    RnnCase q{Cell::Tanh, 60, 7, 8, 1152, 1, true, true};  // 2 per warp, lengths, both directions
    q.lengths = {60, 1, 57, 30, 60, 2, 33};
    v.push_back(q);
  }
  v.push_back({Cell::ReLU, 333, 11, 32, 1152, 1, false, true});  // warp rows, 3 per warp
  {
    RnnCase q{Cell::Tanh, 60, 9, 8, 1000, 1, true, true};  // 3 per warp, lengths, both directions
    q.lengths = {60, 1, 57, 30, 60, 2, 33, 59, 12};
    v.push_back(q);
  }
  v.push_back({Cell::Tanh, 60, 2, 8, 1152, 2, true, true});     // B = 2, H = 1152, stacked
  v.push_back({Cell::Tanh, 333, 16, 8, 1152, 1, false, true});  // B = 16
  v.push_back({Cell::ReLU, 333, 4, 16, 2048, 1, false, true});  // H = 2048, long
  v.push_back({Cell::ClippedReLU, 2, 7, 16, 2048, 2, true, true});
  // The wide warp rows (part of each lane's weights in shared memory, H = 1981..2112 at B <= 4
  // on 132 SMs): both directions with lengths at BB = 2, the largest H at B = 1, and H = 1981,
  // whose last CTA holds one record (five of its warps own none).
  {
    RnnCase wide{Cell::Tanh, 30, 2, 16, 2048, 1, true, true};
    wide.lengths = {30, 7};
    v.push_back(wide);
  }
  v.push_back({Cell::ReLU, 20, 1, 9, 2112, 1, false, true});
  v.push_back({Cell::ClippedReLU, 21, 3, 12, 1981, 1, false, true});
  const Shape5 gated[] = {
      {1, 1, 1, 1, 1, false, true},        // the smallest problem
      {333, 3, 3, 1, 1, true, true},       // H = 1, long, bidirectional
      {2, 5, 7, 32, 2, false, true},       // two layers, two steps
      {333, 7, 16, 32, 2, true, true},     // two bidirectional layers, long
      {333, 1, 5, 32, 1, false, false},    // no states
      {333, 5, 9, 515, 1, false, true},    // mid-size, B = 5 (two batch chunks)
      {2, 3, 64, 1000, 1, true, true},     // H = 1000, bidirectional
      {100, 4, 32, 1024, 1, false, true},  // the fp32 LSTM target layer
      {1, 7, 7, 515, 3, true, false},      // three bidirectional layers, T = 1, no states
  };
  for (Cell cell : {Cell::GRU, Cell::LSTM})
    for (const Shape5& s : gated) v.push_back({cell, s.T, s.B, s.I, s.H, s.L, s.bi, s.state});
  v.push_back({Cell::GRU, 50, 3, 24, 1152, 1, false, true});   // the largest fp32 GRU on chip
  v.push_back({Cell::LSTM, 50, 3, 24, 1152, 1, false, true});  // the largest fp32 LSTM on chip
  v.push_back({Cell::LSTM, 20, 16, 8, 1024, 1, false, true});  // B = 16
  // 16-bit tensors (fp32 math inside).
  for (DType t : {DType::BF16, DType::F16})
    for (Cell cell : {Cell::ReLU, Cell::GRU, Cell::LSTM}) {
      v.push_back({cell, 50, 5, 24, 515, 2, true, true, t});
      v.push_back({cell, 100, 4, 32, 1024, 1, false, true, t});
    }
  v.push_back({Cell::LSTM, 40, 4, 16, 1152, 1, false, true, DType::BF16});  // the bf16 target
  // The gated warp-rows forward's tensor-core product (B = 3..4, 3 records per CTA): odd H (a
  // partial k-tile), B = 3, both directions, lengths.
  {
    RnnCase g{Cell::GRU, 37, 3, 16, 1100, 1, true, true, DType::F16};
    g.lengths = {37, 1, 30};
    v.push_back(g);
  }
  // The 16-bit LSTM at B = 4 and 2 records per SM: both passes on the gated warp rows (not the
  // tensor-core backward of 3 records per SM).
  v.push_back({Cell::LSTM, 33, 4, 16, 700, 1, false, true, DType::BF16});
  // LSTM at B = 2 (BB = 2), whose gated warp-rows backward passes its records as two planes: 3
  // records per SM (H = 1024, fp32) and 2 (H = 700, bf16, both directions, lengths).
  v.push_back({Cell::LSTM, 60, 2, 16, 1024, 1, false, true});
  {
    RnnCase q{Cell::LSTM, 45, 2, 8, 700, 1, true, true, DType::BF16};
    q.lengths = {45, 17};
    v.push_back(q);
  }
  // fp32 tensors with TF32 GEMMs over all timesteps: two bidirectional layers (a lower layer's h
  // into the upper one's TF32 input GEMM), and one layer at B = 4.
  for (Cell cell : {Cell::ReLU, Cell::GRU, Cell::LSTM}) {
    RnnCase stack{cell, 50, 5, 24, 515, 2, true, true};
    RnnCase one{cell, 60, 4, 32, 1024, 1, false, true};
    for (RnnCase* c : {&stack, &one}) {
      c->gemm_math = GemmMath::Tf32;
      v.push_back(*c);
    }
  }
  // Residual stacks and variable lengths, every cell.
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh, Cell::GRU, Cell::LSTM}) {
    const bool has_gates = cell == Cell::GRU || cell == Cell::LSTM;
    RnnCase a{cell, 37, 5, 7, 33, 3, true, true};  // three bidirectional layers, all residual
    a.residual_every = 1;
    a.lengths = {37, 1, 34, 20, 5};
    RnnCase b{cell, 41, 3, 5, has_gates ? 515 : 1000, 3, false, true};  // layer 2 residual
    b.residual_every = 2;
    b.lengths = {41, 1, 38};
    RnnCase r{cell, 23, 4, 9, 65, 2, true, true};  // residual only, no lengths
    r.residual_every = 1;
    RnnCase n{cell, 29, 7, 3, 17, 1, true, false};  // lengths only, no states
    n.lengths = {1, 29, 26, 2, 29, 13, 28};
    RnnCase m{cell, 50, 5, 24, 515, 2, false, true};  // two batch chunks (gated), one layer apart
    m.lengths = {50, 1, 47, 50, 3};
    RnnCase w{cell, 40, 2, 5, 385, 1, true, true};  // B = 2, odd H, both directions
    w.lengths = {40, 3};
    for (const RnnCase& c : {a, b, r, n, m, w}) v.push_back(c);
  }
  // The tensor-core forward (16-bit GRU / LSTM, B >= 4): batch chunks of 8 and 16, two chunks
  // of 16, the small-H shape (R = 3), H = 1, lengths across a chunk of 16.
  v.push_back({Cell::LSTM, 33, 20, 16, 1152, 1, false, true, DType::BF16});  // chunks 16 + 4
  v.push_back({Cell::GRU, 40, 9, 16, 1000, 1, false, true, DType::F16});     // one chunk of 16
  v.push_back({Cell::LSTM, 25, 6, 5, 100, 2, true, true, DType::F16});       // R = 3
  // Four bidirectional 16-bit layers: on the tensor cores (LSTM B = 5), and on the gated warp
  // rows' tensor-core forward (GRU B = 3, H = 1100), which reads W_hh in 16 bits, so that params'
  // fp32 copy is 8 ranges and with h0 the call has more conversions than one launch takes.
  v.push_back({Cell::LSTM, 9, 5, 8, 100, 4, true, true, DType::BF16});
  v.push_back({Cell::GRU, 5, 3, 8, 1100, 4, true, true, DType::BF16});
  v.push_back({Cell::GRU, 60, 4, 3, 1, 1, false, true, DType::BF16});        // H = 1
  {
    RnnCase g{Cell::GRU, 30, 11, 16, 515, 1, true, true, DType::BF16};
    g.lengths = {30, 1, 27, 12, 30, 2, 29, 16, 5, 30, 3};
    v.push_back(g);
  }
  {
    RnnCase h{Cell::LSTM, 30, 4, 16, 1024, 2, false, true, DType::BF16};  // 16-bit, packed
    h.residual_every = 1;
    h.lengths = {30, 1, 27, 12};
    v.push_back(h);
  }
  // The large tensor-core shapes (R = 16, part of W_hh in shared memory; no FMA shape holds
  // them, so tensor cores at every batch): the H = 2048 target layer, two chunks of 8 at
  // H = 2048, odd H = 1537 bidirectional below the FMA kernels' batches, two uneven chunks,
  // lengths.
  v.push_back({Cell::LSTM, 40, 4, 16, 2048, 1, false, true, DType::BF16});
  v.push_back({Cell::GRU, 20, 16, 8, 2048, 1, false, true, DType::BF16});
  v.push_back({Cell::GRU, 30, 3, 8, 1537, 1, true, true, DType::F16});
  v.push_back({Cell::LSTM, 20, 13, 8, 1537, 1, false, true, DType::F16});
  {
    RnnCase g{Cell::LSTM, 25, 5, 8, 1153, 1, false, true, DType::BF16};
    g.lengths = {25, 1, 22, 7, 25};
    v.push_back(g);
  }
  return v;
}

// tensor_cores: the PRNN_PERSISTENT_TENSOR_CORES of the run. The 16-bit GRU / LSTM cases an FMA
// shape holds (H ≤ 1152) also run with "0" (both passes on the FMA kernel's packed 16-bit shapes)
// and "forward" (the tensor-core forward, then the FMA backward: the path of batches above
// kTensorCoreBackwardMaxBatch), so that every kernel keeps its cases; larger layers run on the
// tensor cores alone (RnnGpuChoice checks that the knobs refuse them). A GRU the gated warp rows
// hold (B <= 4, 397 <= H <= 1152 on 132 SMs), and an LSTM they hold at 2 records per SM
// (H <= 792), run on them under every value.
// finish_barrier: the PRNN_PERSISTENT_FINISH_BARRIER of the run ("": the tiling's choice). The
// fp32 vanilla cases of one layer at H >= 1000 also run with the barrier forced on and off, so
// that both forms of the FMA kernel's chunk end keep their cases at every batch shape.
// graphs: the PRNN_PERSISTENT_GRAPHS of the run ("": graphs, the default). The persistent cases
// of several layers, both directions or sequence lengths (several launches per call) also run
// with "0", each call's launches enqueued directly.
// warp_rows: the PRNN_PERSISTENT_WARP_ROWS of the run ("": the tiling's choice). The cases the
// warp-rows kernels may take (vanilla B ≤ kWarpRowsMaxBatch, gated B ≤ kGatedWarpRowsMaxBatch,
// H ≤ 1152; vanilla H ≤ kWarpRowsWideMaxHidden at B ≤ kWarpRowsWideMaxBatch, the wide shapes)
// also run with "0", on the FMA (or tensor-core) shapes, so that every kernel keeps its cases at
// those batches.
// input_projection: the PRNN_PERSISTENT_INPUT_PROJECTION of the run ("": the default, W_ih x in
// the warp-rows kernel for T <= 4 where it can, else the input GEMM). The fp32 one-layer vanilla
// cases the warp-rows forward can project in the kernel (I % 4 == 0) also run with "1", in the
// kernel at every T.
struct GpuCase {
  RnnAlgo algo = RnnAlgo::Persistent;
  RnnCase c;
  std::string tensor_cores = "1";
  std::string finish_barrier = "";
  std::string graphs = "";
  std::string warp_rows = "";
  std::string input_projection = "";
  std::string name() const {
    const char* variant = tensor_cores == "0" ? "_fma_" : tensor_cores == "forward" ? "_tcforward_" : "_";
    const std::string barrier = finish_barrier.empty() ? "" : "barrier" + finish_barrier + "_";
    const std::string direct = graphs == "0" ? "direct_" : "";
    const std::string rows = warp_rows == "0" ? "nowarprows_" : "";
    const std::string input = input_projection == "1" ? "kernelinput_" : "";
    return std::string(to_string(algo)) + variant + barrier + direct + rows + input + c.name();
  }
};
inline void PrintTo(const GpuCase& g, std::ostream* os) { *os << g.name(); }

std::vector<GpuCase> gpu_cases() {
  std::vector<GpuCase> v;
  for (RnnAlgo algo : {RnnAlgo::Persistent, RnnAlgo::GemmPerStep})
    for (const RnnCase& c : cases()) v.push_back({algo, c});
  for (const RnnCase& c : cases())
    if (c.dtype != DType::F32 && (c.cell == Cell::GRU || c.cell == Cell::LSTM) && c.H <= 1152)
      for (const char* knob : {"0", "forward"}) v.push_back({RnnAlgo::Persistent, c, knob});
  for (const RnnCase& c : cases())
    if ((c.cell == Cell::ReLU || c.cell == Cell::ClippedReLU || c.cell == Cell::Tanh) &&
        c.dtype == DType::F32 && c.L == 1 && c.H >= 1000)
      for (const char* barrier : {"0", "1"}) v.push_back({RnnAlgo::Persistent, c, "1", barrier});
  for (const RnnCase& c : cases())
    if (c.L > 1 || c.bidirectional || !c.lengths.empty())
      v.push_back({RnnAlgo::Persistent, c, "1", "", "0"});
  for (const RnnCase& c : cases()) {
    const bool gated = c.cell == Cell::GRU || c.cell == Cell::LSTM;
    const bool wide = !gated && c.dtype == DType::F32 &&
                      c.H <= persistent::kWarpRowsWideMaxHidden &&
                      c.B <= persistent::kWarpRowsWideMaxBatch;
    if ((c.H <= 1152 &&
         c.B <= (gated ? persistent::kGatedWarpRowsMaxBatch : persistent::kWarpRowsMaxBatch)) ||
        wide)
      v.push_back({RnnAlgo::Persistent, c, "1", "", "", "0"});
  }
  for (const RnnCase& c : cases())
    if ((c.cell == Cell::ReLU || c.cell == Cell::ClippedReLU || c.cell == Cell::Tanh) &&
        c.dtype == DType::F32 && c.L == 1 && c.I % 4 == 0 && c.H <= 1152 &&
        c.B <= persistent::kWarpRowsMaxBatch)
      v.push_back({RnnAlgo::Persistent, c, "1", "", "", "", "1"});
  return v;
}

std::string name_of(const ::testing::TestParamInfo<GpuCase>& info) { return info.param.name(); }

// Small cases of every persistent kernel and pass, for compute-sanitizer's racecheck and
// synccheck (tests/CMakeLists.txt: sanitize_*, --gtest_filter='Sanitize/*'): four steps, so the
// instrumented kernels stay quick, at the sizes that make the tiling pick each kernel on a GPU of
// 132 SMs (RnnGpuSanitize.CasesCoverEveryKernel checks the picks on the GPU at hand). They run
// unsanitized in gpu-check as well.
std::vector<GpuCase> sanitize_cases() {
  auto small = [](Cell cell, std::int64_t B, std::int64_t H, DType dtype = DType::F32) {
    return RnnCase{cell, 4, B, 5, H, 1, false, true, dtype};
  };
  constexpr RnnAlgo P = RnnAlgo::Persistent;
  std::vector<GpuCase> v;
  v.push_back({P, small(Cell::ReLU, 2, 1000)});  // warp rows: 2 batch groups of 3 warps
  RnnCase rows = small(Cell::Tanh, 6, 1152);     // warp rows: 2 elements per warp, lengths
  rows.lengths = {4, 1, 3, 4, 2, 4};
  v.push_back({P, rows});
  RnnCase projecting = small(Cell::ReLU, 4, 1152);  // warp rows, W_ih x in the kernel (I = 32)
  projecting.I = 32;
  v.push_back({P, projecting});
  v.push_back({P, small(Cell::ReLU, 3, 1000), "1", "0", "", "0"});  // FMA direct, 2 chunks
  v.push_back({P, small(Cell::ReLU, 8, 1152), "1", "1", "", "0"});  // FMA direct, the barrier
  v.push_back({P, small(Cell::LSTM, 4, 1024), "1", "", "", "0"});   // FMA staged, fp32
  v.push_back({P, small(Cell::LSTM, 5, 1152, DType::BF16), "0"});   // FMA staged, packed bf16
  v.push_back({P, small(Cell::LSTM, 4, 1024)});  // gated warp rows, 3 records per CTA
  v.push_back({P, small(Cell::LSTM, 4, 1024, DType::BF16)});  // gated warp rows, tensor cores
  v.push_back({P, small(Cell::LSTM, 3, 1000, DType::BF16), "forward"});  // and the backward's
  v.push_back({P, small(Cell::LSTM, 2, 700)});   // gated warp rows, BB = 2: records as planes
  RnnCase gated = small(Cell::GRU, 3, 515);      // gated warp rows, 2 records, lengths
  gated.lengths = {4, 1, 3};
  v.push_back({P, gated});
  v.push_back({P, small(Cell::LSTM, 5, 100, DType::BF16)});        // tensor cores, both passes
  v.push_back({P, small(Cell::GRU, 4, 64, DType::F16), "forward"});  // tensor-core forward only
  v.push_back({P, small(Cell::LSTM, 3, 1537, DType::BF16)});  // tensor cores, W_hh partly in smem
  v.push_back({P, small(Cell::ReLU, 3, 2048)});  // warp rows, weights partly in smem (BB = 3)
  return v;
}

// The seed every case derives its inputs from; PRNN_TEST_SEED reproduces a run.
std::uint64_t base_seed() {
  static const std::uint64_t seed = test::fresh_seed();
  return seed;
}

std::uint64_t seed_of(const RnnCase& c) {
  return base_seed() ^ std::hash<std::string>{}(c.name());
}

// The reference results of the selected cases, computed in parallel on first use.
const RnnData& reference_of(const RnnCase& c) {
  static std::map<std::string, std::shared_future<RnnData>> bank = [] {
    const std::set<std::string> selected = test::selected_test_names();
    auto all = cases();
    std::sort(all.begin(), all.end(), [](const RnnCase& a, const RnnCase& b) {
      return a.reference_cost() > b.reference_cost();
    });
    // The problems of the selected MatchesReference cases (every variant of gpu_cases()).
    std::set<std::string> wanted;
    for (const GpuCase& g : gpu_cases())
      if (selected.count("MatchesReference/" + g.name()) != 0) wanted.insert(g.c.name());
    std::map<std::string, std::shared_future<RnnData>> m;
    for (const RnnCase& rc : all) {
      if (wanted.count(rc.name()) == 0) continue;
      const std::uint64_t seed = seed_of(rc);
      m.emplace(rc.name(),
                std::async(std::launch::async, [rc, seed] { return test::make_rnn_data(rc, seed); })
                    .share());
    }
    return m;
  }();
  auto it = bank.find(c.name());
  if (it == bank.end())  // not in the selection (a name the filter did not list): compute now
    it = bank.emplace(c.name(), std::async(std::launch::deferred, [c] {
                                  return test::make_rnn_data(c, seed_of(c));
                                }).share())
             .first;
  return it->second.get();
}

// A device tensor of n elements of `dtype`.
struct DevTensor {
  DeviceBuffer buf;
  std::size_t n = 0;
  DType dtype = DType::F32;
  TensorView view(const Shape& shape) const {
    return n == 0 ? TensorView() : TensorView(buf.data(), dtype, shape, Device::cuda(0));
  }
};

DevTensor poisoned(std::size_t n, DType dtype = DType::F32) {
  DevTensor t{DeviceBuffer(std::max<std::size_t>(n, 1) * size_of(dtype)), n, dtype};
  t.buf.fill_bytes(0xFF);
  return t;
}

// v (already representable in dtype) on the device in dtype.
DevTensor upload(const std::vector<double>& v, DType dtype = DType::F32) {
  DevTensor t = poisoned(v.size(), dtype);
  std::vector<std::byte> bits(v.size() * size_of(dtype));
  convert(v.data(), DType::F64, bits.data(), dtype, v.size());
  t.buf.copy_from_host(bits.data(), bits.size());
  return t;
}

// t's values as floats (exact for f32, f16 and bf16).
std::vector<float> download(const DevTensor& t) {
  std::vector<std::byte> bits(t.n * size_of(t.dtype));
  t.buf.copy_to_host(bits.data(), bits.size());
  std::vector<float> f(t.n);
  convert(bits.data(), t.dtype, f.data(), DType::F32, t.n);
  return f;
}

// Checks a relative error against the fp32 tolerance and records it (--gtest_output shows it).
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what, std::size_t begin = 0, std::size_t end = SIZE_MAX) {
  end = std::min(end, want.size());
  ASSERT_EQ(got.size(), want.size()) << what;
  const double err = test::rel_error(got.data() + begin, want.data() + begin, end - begin);
  char text[32];
  std::snprintf(text, sizeof(text), "%.3e", err);
  ::testing::Test::RecordProperty("err_" + what, text);
  // An output of a few elements (H = B = 1: dh0 is one number, a sum of G cancelling terms,
  // each through fp32 exp/tanh) has a relative error the cancellation amplifies: 1e-4 there.
  constexpr std::size_t kTinyOutput = 16;
  const double tol = end - begin < kTinyOutput ? std::max(g_tol, 1e-4) : g_tol;
  EXPECT_LE(err, tol) << what;
}

// A parameter block of fewer than kMinBlock elements is a handful of sums over T·B terms, each
// term exact to fp32 but the sum open to cancellation (H = 1: dW_hh is one number), so its own
// relative error says little. Such a block is held to the same 1e-5 against the norm of its
// whole layer direction's gradient (W_ih, W_hh, b_ih, b_hh together): a normwise check.
constexpr std::size_t kMinBlock = 16;

void expect_close_within(const std::vector<float>& got, const std::vector<double>& want,
                         const std::string& what, std::size_t begin, std::size_t end,
                         double scale) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = begin; i < end; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += want[i] * want[i];
  }
  // An exact match is error 0 even where the whole gradient is 0 (relu data can leave a layer
  // direction without a single active unit); any difference from a zero gradient fails.
  const double denom = std::max(std::sqrt(norm), scale);
  const double err = diff == 0.0 ? 0.0 : denom > 0.0 ? std::sqrt(diff) / denom : HUGE_VAL;
  EXPECT_TRUE(err <= g_tol) << what << ": error " << err << " against the layer direction's "
                              << "gradient norm " << scale;
}

// The outputs of one run (cn, dc0: LSTM with states only, else empty).
struct Outputs {
  DevTensor y, hn, cn, dx, dh0, dc0, dparams;
  std::vector<const DevTensor*> all() const { return {&y, &hn, &cn, &dx, &dh0, &dc0, &dparams}; }
};

Outputs fresh_outputs(const RnnCase& c) {
  const std::size_t states = c.with_state ? c.state_size() : 0;
  const std::size_t cells = has_cell_state(c.cell) ? states : 0;
  const DType t = c.dtype;
  return {poisoned(c.y_size(), t), poisoned(states, t), poisoned(cells, t),
          poisoned(c.x_size(), t), poisoned(states, t), poisoned(cells, t),
          poisoned(c.param_size(), t)};
}

void poison(Outputs& o) {
  for (DevTensor* t : {&o.y, &o.hn, &o.cn, &o.dx, &o.dh0, &o.dc0, &o.dparams})
    t->buf.fill_bytes(0xFF);
}

// The inputs of one case on the device (c0, dcn empty unless LSTM with states).
struct Inputs {
  DevTensor x, params, h0, c0, dy, dhn, dcn;
};

Inputs upload_inputs(const RnnData& s, DType t) {
  return {upload(s.x, t),  upload(s.params, t), upload(s.h0, t), upload(s.c0, t),
          upload(s.dy, t), upload(s.dhn, t),    upload(s.dcn, t)};
}

// forward, backward_data, backward_weights of `rnn` on `in` into `o`.
void run_all(Rnn& rnn, const RnnCase& c, const Inputs& in, Outputs& o) {
  const Shape xs = c.x_shape(), ys = c.y_shape(), ss = c.state_shape(), ps = c.param_shape();
  rnn.forward(in.x.view(xs), in.params.view(ps), in.h0.view(ss), in.c0.view(ss), o.y.view(ys),
              o.hn.view(ss), o.cn.view(ss), nullptr, c.lengths);
  rnn.backward_data(in.params.view(ps), in.dy.view(ys), in.dhn.view(ss), in.dcn.view(ss),
                    o.dx.view(xs), o.dh0.view(ss), o.dc0.view(ss));
  rnn.backward_weights(in.x.view(xs), in.h0.view(ss), in.c0.view(ss), o.dparams.view(ps));
}

class RnnGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(RnnGpu, MatchesReference) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  SCOPED_TRACE("PRNN_TEST_SEED=" + std::to_string(base_seed()));
  const RnnCase& c = GetParam().c;
  const RnnData& s = reference_of(c);

  const EnvScope tensor_cores("PRNN_PERSISTENT_TENSOR_CORES", GetParam().tensor_cores.c_str());
  const EnvScope barrier("PRNN_PERSISTENT_FINISH_BARRIER", GetParam().finish_barrier.c_str());
  const EnvScope graphs("PRNN_PERSISTENT_GRAPHS", GetParam().graphs.c_str());
  const EnvScope warp_rows("PRNN_PERSISTENT_WARP_ROWS", GetParam().warp_rows.c_str());
  const EnvScope input("PRNN_PERSISTENT_INPUT_PROJECTION", GetParam().input_projection.c_str());
  Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0), GetParam().algo);
  ASSERT_EQ(rnn.algo(), GetParam().algo) << rnn.reason();
  const Inputs in = upload_inputs(s, c.dtype);
  const ToleranceScope tolerance(tolerance_of(c));

  auto run = [&](Outputs& o) {
    run_all(rnn, c, in, o);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    rnn.check();
  };

  Outputs first = fresh_outputs(c);
  run(first);
  expect_close(download(first.y), s.y, "y");
  expect_close(download(first.dx), s.dx, "dx");
  if (c.with_state) {
    expect_close(download(first.hn), s.hn, "hn");
    expect_close(download(first.dh0), s.dh0, "dh0");
  }
  if (c.with_state && has_cell_state(c.cell)) {
    expect_close(download(first.cn), s.cn, "cn");
    expect_close(download(first.dc0), s.dc0, "dc0");
  }
  const auto dparams = download(first.dparams);
  const std::vector<test::ParamBlock> blocks = test::param_blocks(c);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const test::ParamBlock& b = blocks[i];
    if (b.end - b.begin >= kMinBlock) {
      expect_close(dparams, s.dparams, "d" + b.name, b.begin, b.end);
      continue;
    }
    double layer = 0.0;  // blocks come four per layer direction: W_ih, W_hh, b_ih, b_hh
    for (std::size_t j = i / 4 * 4; j < i / 4 * 4 + 4; ++j)
      for (std::size_t e = blocks[j].begin; e < blocks[j].end; ++e)
        layer += s.dparams[e] * s.dparams[e];
    expect_close_within(dparams, s.dparams, "d" + b.name, b.begin, b.end, std::sqrt(layer));
  }

  // Replay (same pointers) and re-capture (new output buffers): bit for bit the same. Not under
  // compute-sanitizer (scripts/sanitize.sh sets PRNN_TEST_SANITIZER): the replays run the same
  // kernels on the same shared-memory accesses again, and gpu-check runs every Sanitize/ case
  // unsanitized, replays included.
  if (const char* tool = std::getenv("PRNN_TEST_SANITIZER"); tool != nullptr && *tool != '\0')
    return;
  std::vector<std::vector<float>> want;
  for (const DevTensor* t : first.all()) want.push_back(download(*t));
  poison(first);
  run(first);
  Outputs other = fresh_outputs(c);
  run(other);
  for (const Outputs* o : {&first, &other}) {
    const char* what = o == &first ? "same pointers again" : "other output buffers";
    std::size_t i = 0;
    for (const DevTensor* t : o->all())
      EXPECT_TRUE(download(*t) == want[i++]) << what << ": output " << i - 1 << " differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RnnGpu, ::testing::ValuesIn(gpu_cases()), name_of);
INSTANTIATE_TEST_SUITE_P(Sanitize, RnnGpu, ::testing::ValuesIn(sanitize_cases()), name_of);

// The kernel a pass of tiling t runs (persistent::pass_kernel), told apart further where the
// kernel has forms of its own: tensor cores with part of W_hh in shared memory, packed 16-bit FMA
// staged weights, the FMA direct finishers' barrier (`barrier`: as the layer sets it).
std::string kernel_of(const persistent::Tiling& t, bool forward, bool barrier) {
  using namespace persistent;
  const PassKernel k = pass_kernel(t, forward);
  std::string name = to_string(k);
  if (k == PassKernel::TensorCores && kTensorCoreShapes[t.tensor_core].smem_tiles > 0)
    name += ", W_hh partly in smem";
  if (k == PassKernel::WarpRows && kWarpRowsShapes[t.warp_rows].smem_slots > 0)
    name += ", weights partly in smem";
  if (k == PassKernel::FmaStaged && t.storage != DType::F32) name += ", packed";
  if (k == PassKernel::FmaDirect && barrier) name += ", finishers' barrier";
  if (k == PassKernel::GatedWarpRows &&
      (forward ? t.gated_warp_rows_mma : t.gated_warp_rows_backward_mma))
    name += ", tensor cores";
  return name;
}

// Every persistent kernel, in both passes, is among the sanitizer cases' picks on this GPU, with
// each case's knobs read as the layer reads them (a GPU with other SM counts may tile the cases
// otherwise: then this fails, and the cases need sizes for it).
TEST(RnnGpuSanitize, CasesCoverEveryKernel) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const int sms = device_info(0).sm_count;
  std::set<std::string> seen;
  for (const GpuCase& g : sanitize_cases()) {
    const EnvScope tensor_cores("PRNN_PERSISTENT_TENSOR_CORES", g.tensor_cores.c_str());
    const EnvScope barrier("PRNN_PERSISTENT_FINISH_BARRIER", g.finish_barrier.c_str());
    const EnvScope warp_rows("PRNN_PERSISTENT_WARP_ROWS", g.warp_rows.c_str());
    const gemm_rnn::PersistentKnobs knobs = gemm_rnn::PersistentKnobs::from_environment();
    const persistent::Tiling t = persistent::tile(gate_count(g.c.cell), g.c.H, g.c.B, sms,
                                                  g.c.dtype, knobs.tensor_cores, knobs.warp_rows);
    ASSERT_TRUE(t.runs()) << g.name() << ": " << t.reason;
    const bool finish_barrier =
        knobs.finish_barrier >= 0 ? knobs.finish_barrier != 0 : t.finish_barrier;
    for (const bool forward : {true, false})
      seen.insert((forward ? "forward: " : "backward: ") + kernel_of(t, forward, finish_barrier));
  }
  std::set<std::string> every;
  for (const char* k : {"warp rows", "warp rows, weights partly in smem", "gated warp rows",
                        "tensor cores", "tensor cores, W_hh partly in smem", "FMA staged",
                        "FMA staged, packed", "FMA direct", "FMA direct, finishers' barrier"})
    for (const char* pass : {"forward: ", "backward: "}) every.insert(std::string(pass) + k);
  every.insert("forward: gated warp rows, tensor cores");
  every.insert("backward: gated warp rows, tensor cores");
  EXPECT_EQ(seen, every);
}

// The issue grid, one layer with states: Persistent against GemmPerStep on the same inputs.
struct GridCase {
  Cell cell;
  std::int64_t H, B, T;
};

std::vector<GridCase> grid() {
  std::vector<GridCase> v;
  for (Cell cell : {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh})
    for (std::int64_t H : {1, 32, 1000, 1152, 1537, 2048})
      for (std::int64_t B : {1, 3, 4, 5, 7, 16})
        for (std::int64_t T : {1, 2, 333}) v.push_back({cell, H, B, T});
  for (Cell cell : {Cell::GRU, Cell::LSTM})
    for (std::int64_t H : {1, 32, 515, 1000, 1024, 1152})
      for (std::int64_t B : {1, 3, 4, 5, 7, 16})
        for (std::int64_t T : {1, 2, 333}) v.push_back({cell, H, B, T});
  return v;
}

class RnnGrid : public ::testing::TestWithParam<GridCase> {};

TEST_P(RnnGrid, PersistentMatchesGemmPerStep) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  SCOPED_TRACE("PRNN_TEST_SEED=" + std::to_string(base_seed()));
  const GridCase& g = GetParam();
  const RnnCase c{g.cell, g.T, g.B, 17, g.H, 1, false, true};
  const RnnData s = test::make_rnn_inputs(c, seed_of(c));
  const Inputs in = upload_inputs(s, c.dtype);
  std::vector<std::vector<float>> got[2];
  int k = 0;
  for (RnnAlgo algo : {RnnAlgo::GemmPerStep, RnnAlgo::Persistent}) {
    Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0), algo);
    Outputs o = fresh_outputs(c);
    run_all(rnn, c, in, o);
    rnn.check();
    for (const DevTensor* t : o.all()) got[k].push_back(download(*t));
    ++k;
  }
  const char* names[] = {"y", "hn", "cn", "dx", "dh0", "dc0", "dparams"};
  for (std::size_t i = 0; i < got[0].size(); ++i) {
    const std::vector<double> want(got[0][i].begin(), got[0][i].end());
    const double err = test::rel_error(got[1][i].data(), want.data(), want.size());
    EXPECT_LE(err, 2e-5) << names[i];  // each within 1e-5 of the reference
  }
}

std::string grid_name(const ::testing::TestParamInfo<GridCase>& info) {
  const GridCase& g = info.param;
  return std::string(to_string(g.cell)) + "_H" + std::to_string(g.H) + "_B" + std::to_string(g.B) +
         "_T" + std::to_string(g.T);
}

INSTANTIATE_TEST_SUITE_P(Issue, RnnGrid, ::testing::ValuesIn(grid()), grid_name);

// A CTA stalled past the wait bound: the others time out, every CTA leaves, check() throws
// RuntimeError, for the forward and then the backward data; a new Rnn on the same GPU then runs
// correctly. Three times for the warp-rows kernel (tanh, fp32: B = 3, one batch element per warp;
// B = 6 and 11 at H = 1152, two and three), once for the FMA kernels (B = 9 at H = 600, which no
// three-per-warp shape holds), once for the gated warp-rows kernels in both passes (LSTM, fp32:
// H = 1152, B = 4, the backward polling in two rounds) and once for the tensor-core kernels
// (LSTM, bf16: H = 1152 B = 4, whose forward is on gated warp rows; H = 2048, the largest shape).
TEST(RnnGpuSafety, StalledCtaBecomesRuntimeError) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const RnnCase cases[] = {{Cell::Tanh, 64, 3, 5, 600, 1, false, true},
                           {Cell::Tanh, 64, 6, 5, 1152, 1, false, true},
                           {Cell::Tanh, 64, 11, 5, 1152, 1, false, true},
                           {Cell::Tanh, 64, 9, 5, 600, 1, false, true},
                           {Cell::LSTM, 64, 4, 5, 1152, 1, false, true},
                           {Cell::LSTM, 64, 4, 5, 1152, 1, false, true, DType::BF16},
                           {Cell::LSTM, 16, 4, 5, 2048, 1, false, true, DType::BF16}};
  // The forward references (the only ones checked below), computed in parallel up front.
  std::vector<std::future<RnnData>> references;
  for (const RnnCase& c : cases)
    references.push_back(std::async(std::launch::async, [&c] {
      return test::make_rnn_data(c, base_seed() + 2, /*gradients=*/false);
    }));
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const RnnCase& c = cases[i];
    SCOPED_TRACE(c.name());
    const RnnData s = references[i].get();
    const DevTensor x = upload(s.x, c.dtype), params = upload(s.params, c.dtype),
                    h0 = upload(s.h0, c.dtype), c0 = upload(s.c0, c.dtype);  // c0: LSTM only
    {
      const EnvScope timeout("PRNN_PERSISTENT_TIMEOUT_MS", "50");
      const EnvScope stall("PRNN_PERSISTENT_STALL", "1:5:400");
      Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0), RnnAlgo::Persistent);
      DevTensor y = poisoned(c.y_size(), c.dtype);
      rnn.forward(x.view(c.x_shape()), params.view(c.param_shape()), h0.view(c.state_shape()),
                  c0.view(c.state_shape()), y.view(c.y_shape()), {}, {});
      try {
        rnn.check();
        ADD_FAILURE() << "expected RuntimeError";
      } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find("50 ms"), std::string::npos) << e.what();
      }
      const DevTensor dy = upload(s.dy, c.dtype);
      DevTensor dx = poisoned(c.x_size(), c.dtype);
      rnn.backward_data(params.view(c.param_shape()), dy.view(c.y_shape()), {}, {},
                        dx.view(c.x_shape()), {}, {});
      try {
        rnn.check();
        ADD_FAILURE() << "expected RuntimeError from the backward";
      } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find("50 ms"), std::string::npos) << e.what();
      }
    }
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0), RnnAlgo::Persistent);
    DevTensor y = poisoned(c.y_size(), c.dtype), hn = poisoned(c.state_size(), c.dtype);
    rnn.forward(x.view(c.x_shape()), params.view(c.param_shape()), h0.view(c.state_shape()),
                c0.view(c.state_shape()), y.view(c.y_shape()), hn.view(c.state_shape()), {});
    rnn.check();
    const ToleranceScope tolerance(tolerance_of(c));
    expect_close(download(y), s.y, "y");
    expect_close(download(hn), s.hn, "hn");
  }
}

// A malformed knob is an InvalidArgument naming it.
TEST(RnnGpuSafety, MalformedKnobIsInvalidArgument) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const RnnCase c{Cell::ReLU, 4, 2, 3, 8, 1, false, true};
  const std::pair<const char*, const char*> knobs[] = {
      {"PRNN_PERSISTENT_STALL", "1:x"},          {"PRNN_PERSISTENT_TENSOR_CORES", "2"},
      {"PRNN_PERSISTENT_TENSOR_CORES", "fwd"},   {"PRNN_PERSISTENT_FINISH_BARRIER", "yes"},
      {"PRNN_PERSISTENT_GRAPHS", "on"},          {"PRNN_PERSISTENT_WARP_ROWS", "true"},
      {"PRNN_PERSISTENT_GATED_MMA", "backward"}, {"PRNN_PERSISTENT_INPUT_PROJECTION", "2"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", "0"},  {"PRNN_PERSISTENT_EXCHANGE_PLACES", "65"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", "x"}};
  for (const auto& [name, value] : knobs) {
    const EnvScope knob(name, value);
    try {
      Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0), RnnAlgo::Persistent);
      ADD_FAILURE() << "expected InvalidArgument for " << name << "=" << value;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// dx and hn are optional: without them y and dparams are unchanged.
TEST(RnnGpuOptional, NoDxNoHn) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const RnnCase c{Cell::Tanh, 9, 3, 5, 17, 2, true, true};
  const RnnData s = test::make_rnn_data(c, base_seed());
  Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0), RnnAlgo::GemmPerStep);
  EXPECT_EQ(rnn.reason(), "requested");
  const DevTensor x = upload(s.x), params = upload(s.params), h0 = upload(s.h0), dy = upload(s.dy);
  DevTensor y = poisoned(c.y_size()), dparams = poisoned(c.param_size());
  rnn.forward(x.view(c.x_shape()), params.view(c.param_shape()), h0.view(c.state_shape()), {},
              y.view(c.y_shape()), {}, {});
  // dhn absent: the reference's dhn is nonzero, so compare dparams to a reference without it.
  std::vector<double> dparams_want(c.param_size());
  reference::rnn_backward<double>(c.desc(), c.T, c.B, s.x.data(), s.h0.data(), nullptr,
                                  s.params.data(), s.dy.data(), nullptr, nullptr, nullptr,
                                  nullptr, nullptr, dparams_want.data());
  rnn.backward_data(params.view(c.param_shape()), dy.view(c.y_shape()), {}, {}, {}, {}, {});
  rnn.backward_weights(x.view(c.x_shape()), h0.view(c.state_shape()), {},
                       dparams.view(c.param_shape()));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_close(download(y), s.y, "y");
  expect_close(download(dparams), dparams_want, "dparams");
}

// On a non-default stream, the graph runs in that stream's order.
TEST(RnnGpuStream, RunsOnTheGivenStream) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const RnnCase c{Cell::ReLU, 17, 2, 3, 8, 1, false, true};
  const RnnData s = test::make_rnn_data(c, base_seed() + 1);
  Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const DevTensor x = upload(s.x), params = upload(s.params), h0 = upload(s.h0);
  DevTensor y = poisoned(c.y_size()), hn = poisoned(c.state_size());
  rnn.forward(x.view(c.x_shape()), params.view(c.param_shape()), h0.view(c.state_shape()), {},
              y.view(c.y_shape()), hn.view(c.state_shape()), {}, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  expect_close(download(y), s.y, "y");
  expect_close(download(hn), s.hn, "hn");
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(RnnGpuChoice, AutoPicksPersistentAndSaysWhy) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  RnnDesc d;
  d.cell = Cell::ReLU;
  d.input_size = 3;
  d.hidden_size = 4;
  EXPECT_EQ(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::GemmPerStep), "");
  EXPECT_EQ(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), "");
  EXPECT_EQ(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Auto), "");
  {
    Rnn rnn(d, 5, 2, Device::cuda(0));
    EXPECT_EQ(rnn.algo(), RnnAlgo::Persistent);
    EXPECT_NE(rnn.reason().find("persistent"), std::string::npos) << rnn.reason();
    // Reserve: pre-activations, their gradients and the outputs, [5, 2, 4] f32 each, and the
    // outputs' two slots for h0 (GemmRnn::layer_out), [2, 4] each.
    EXPECT_EQ(rnn.reserve_bytes(), (3u * 5 * 2 * 4 + 2 * 2 * 4) * sizeof(float));
    EXPECT_GT(rnn.workspace_bytes(), 0u);
  }
  // Beyond what the registers hold: Auto falls back to GemmPerStep and says why.
  d.hidden_size = 8192;
  const std::string why = Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent);
  EXPECT_NE(why.find("H=8192"), std::string::npos) << why;
  {
    Rnn rnn(d, 5, 2, Device::cuda(0));
    EXPECT_EQ(rnn.algo(), RnnAlgo::GemmPerStep);
    EXPECT_NE(rnn.reason().find(why), std::string::npos) << rnn.reason();
  }
  EXPECT_THROW(Rnn(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), Unsupported);
  // GRU and LSTM: persistent where the gate rows fit, else GemmPerStep with the reason.
  d.hidden_size = 4;
  for (Cell cell : {Cell::GRU, Cell::LSTM}) {
    d.cell = cell;
    EXPECT_EQ(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), "");
    Rnn r(d, 5, 2, Device::cuda(0));
    EXPECT_EQ(r.algo(), RnnAlgo::Persistent) << r.reason();
  }
  // fp32 LSTM H = 1024 at B = 32: the persistent kernels can run it, but Auto takes the per-step
  // GEMMs, which train it faster there (persistent::auto_prefers_gemm_per_step).
  d.cell = Cell::LSTM;
  d.hidden_size = 1024;
  EXPECT_EQ(Rnn::can_implement(d, 5, 32, Device::cuda(0), RnnAlgo::Persistent), "");
  {
    Rnn r(d, 5, 32, Device::cuda(0));
    EXPECT_EQ(r.algo(), RnnAlgo::GemmPerStep) << r.reason();
    EXPECT_NE(r.reason().find("faster here than persistent"), std::string::npos) << r.reason();
    EXPECT_EQ(Rnn(d, 5, 32, Device::cuda(0), RnnAlgo::Persistent).algo(), RnnAlgo::Persistent);
  }
  d.hidden_size = 1200;  // beyond 9 units on each of 132 SMs: more than the registers hold
  const std::string lstm_why = Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent);
  EXPECT_NE(lstm_why.find("H=1200"), std::string::npos) << lstm_why;
  Rnn lstm(d, 5, 2, Device::cuda(0));
  EXPECT_EQ(lstm.algo(), RnnAlgo::GemmPerStep);
  EXPECT_NE(lstm.reason().find(lstm_why), std::string::npos) << lstm.reason();
  // 16-bit LSTM H = 2048: on tensor cores alone (part of W_hh in shared memory), at any batch up
  // to the backward's bound; the knobs that keep a pass off the tensor cores refuse it.
  d.weight_dtype = DType::BF16;
  d.hidden_size = 2048;
  {
    EXPECT_EQ(Rnn::can_implement(d, 5, 2, Device::cuda(0), RnnAlgo::Persistent), "");
    Rnn r(d, 5, 2, Device::cuda(0));
    EXPECT_EQ(r.algo(), RnnAlgo::Persistent) << r.reason();
  }
  const std::string batch_why = Rnn::can_implement(d, 5, 33, Device::cuda(0), RnnAlgo::Persistent);
  EXPECT_NE(batch_why.find("batch <= 32"), std::string::npos) << batch_why;
  EXPECT_THROW(Rnn(d, 5, 33, Device::cuda(0), RnnAlgo::Persistent), Unsupported);
  {
    const EnvScope off("PRNN_PERSISTENT_TENSOR_CORES", "0");
    const std::string why0 = Rnn::can_implement(d, 5, 4, Device::cuda(0), RnnAlgo::Persistent);
    EXPECT_NE(why0.find("PRNN_PERSISTENT_TENSOR_CORES=0"), std::string::npos) << why0;
    Rnn r(d, 5, 4, Device::cuda(0));
    EXPECT_EQ(r.algo(), RnnAlgo::GemmPerStep);
  }
  {
    const EnvScope forward("PRNN_PERSISTENT_TENSOR_CORES", "forward");
    const std::string whyf = Rnn::can_implement(d, 5, 4, Device::cuda(0), RnnAlgo::Persistent);
    EXPECT_NE(whyf.find("backward turned off"), std::string::npos) << whyf;
  }
}

// Which layers' forward computes W_ih x in the kernel: vanilla layers on the warp-rows kernel
// with I % 4 == 0 whose W_ih rows fit the shared memory beside the records; the GEMM elsewhere.
TEST(RnnGpuInputProjection, InTheKernelWhereTheWarpRowsForwardRuns) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const int sms = device_info(0).sm_count;
  auto fuses = [&](Cell cell, std::int64_t H, std::int64_t B, std::int64_t I) {
    const persistent::Tiling t = persistent::tile(gate_count(cell), H, B, sms, DType::F32);
    return persistent::fuses_input_projection(t, I, gemm_rnn::Activation::ReLU, 0);
  };
  EXPECT_TRUE(fuses(Cell::ReLU, 1152, 4, 1152));
  EXPECT_TRUE(fuses(Cell::ReLU, 1152, 1, 32));
  EXPECT_TRUE(fuses(Cell::ReLU, 1152, 8, 1152));      // two batch elements per warp
  EXPECT_TRUE(fuses(Cell::ReLU, 1000, 11, 256));      // three batch elements per warp
  EXPECT_FALSE(fuses(Cell::ReLU, 1152, 11, 1152));    // records, W_ih and x outgrow smem
  EXPECT_FALSE(fuses(Cell::ReLU, 1152, 4, 30));       // I % 4 != 0
  EXPECT_FALSE(fuses(Cell::ReLU, 1152, 4, 1 << 16));  // W_ih rows outgrow shared memory
  EXPECT_FALSE(fuses(Cell::ReLU, 2048, 4, 2048));     // the FMA direct kernel
  EXPECT_FALSE(fuses(Cell::LSTM, 1024, 4, 1024));     // gated cells
}

// The same layer given x 16-byte aligned (the projection in the kernel, forced at T = 50) and one
// float past a 16-byte boundary (the input GEMM): both equal to the reference, from one Rnn.
TEST(RnnGpuInputProjection, AlignedAndUnalignedInputMatchReference) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  SCOPED_TRACE("PRNN_TEST_SEED=" + std::to_string(base_seed()));
  const EnvScope in_kernel("PRNN_PERSISTENT_INPUT_PROJECTION", "1");
  const RnnCase c{Cell::ReLU, 50, 4, 32, 1152, 1, false, true};
  const RnnData& s = reference_of(c);
  const Inputs in = upload_inputs(s, c.dtype);
  DeviceBuffer shifted((s.x.size() + 1) * sizeof(float));
  float* x1 = static_cast<float*>(shifted.data()) + 1;
  ASSERT_EQ(cudaMemcpy(x1, in.x.buf.data(), s.x.size() * sizeof(float), cudaMemcpyDeviceToDevice),
            cudaSuccess);
  const Shape xs = c.x_shape(), ys = c.y_shape(), ss = c.state_shape(), ps = c.param_shape();
  Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0), RnnAlgo::Persistent);
  for (const bool aligned : {false, true, false}) {
    SCOPED_TRACE(aligned ? "x aligned" : "x one float past 16 bytes");
    const TensorView x = aligned ? in.x.view(xs) : TensorView(x1, DType::F32, xs, Device::cuda(0));
    Outputs o = fresh_outputs(c);
    rnn.forward(x, in.params.view(ps), in.h0.view(ss), in.c0.view(ss), o.y.view(ys),
                o.hn.view(ss), o.cn.view(ss), nullptr, c.lengths);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    rnn.check();
    expect_close(download(o.y), s.y, "y");
    expect_close(download(o.hn), s.hn, "hn");
  }
}

TEST(RnnGpuErrors, BackwardBeforeForwardIsAnError) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const RnnCase c{Cell::Tanh, 5, 2, 3, 4, 1, false, true};
  Rnn rnn(c.desc(), c.T, c.B, Device::cuda(0));
  DevTensor params = poisoned(c.param_size()), dy = poisoned(c.y_size()), x = poisoned(c.x_size());
  DevTensor dparams = poisoned(c.param_size());
  EXPECT_THROW(rnn.backward_data(params.view(c.param_shape()), dy.view(c.y_shape()), {}, {}, {},
                                 {}, {}),
               InvalidArgument);
  EXPECT_THROW(rnn.backward_weights(x.view(c.x_shape()), {}, {}, dparams.view(c.param_shape())),
               InvalidArgument);
  // A host tensor given to a GPU plan names the argument and both devices.
  std::vector<float> host_x(c.x_size());
  DevTensor y = poisoned(c.y_size());
  try {
    rnn.forward(TensorView::of(host_x.data(), c.x_shape()), params.view(c.param_shape()), {}, {},
                y.view(c.y_shape()), {}, {});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("x"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prnn
