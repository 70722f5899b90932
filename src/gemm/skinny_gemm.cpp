// The skinny GEMM's checks, its split, and the dispatch of the all-steps GEMMs (contract in
// gemm/skinny_gemm.h; the kernel in skinny_gemm.cu).
#if PRNN_WITH_CUDA

#include "gemm/skinny_gemm.h"

#include <algorithm>
#include <climits>

#include "core/check.h"
#include "core/cublas.h"
#include "core/cuda_check.h"
#include "core/knob.h"
#include "gemm/skinny_kernel.h"
#include "prnn/device.h"

namespace prnn {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// CTAs per cluster: the most (≤ 8, at least a chunk of k each) whose clusters all fit on the
// device at once, one CTA per tile and rank, so that the launch is a single wave; 1 when the
// tiles alone fill the device.
int split_of(const SkinnyGemmArgs& a, int tile_rows, int sm_count) {
  const std::int64_t tiles = ceil_div(a.N, kSkinnyTileCols) * ceil_div(a.M, tile_rows);
  const std::int64_t by_k = std::max<std::int64_t>(1, ceil_div(a.K, kSkinnyChunk));
  for (std::int64_t s = std::min<std::int64_t>(kSkinnyMaxSplit, by_k); s >= 2; --s) {
    if (tiles * s > sm_count) continue;
    int clusters = 0;
    PRNN_CUDA_CHECK(
        skinny_max_active_clusters(tile_rows, a.b_transposed, static_cast<int>(s), &clusters));
    if (clusters >= tiles) return static_cast<int>(s);
  }
  return 1;
}

bool aligned16(const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Empty when the kernel can run `a` on the device `d` describes; otherwise why not.
std::string why_not(const SkinnyGemmArgs& a, const DeviceInfo& d) {
  if (!d.cluster_launch || d.cc_major < 9)
    return fmt::format("the skinny GEMM needs thread-block clusters (compute capability 9.0 or "
                       "later); device {} ({}) has compute capability {}.{}",
                       d.index, d.name, d.cc_major, d.cc_minor);
  if (a.M <= 0 || a.N <= 0 || a.K <= 0 || a.M > INT32_MAX || a.N > INT32_MAX || a.K > INT32_MAX)
    return fmt::format("M, N, K must be in [1, 2^31): got {}, {}, {}", a.M, a.N, a.K);
  constexpr std::int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z
  if (ceil_div(a.N, kSkinnyTileCols) > kMaxGridYZ ||
      ceil_div(a.M, skinny_tile_rows(a.M)) > kMaxGridYZ)
    return fmt::format("M = {}, N = {} need more than 65535 tiles of {} rows or {} columns (the "
                       "launch's grid y and z)",
                       a.M, a.N, skinny_tile_rows(a.M), kSkinnyTileCols);
  if (a.A == nullptr || a.B == nullptr || a.C == nullptr) return "A, B and C must not be null";
  const std::int64_t b_row = a.b_transposed ? a.K : a.N;
  if (a.lda < a.K || a.ldb < b_row || a.ldc < a.N)
    return fmt::format("row strides too short: lda {} (needs >= K = {}), ldb {} (needs >= {}), "
                       "ldc {} (needs >= N = {})",
                       a.lda, a.K, a.ldb, b_row, a.ldc, a.N);
  return {};
}

// The plan of a problem why_not accepted with tiles of `tile_rows`: `split` when given, else
// split_of's.
SkinnyPlan plan_with(const SkinnyGemmArgs& a, const DeviceInfo& d, int tile_rows,
                     std::optional<int> split) {
  SkinnyPlan plan;
  plan.tile_rows = tile_rows;
  plan.split = split.has_value() ? *split : split_of(a, plan.tile_rows, d.sm_count);
  plan.k_slice = ceil_div(ceil_div(a.K, plan.split), 4) * 4;
  plan.ctas = plan.split * ceil_div(a.N, kSkinnyTileCols) * ceil_div(a.M, plan.tile_rows);
  return plan;
}

// The plan of a problem why_not accepted. At M = 33..64 both 32- and 64-row tiles cover M in two
// row tiles or one: the one whose CTAs each do the fewest products (tile_rows × 64 × k_slice,
// after the split) wins, 64 rows on a tie. That picks 32 rows for ReLU H = 1152 (108 CTAs of
// 32 × 64 × 384 against 90 of 64 × 64 × 231: 13.6 → 12.3 µs, bench/gemm/NOTES.md, "32-row
// tiles") and 64 for the LSTM's K = 4096 (the same CTAs and work, and 64 rows reuse each k
// twice as often).
SkinnyPlan plan_of(const SkinnyGemmArgs& a, const DeviceInfo& d, std::optional<int> split) {
  const SkinnyPlan plan = plan_with(a, d, skinny_tile_rows(a.M), split);
  if (a.M <= 32 || a.M > 64) return plan;
  const SkinnyPlan narrow = plan_with(a, d, 32, split);
  return narrow.tile_rows * narrow.k_slice < plan.tile_rows * plan.k_slice ? narrow : plan;
}

void launch(const SkinnyGemmArgs& a, const SkinnyPlan& plan, cudaStream_t stream) {
  SkinnyParams p;
  p.A = a.A;
  p.B = a.B;
  p.C = a.C;
  p.lda = a.lda;
  p.ldb = a.ldb;
  p.ldc = a.ldc;
  p.M = static_cast<std::int32_t>(a.M);
  p.N = static_cast<std::int32_t>(a.N);
  p.K = static_cast<std::int32_t>(a.K);
  p.k_slice = static_cast<std::int32_t>(plan.k_slice);
  p.beta = a.beta;
  p.vector_copies = aligned16(a.A) && aligned16(a.B) && a.lda % 4 == 0 && a.ldb % 4 == 0;
  PRNN_CUDA_CHECK(skinny_launch(p, plan.tile_rows, a.b_transposed, plan.split, stream));
}

DeviceInfo current_device() {
  int device = 0;
  PRNN_CUDA_CHECK(cudaGetDevice(&device));
  return device_info(device);
}

}  // namespace

std::string skinny_gemm_can_implement(const SkinnyGemmArgs& a, int device) {
  return why_not(a, device_info(device));
}

SkinnyPlan skinny_plan(const SkinnyGemmArgs& a, int device, std::optional<int> split) {
  const DeviceInfo d = device_info(device);
  const std::string why = why_not(a, d);
  PRNN_EXPECT(why.empty(), "skinny_gemm: {}", why);
  PRNN_EXPECT(!split.has_value() || (*split >= 1 && *split <= kSkinnyMaxSplit),
              "skinny_gemm: split must be in [1, {}], got {}", kSkinnyMaxSplit, split.value_or(0));
  return plan_of(a, d, split);
}

void skinny_gemm(const SkinnyGemmArgs& a, cudaStream_t stream, std::optional<int> split) {
  int device = 0;
  PRNN_CUDA_CHECK(cudaGetDevice(&device));
  launch(a, skinny_plan(a, device, split), stream);
}

SkinnyChoice skinny_choice_from_environment() {
  const std::optional<bool> on = switch_knob("PRNN_SKINNY_GEMM");
  if (!on.has_value()) return SkinnyChoice::Auto;
  return *on ? SkinnyChoice::Always : SkinnyChoice::Never;
}

bool skinny_auto_takes(const SkinnyGemmArgs& a, const SkinnyPlan& plan) {
  if (a.b_transposed)
    return a.M >= kSkinnyAutoTransposedMinRows && a.M <= kSkinnyAutoTransposedMaxRows;
  return a.M <= kSkinnyAutoAnySliceRows ||
         (a.M <= kSkinnyAutoRows && plan.k_slice <= kSkinnyAutoSlice);
}

void rows_gemm(CublasHandle& h, SkinnyChoice choice, bool b_transposed, std::int64_t M,
               std::int64_t N, std::int64_t K, const float* A, std::int64_t lda, const float* B,
               std::int64_t ldb, float beta, float* C, std::int64_t ldc,
               std::optional<GemmMath> math) {
  const GemmMath effective = math.value_or(h.math());
  const bool candidate =
      choice == SkinnyChoice::Always ||
      (choice == SkinnyChoice::Auto && effective == GemmMath::Fp32 && M <= kSkinnyAutoRows);
  if (candidate) {
    const DeviceInfo d = current_device();
    const SkinnyGemmArgs a{M, N, K, b_transposed, A, lda, B, ldb, beta, C, ldc};
    if (why_not(a, d).empty()) {
      const SkinnyPlan plan = plan_of(a, d, std::nullopt);
      if (choice == SkinnyChoice::Always || skinny_auto_takes(a, plan)) {
        cudaStream_t stream = nullptr;
        PRNN_CUBLAS_CHECK(cublasGetStream(h.get(), &stream));
        launch(a, plan, stream);
        return;
      }
    }
  }
  gemm(h, false, b_transposed, M, N, K, A, lda, B, ldb, beta, C, ldc, math);
}

}  // namespace prnn

#endif  // PRNN_WITH_CUDA
