// GEMMs of few rows in fp32 (skinny_gemm.cu), and the one dispatch of the all-steps GEMMs of a
// persistent RNN call between them and cuBLAS (internal; needs CUDA).
//   C[M, N] = A[M, K] · op(B) + beta·C, row-major, fp32 products summed in fp32;
//   op(B) = Bᵀ with B stored [N, K] (b_transposed: the input projection X·W_ihᵀ) or B [K, N]
//   (d(in) = dP·W_ih, dh0 = dQ_0·W_hh).
// Why: at M = T·B ≤ 64 rows cuBLAS's fp32 kernels run far from both floors of the problem
// (bench/persistent/NOTES.md, "What the input GEMM costs": 11 µs for 64 × 1152 × 1152, whose
// FMAs take 1.4 µs on 132 SMs and whose B is 5.3 MB; a split-K kernel plus a reduction kernel,
// 15–27 µs per GEMM in a short call's profile). The skinny kernel splits K over the CTAs of a
// thread-block cluster and adds their partial tiles through distributed shared memory in a
// fixed order: one launch, no workspace, the same bits on every run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>

#include "prnn/dtype.h"

namespace prnn {

class CublasHandle;  // core/cublas.h

struct SkinnyGemmArgs {
  std::int64_t M = 0, N = 0, K = 0;  // > 0
  bool b_transposed = false;         // B is [N, K] (op(B) = Bᵀ), else [K, N]
  const float* A = nullptr;          // [M, K], row stride lda
  std::int64_t lda = 0;
  const float* B = nullptr;  // row stride ldb
  std::int64_t ldb = 0;
  float beta = 0.0f;  // 0: C is only written (it may hold anything, NaN included)
  float* C = nullptr;  // [M, N], row stride ldc; must not overlap A or B
  std::int64_t ldc = 0;
};

// Empty when the skinny kernel can run `a` on `device` (compute capability 9.0 or later, for the
// clusters; sizes below 2^31; strides at least the rows they hold); otherwise why not.
std::string skinny_gemm_can_implement(const SkinnyGemmArgs& a, int device);

// How the kernel runs `a` on `device`: tiles of tile_rows × 64 of C, each computed by a cluster
// of `split` CTAs over k slices of k_slice; ctas = split × tiles.
struct SkinnyPlan {
  int tile_rows = 0;
  int split = 0;
  std::int64_t k_slice = 0;
  std::int64_t ctas = 0;
};
// Throws InvalidArgument with the reason when skinny_gemm_can_implement does not return empty.
// `split`, when given (1..8, for labs), replaces the chosen one.
SkinnyPlan skinny_plan(const SkinnyGemmArgs& a, int device, std::optional<int> split = {});

// Enqueues the GEMM on `stream` (the current device's); throws InvalidArgument with the reason
// when skinny_gemm_can_implement does not return empty (`split` as in skinny_plan). Deterministic: the same bits for the
// same inputs on the same device.
void skinny_gemm(const SkinnyGemmArgs& a, cudaStream_t stream, std::optional<int> split = {});

// Which kernel the all-steps GEMMs of a persistent call take (PRNN_SKINNY_GEMM: unset Auto, 0
// Never, 1 Always; for A/B runs and the tests).
//   Auto    the skinny kernel where it measured faster than cuBLAS (H200,
//           bench/results/h200/skinny_gemm/), else cuBLAS: skinny_auto_takes under fp32 math;
//           TF32 math always takes cuBLAS (its tensor-core kernels were faster everywhere)
//   Never   cuBLAS
//   Always  the skinny kernel wherever it can run, else cuBLAS
enum class SkinnyChoice : std::uint8_t { Auto, Never, Always };
inline constexpr std::int64_t kSkinnyAutoRows = 64;
inline constexpr std::int64_t kSkinnyAutoAnySliceRows = 16;
inline constexpr std::int64_t kSkinnyAutoSlice = 256;
inline constexpr std::int64_t kSkinnyAutoTransposedMinRows = 9;
inline constexpr std::int64_t kSkinnyAutoTransposedMaxRows = 32;
// Auto's rule for fp32 math, `plan` being `a`'s:
//   B [K, N] (d(in), dh0): M <= kSkinnyAutoAnySliceRows, or M <= kSkinnyAutoRows with at most
//     kSkinnyAutoSlice k per CTA (cuBLAS's fp32 kernels for that layout took 11-23 µs at
//     M <= 64; at 17-64 rows a longer slice, as the LSTM's K = 4H, lost to them);
//   B [N, K] (the input projection): M = kSkinnyAutoTransposedMinRows..MaxRows, tiles of 16 or
//     32 rows (7.4 against 11.1 µs at 16 × 1152 × 1152, 9.3 against 10.7 at 32 rows; at M <= 8
//     cuBLAS was as fast or faster, and at 33..64 rows it was faster: 11.3 against 12.3).
bool skinny_auto_takes(const SkinnyGemmArgs& a, const SkinnyPlan& plan);
SkinnyChoice skinny_choice_from_environment();

// The dispatch: row-major C[M, N] = A[M, K] · op(B) + beta·C (A not transposed) by the skinny
// kernel or by prnn::gemm on `h` (its stream, its math or `math`). The skinny kernel computes in
// fp32 whatever `math` asks for (Always under TF32 math is for tests and labs).
void rows_gemm(CublasHandle& h, SkinnyChoice choice, bool b_transposed, std::int64_t M,
               std::int64_t N, std::int64_t K, const float* A, std::int64_t lda, const float* B,
               std::int64_t ldb, float beta, float* C, std::int64_t ldc,
               std::optional<GemmMath> math = std::nullopt);

}  // namespace prnn
