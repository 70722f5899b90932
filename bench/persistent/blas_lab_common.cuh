// What the cuBLAS labs (gemm_lab.cu, weight_gemm_lab.cu) share: a status check that ends the
// lab, uniform inputs filled on the device, and the cuBLAS and cublasLt handles.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace blas_lab {
namespace {  // each lab is one translation unit

// A non-zero status (CUDA, cuBLAS, cublasLt) ends the lab with what failed and where.
inline void check(int status, const char* what, int line) {
  if (status == 0) return;
  std::fprintf(stderr, "lab: %s failed with status %d (line %d)\n", what, status, line);
  std::exit(1);
}

// p[i] uniform in [-1, 1), a hash of i and seed.
__global__ void fill_uniform(float* p, std::int64_t n, unsigned seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
}

}  // namespace
}  // namespace blas_lab

#define LAB_CHECK(x) blas_lab::check(static_cast<int>(x), #x, __LINE__)

namespace blas_lab {
namespace {

// A cuBLAS handle on `stream` with `workspace` as its own (no allocation inside a call), and a
// cublasLt handle. destroy() before the workspace and the stream go.
struct Handles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  void destroy() {
    LAB_CHECK(cublasLtDestroy(lt));
    LAB_CHECK(cublasDestroy(blas));
  }
};
Handles create_handles(cudaStream_t stream, void* workspace, std::size_t workspace_bytes) {
  Handles h;
  LAB_CHECK(cublasCreate(&h.blas));
  LAB_CHECK(cublasSetStream(h.blas, stream));
  LAB_CHECK(cublasSetWorkspace(h.blas, workspace, workspace_bytes));
  LAB_CHECK(cublasLtCreate(&h.lt));
  return h;
}

}  // namespace
}  // namespace blas_lab
