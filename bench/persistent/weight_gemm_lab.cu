// Weight-gradient GEMM lab (not part of the library; bench/persistent/NOTES.md, "Where a
// training step goes on the H200"): the GEMMs of gemm_rnn.cpp's backward_weights for one layer,
// row-major as the library stores them,
//   dW[GH, I] = dPᵀ · X      dP [TB, GH], X [TB, I] (TB = T·B rows; dW_ih, and dW_hh with the
//                            layer's outputs as X)
//   dW      += dP0ᵀ · h0     the first step's term of dW_hh, dP0 [B, GH], h0 [B, I]
//   db[GH]   = dPᵀ · 1       the bias sum
// timed as the library issues them and in the alternatives below:
//   main/sgemm-tf32          cublasSgemm with TF32 tensor-op math (the library's dW GEMMs)
//   main/lt-tf32-<i>         every cublasLt candidate for fast-TF32 compute (up to 16)
//   main/gemmex-bf16         dP and X in bf16, fp32 compute (what a 16-bit gradient GEMM would
//                            give; max_rel_diff shows its rounding)
//   h0/sgemm-pedantic-beta1  the h0 term after the main GEMM, on the handle's PEDANTIC math (as
//                            gemm_rnn.cpp issues it today)
//   h0/sgemm-tf32-beta1      the same on TF32 tensor-op math
//   h0+main/first            the h0 term first (beta 0), then the main GEMM with beta 1, both TF32
//   h0+main/folded           one TF32 GEMM over [h0; X] and [dP0; dP] stored contiguously
//   pair/two-sgemm-tf32      dW_ih and dW_hh of a layer with I = H as two TF32 GEMMs (the
//                            library's; the second GEMM's X another array of the same shape)
//   pair/batched-tf32        the same pair as one cublasSgemmBatched of 2 (twice the tiles a
//                            launch, so fewer idle SMs in the last wave)
//   bias/sgemv               cublasSgemv of dPᵀ · 1 (the library's)
//   bias/sgemm-tf32          the same as a TF32 GEMM with N = 1
// Each result's largest difference from the pedantic fp32 result of its kind, relative to that
// result's largest magnitude (max_rel_diff). Each time: a CUDA graph of 20 launches, replayed 7
// times after one warm-up, the median per launch (bench_timer.h's graph_median_us). Inputs are
// uniform in [-1, 1).
// Usage: prnn_weight_gemm_lab GH I TB B [GH I TB B ...] (default: the LSTM at H = 1152 B = 4,
// H = 1024 B = 16 and H = 2048 B = 4, T = 256).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench/bench_timer.h"
#include "blas_lab_common.cuh"

namespace {

__global__ void to_bf16(const float* in, __nv_bfloat16* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

struct Shape {
  int gh, i, tb, b;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  if ((argc - 1) % 4 != 0) {
    std::fprintf(stderr, "usage: prnn_weight_gemm_lab GH I TB B [GH I TB B ...]\n");
    return 1;
  }
  for (int a = 1; a + 3 < argc; a += 4)
    shapes.push_back({std::atoi(argv[a]), std::atoi(argv[a + 1]), std::atoi(argv[a + 2]),
                      std::atoi(argv[a + 3])});
  if (shapes.empty())
    shapes = {{4608, 1152, 1024, 4}, {4096, 1024, 4096, 16}, {8192, 2048, 1024, 4}};
  for (const Shape& s : shapes)
    if (s.gh <= 0 || s.i <= 0 || s.tb <= 0 || s.b <= 0) {
      std::fprintf(stderr, "weight_gemm_lab: expected sizes > 0, got %d %d %d %d\n", s.gh, s.i,
                   s.tb, s.b);
      return 1;
    }
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;
  cudaStream_t stream = nullptr;
  LAB_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* workspace = nullptr;
  LAB_CHECK(cudaMalloc(&workspace, kWorkspace));
  blas_lab::Handles handles = blas_lab::create_handles(stream, workspace, kWorkspace);
  cublasHandle_t blas = handles.blas;
  cublasLtHandle_t lt = handles.lt;
  const float one = 1.0f, zero = 0.0f;
  std::printf("shape,kind,impl,algo,tile,splitk,us,tflops,max_rel_diff\n");

  for (const Shape& s : shapes) {
    const std::int64_t gh = s.gh, in = s.i, rows = s.b + s.tb;
    // [dP0; dP] and [h0; X], contiguous, so that the folded form reads them as one.
    float *dp_all = nullptr, *x_all = nullptr, *c = nullptr, *ones = nullptr, *db = nullptr;
    __nv_bfloat16 *dp16 = nullptr, *x16 = nullptr;
    LAB_CHECK(cudaMalloc(&dp_all, sizeof(float) * rows * gh));
    LAB_CHECK(cudaMalloc(&x_all, sizeof(float) * rows * in));
    LAB_CHECK(cudaMalloc(&c, sizeof(float) * gh * in));
    LAB_CHECK(cudaMalloc(&ones, sizeof(float) * s.tb));
    LAB_CHECK(cudaMalloc(&db, sizeof(float) * gh));
    LAB_CHECK(cudaMalloc(&dp16, sizeof(__nv_bfloat16) * s.tb * gh));
    LAB_CHECK(cudaMalloc(&x16, sizeof(__nv_bfloat16) * s.tb * in));
    blas_lab::fill_uniform<<<512, 256, 0, stream>>>(dp_all, rows * gh, 1u);
    blas_lab::fill_uniform<<<512, 256, 0, stream>>>(x_all, rows * in, 2u);
    const std::vector<float> host_ones(static_cast<std::size_t>(s.tb), 1.0f);
    LAB_CHECK(cudaMemcpy(ones, host_ones.data(), sizeof(float) * s.tb, cudaMemcpyHostToDevice));
    float* const dp = dp_all + s.b * gh;  // the main GEMM's rows
    float* const x = x_all + s.b * in;
    to_bf16<<<512, 256, 0, stream>>>(dp, dp16, s.tb * gh);
    to_bf16<<<512, 256, 0, stream>>>(x, x16, s.tb * in);
    LAB_CHECK(cudaGetLastError());

    char shape[64];
    std::snprintf(shape, sizeof(shape), "GH=%d I=%d TB=%d B=%d", s.gh, s.i, s.tb, s.b);
    std::vector<float> reference, result;
    // The largest |out - reference| over the largest |reference| (out has n floats; an empty
    // reference is filled by this call; n = 0: not compared).
    auto difference = [&](const float* out, std::int64_t n) {
      if (n == 0) return 0.0;
      result.resize(static_cast<std::size_t>(n));
      LAB_CHECK(cudaStreamSynchronize(stream));
      LAB_CHECK(cudaMemcpy(result.data(), out, sizeof(float) * n, cudaMemcpyDeviceToHost));
      if (reference.empty()) {
        reference = result;
        return 0.0;
      }
      double worst = 0.0, scale = 0.0;
      for (std::size_t k = 0; k < result.size(); ++k) {
        worst = std::max(worst, std::fabs(static_cast<double>(result[k]) - reference[k]));
        scale = std::max(scale, std::fabs(static_cast<double>(reference[k])));
      }
      return worst / scale;
    };
    auto report = [&](const char* kind, const char* impl, const std::function<void()>& enqueue,
                      double flop, const float* out, std::int64_t n) {
      const double us = prnn::bench::graph_median_us(enqueue, stream);
      std::printf("%s,%s,%s,,,,%.2f,%.2f,%.3g\n", shape, kind, impl, us, flop / us * 1e-6,
                  difference(out, n));
    };
    // Row-major C[GH, I] = Aᵀ·B over k rows (A [k, GH], B [k, I]) is column-major
    // Cᵀ[I, GH] = B'[I, k] · A'ᵀ: sgemm(N, T, I, GH, k, B, I, A, GH, C, I).
    auto sgemm = [&](cublasMath_t math, const float* a, const float* b, int k, float beta) {
      LAB_CHECK(cublasSetMathMode(blas, math));
      LAB_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, s.i, s.gh, k, &one, b, s.i, a, s.gh,
                            &beta, c, s.i));
    };
    const double main_flop = 2.0 * gh * in * s.tb, h0_flop = 2.0 * gh * in * s.b;

    // ---- main: dW = dPᵀ · X ----
    reference.clear();
    report(
        "main", "sgemm-pedantic", [&] { sgemm(CUBLAS_PEDANTIC_MATH, dp, x, s.tb, 0.0f); },
        main_flop, c, gh * in);
    report(
        "main", "sgemm-tf32", [&] { sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp, x, s.tb, 0.0f); },
        main_flop, c, gh * in);
    {
      cublasLtMatmulDesc_t op = nullptr;
      LAB_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_T;
      LAB_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      LAB_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
      LAB_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, s.i, s.tb, s.i));    // X'
      LAB_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, s.gh, s.tb, s.gh));  // dP'
      LAB_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.i, s.gh, s.i));
      cublasLtMatmulPreference_t pref = nullptr;
      LAB_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      LAB_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &kWorkspace, sizeof(kWorkspace)));
      cublasLtMatmulHeuristicResult_t found[16] = {};
      int count = 0;
      if (cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, found, &count) !=
          CUBLAS_STATUS_SUCCESS)
        count = 0;
      for (int k = 0; k < count; ++k) {
        const double us = prnn::bench::graph_median_us(
            [&] {
              LAB_CHECK(cublasLtMatmul(lt, op, &one, x, la, dp, lb, &zero, c, lc, c, lc,
                                       &found[k].algo, workspace, kWorkspace, stream));
            },
            stream);
        auto config = [&](cublasLtMatmulAlgoConfigAttributes_t attribute) {
          int value = 0;
          std::size_t size = 0;
          LAB_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&found[k].algo, attribute, &value,
                                                         sizeof(value), &size));
          return value;
        };
        std::printf("%s,main,lt-tf32-%d,%d,%d,%d,%.2f,%.2f,%.3g\n", shape, k,
                    config(CUBLASLT_ALGO_CONFIG_ID), config(CUBLASLT_ALGO_CONFIG_TILE_ID),
                    config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM), us, main_flop / us * 1e-6,
                    difference(c, gh * in));
      }
      LAB_CHECK(cublasLtMatmulPreferenceDestroy(pref));
      LAB_CHECK(cublasLtMatrixLayoutDestroy(la));
      LAB_CHECK(cublasLtMatrixLayoutDestroy(lb));
      LAB_CHECK(cublasLtMatrixLayoutDestroy(lc));
      LAB_CHECK(cublasLtMatmulDescDestroy(op));
    }
    report(
        "main", "gemmex-bf16",
        [&] {
          LAB_CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
          LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, s.i, s.gh, s.tb, &one, x16,
                                 CUDA_R_16BF, s.i, dp16, CUDA_R_16BF, s.gh, &zero, c, CUDA_R_32F,
                                 s.i, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        main_flop, c, gh * in);

    // ---- the h0 term and the main GEMM together ----
    reference.clear();
    report(
        "h0+main", "pedantic-folded",
        [&] { sgemm(CUBLAS_PEDANTIC_MATH, dp_all, x_all, static_cast<int>(rows), 0.0f); },
        main_flop + h0_flop, c, gh * in);
    report(
        "h0+main", "tf32-main-then-h0-pedantic (the library's)",
        [&] {
          sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp, x, s.tb, 0.0f);
          sgemm(CUBLAS_PEDANTIC_MATH, dp_all, x_all, s.b, 1.0f);
        },
        main_flop + h0_flop, c, gh * in);
    report(
        "h0+main", "tf32-main-then-h0-tf32",
        [&] {
          sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp, x, s.tb, 0.0f);
          sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp_all, x_all, s.b, 1.0f);
        },
        main_flop + h0_flop, c, gh * in);
    report(
        "h0+main", "tf32-h0-first-then-main",
        [&] {
          sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp_all, x_all, s.b, 0.0f);
          sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp, x, s.tb, 1.0f);
        },
        main_flop + h0_flop, c, gh * in);
    report(
        "h0+main", "tf32-folded",
        [&] { sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp_all, x_all, static_cast<int>(rows), 0.0f); },
        main_flop + h0_flop, c, gh * in);
    // The h0 term alone, as issued today and on TF32.
    report(
        "h0", "sgemm-pedantic-beta1",
        [&] { sgemm(CUBLAS_PEDANTIC_MATH, dp_all, x_all, s.b, 1.0f); }, h0_flop, c, 0);
    report(
        "h0", "sgemm-tf32-beta1",
        [&] { sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp_all, x_all, s.b, 1.0f); }, h0_flop, c, 0);

    // ---- dW_ih and dW_hh of a layer with I = H: two GEMMs, or one batched launch ----
    {
      float *x2 = nullptr, *c2 = nullptr;
      const float** operands = nullptr;  // device: {X, X2}, {dP, dP}, then the outputs
      float** outputs = nullptr;
      LAB_CHECK(cudaMalloc(&x2, sizeof(float) * s.tb * in));
      LAB_CHECK(cudaMalloc(&c2, sizeof(float) * gh * in));
      LAB_CHECK(cudaMalloc(reinterpret_cast<void**>(&operands), 4 * sizeof(float*)));
      LAB_CHECK(cudaMalloc(reinterpret_cast<void**>(&outputs), 2 * sizeof(float*)));
      blas_lab::fill_uniform<<<512, 256, 0, stream>>>(x2, s.tb * in, 3u);
      const float* host_operands[4] = {x, x2, dp, dp};
      float* host_outputs[2] = {c, c2};
      LAB_CHECK(cudaMemcpy(operands, host_operands, sizeof(host_operands), cudaMemcpyHostToDevice));
      LAB_CHECK(cudaMemcpy(outputs, host_outputs, sizeof(host_outputs), cudaMemcpyHostToDevice));
      reference.clear();
      report(
          "pair", "two-sgemm-tf32",
          [&] {
            sgemm(CUBLAS_TF32_TENSOR_OP_MATH, dp, x, s.tb, 0.0f);
            LAB_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, s.i, s.gh, s.tb, &one, x2, s.i,
                                  dp, s.gh, &zero, c2, s.i));
          },
          2 * main_flop, c, gh * in);
      report(
          "pair", "batched-tf32",
          [&] {
            LAB_CHECK(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH));
            LAB_CHECK(cublasSgemmBatched(blas, CUBLAS_OP_N, CUBLAS_OP_T, s.i, s.gh, s.tb, &one,
                                         operands, s.i, operands + 2, s.gh, &zero, outputs, s.i,
                                         2));
          },
          2 * main_flop, c, gh * in);
      LAB_CHECK(cudaFree(x2));
      LAB_CHECK(cudaFree(c2));
      LAB_CHECK(cudaFree(operands));
      LAB_CHECK(cudaFree(outputs));
    }

    // ---- the bias sum: db = dPᵀ · 1 (column-major dP' [GH, TB] times ones) ----
    reference.clear();
    report(
        "bias", "sgemv",
        [&] {
          LAB_CHECK(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));
          LAB_CHECK(
              cublasSgemv(blas, CUBLAS_OP_N, s.gh, s.tb, &one, dp, s.gh, ones, 1, &zero, db, 1));
        },
        2.0 * gh * s.tb, db, gh);
    report(
        "bias", "sgemm-tf32",
        [&] {
          LAB_CHECK(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH));
          LAB_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, s.gh, 1, s.tb, &one, dp, s.gh, ones,
                                s.tb, &zero, db, s.gh));
        },
        2.0 * gh * s.tb, db, gh);

    LAB_CHECK(cudaFree(dp_all));
    LAB_CHECK(cudaFree(x_all));
    LAB_CHECK(cudaFree(c));
    LAB_CHECK(cudaFree(ones));
    LAB_CHECK(cudaFree(db));
    LAB_CHECK(cudaFree(dp16));
    LAB_CHECK(cudaFree(x16));
  }
  handles.destroy();
  LAB_CHECK(cudaFree(workspace));
  LAB_CHECK(cudaStreamDestroy(stream));
  return 0;
}
