// Input-GEMM lab (not part of the library; bench/persistent/NOTES.md, "What the input GEMM
// costs"): the persistent path's input GEMM C[M, N] = X[M, K] · W[N, K]ᵀ (row-major, fp32, the
// layout of gemm_rnn.cpp's call) at N = K = 1152 and M = T·B rows, timed for
//   cublasSgemm with pedantic math, default math, and the fp32 emulation by three bf16 terms
//   (CUBLAS_FP32_EMULATED_BF16X9_MATH with the eager strategy), and
//   every candidate cublasLt's heuristic returns (up to 16) for the compute types pedantic fp32,
//   fast TF32 and CUBLAS_COMPUTE_32F_EMULATED_16BFX9.
// Each result's largest difference from the pedantic sgemm's, relative to the largest magnitude
// of the pedantic result, is printed beside its time (max_rel_diff).
// Each time: a CUDA graph of 20 launches, replayed 7 times after one warm-up; the median per
// launch (bench_timer.h's graph_median_us). Inputs are uniform in [-1, 1). Usage: prnn_gemm_lab
// [M...] (default 4 16 64 256 1024).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_timer.h"
#include "blas_lab_common.cuh"

int main(int argc, char** argv) {
  std::vector<int> rows;
  for (int i = 1; i < argc; ++i) rows.push_back(std::atoi(argv[i]));
  if (rows.empty()) rows = {4, 16, 64, 256, 1024};
  const int max_m = *std::max_element(rows.begin(), rows.end());
  if (max_m <= 0) {
    std::fprintf(stderr, "gemm_lab: expected row counts > 0\n");
    return 1;
  }
  constexpr int N = 1152, K = 1152;
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;
  cudaStream_t stream = nullptr;
  LAB_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *w = nullptr, *x = nullptr, *c = nullptr;
  void* workspace = nullptr;
  LAB_CHECK(cudaMalloc(&w, sizeof(float) * N * K));
  LAB_CHECK(cudaMalloc(&x, sizeof(float) * static_cast<std::size_t>(max_m) * K));
  LAB_CHECK(cudaMalloc(&c, sizeof(float) * static_cast<std::size_t>(max_m) * N));
  LAB_CHECK(cudaMalloc(&workspace, kWorkspace));
  blas_lab::fill_uniform<<<256, 256, 0, stream>>>(w, std::int64_t{N} * K, 1u);
  blas_lab::fill_uniform<<<256, 256, 0, stream>>>(x, std::int64_t{max_m} * K, 2u);
  LAB_CHECK(cudaGetLastError());
  blas_lab::Handles handles = blas_lab::create_handles(stream, workspace, kWorkspace);
  cublasHandle_t blas = handles.blas;
  cublasLtHandle_t lt = handles.lt;
  const float one = 1.0f, zero = 0.0f;
  std::vector<float> reference, result;
  // The largest |C - C_pedantic| over the largest |C_pedantic| (the first call fills the
  // reference).
  auto difference = [&](int m) {
    const std::size_t n = static_cast<std::size_t>(m) * N;
    result.resize(n);
    LAB_CHECK(cudaStreamSynchronize(stream));
    LAB_CHECK(cudaMemcpy(result.data(), c, sizeof(float) * n, cudaMemcpyDeviceToHost));
    if (reference.size() != n) {
      reference = result;
      return 0.0;
    }
    double worst = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(result[i]) - reference[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(reference[i])));
    }
    return worst / scale;
  };
  LAB_CHECK(cublasSetEmulationStrategy(blas, CUBLAS_EMULATION_STRATEGY_EAGER));
  std::printf("rows,impl,algo,tile,splitk,workspace,us,tflops,max_rel_diff\n");
  for (int m : rows) {
    const double flop = 2.0 * m * N * K;
    reference.clear();
    for (cublasMath_t mode :
         {CUBLAS_PEDANTIC_MATH, CUBLAS_DEFAULT_MATH, CUBLAS_FP32_EMULATED_BF16X9_MATH}) {
      LAB_CHECK(cublasSetMathMode(blas, mode));
      const auto us = static_cast<float>(prnn::bench::graph_median_us(
          [&] {
            LAB_CHECK(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, m, K, &one, w, K, x, K, &zero,
                                  c, N));
          },
          stream));
      std::printf("%d,sgemm-%s,,,,,%.2f,%.2f,%.3g\n", m,
                  mode == CUBLAS_PEDANTIC_MATH  ? "pedantic"
                  : mode == CUBLAS_DEFAULT_MATH ? "default"
                                                : "emulated_bf16x9",
                  us, flop / us * 1e-6, difference(m));
    }
    for (cublasComputeType_t compute : {CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_COMPUTE_32F_FAST_TF32,
                                        CUBLAS_COMPUTE_32F_EMULATED_16BFX9}) {
      const char* compute_name = compute == CUBLAS_COMPUTE_32F_PEDANTIC    ? "fp32"
                                 : compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? "tf32"
                                                                           : "bf16x9";
      cublasLtMatmulDesc_t op = nullptr;
      LAB_CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      LAB_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      LAB_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      // Column-major views: W is K x N (transposed by the op), X is K x M, C is N x M.
      cublasLtMatrixLayout_t lw = nullptr, lx = nullptr, lc = nullptr;
      LAB_CHECK(cublasLtMatrixLayoutCreate(&lw, CUDA_R_32F, K, N, K));
      LAB_CHECK(cublasLtMatrixLayoutCreate(&lx, CUDA_R_32F, K, m, K));
      LAB_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, m, N));
      cublasLtMatmulPreference_t pref = nullptr;
      LAB_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      LAB_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &kWorkspace, sizeof(kWorkspace)));
      cublasLtMatmulHeuristicResult_t found[16] = {};
      int count = 0;
      const cublasStatus_t heuristic =
          cublasLtMatmulAlgoGetHeuristic(lt, op, lw, lx, lc, lc, pref, 16, found, &count);
      if (heuristic != CUBLAS_STATUS_SUCCESS) {
        std::printf("%d,lt-%s,none (status %d),,,,,,\n", m, compute_name,
                    static_cast<int>(heuristic));
        count = 0;
      }
      for (int i = 0; i < count; ++i) {
        const auto us = static_cast<float>(prnn::bench::graph_median_us(
            [&] {
              LAB_CHECK(cublasLtMatmul(lt, op, &one, w, lw, x, lx, &zero, c, lc, c, lc,
                                       &found[i].algo, workspace, kWorkspace, stream));
            },
            stream));
        auto config = [&](cublasLtMatmulAlgoConfigAttributes_t attribute) {
          int value = 0;
          std::size_t size = 0;
          LAB_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&found[i].algo, attribute, &value,
                                                         sizeof(value), &size));
          return value;
        };
        const int id = config(CUBLASLT_ALGO_CONFIG_ID), tile = config(CUBLASLT_ALGO_CONFIG_TILE_ID),
                  splitk = config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
        std::printf("%d,lt-%s-%d,%d,%d,%d,%zu,%.2f,%.2f,%.3g\n", m, compute_name, i, id, tile,
                    splitk, found[i].workspaceSize, us, flop / us * 1e-6, difference(m));
      }
      LAB_CHECK(cublasLtMatmulPreferenceDestroy(pref));
      LAB_CHECK(cublasLtMatrixLayoutDestroy(lw));
      LAB_CHECK(cublasLtMatrixLayoutDestroy(lx));
      LAB_CHECK(cublasLtMatrixLayoutDestroy(lc));
      LAB_CHECK(cublasLtMatmulDescDestroy(op));
    }
  }
  handles.destroy();
  LAB_CHECK(cudaFree(w));
  LAB_CHECK(cudaFree(x));
  LAB_CHECK(cudaFree(c));
  LAB_CHECK(cudaFree(workspace));
  LAB_CHECK(cudaStreamDestroy(stream));
  return 0;
}
