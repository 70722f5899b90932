// cuBLAS for the library's host code (internal; needs CUDA): one owned handle and one row-major
// fp32 GEMM on it.
//   CublasHandle(math)          cublasCreate, then cublasSetMathMode: GemmMath::Fp32 is PEDANTIC
//                               math (fp32 stays fp32: no TF32, no BF16x9 emulation, whatever the
//                               environment says), Tf32 is TF32 tensor-op math (both operands
//                               rounded to TF32, fp32 accumulation).
//   CublasHandle(math, stream)  the same, then bind(stream).
//   own_workspace(device)       allocates the workspace cuBLAS recommends for the device (32 MiB
//                               from sm_90 on, 4 MiB before); bind() hands it to cuBLAS, so
//                               neither calls nor graph captures allocate.
//   bind(stream)                cublasSetStream, then cublasSetWorkspace with the owned
//                               workspace if any (cublasSetStream resets it to cuBLAS's own).
//   gemm(h, ...)                C = op(A)·op(B) + beta·C, row-major (see below).
//   gemm16(h, ...)              the same with 16-bit A and B (bf16 or f16), fp32 C.
// Errors throw through PRNN_CUBLAS_CHECK / PRNN_CUDA_CHECK; the destructor ignores
// cublasDestroy's status. Not copyable, not movable.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "prnn/dtype.h"
#include "prnn/tensor.h"

namespace prnn {

class CublasHandle {
 public:
  explicit CublasHandle(GemmMath math);
  CublasHandle(GemmMath math, cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  void own_workspace(int device);
  void bind(cudaStream_t stream);

  cublasHandle_t get() const { return h_; }
  GemmMath math() const { return math_; }
  std::size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  CublasHandle();  // cublasCreate only; the others delegate, so a throw after it still destroys

  cublasHandle_t h_ = nullptr;
  GemmMath math_ = GemmMath::Fp32;
  DeviceBuffer workspace_;
};

// Row-major C[M, N] = op(A)[M, K] · op(B)[K, N] + beta·C in fp32 (alpha = 1); lda, ldb, ldc are
// the row strides of the stored matrices (A is [M, K], or [K, M] when transposed). cuBLAS is
// column-major, so this computes Cᵀ = op(B)ᵀ · op(A)ᵀ with one cublasSgemm. M, N, K > 0.
// math: the handle's own math when absent or equal to it; otherwise the handle is switched to
// `math` for this GEMM and back to its own after it (e.g. TF32 for the all-timestep GEMMs of a
// 16-bit GEMM-RNN layer on a PEDANTIC handle).
void gemm(CublasHandle& h, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
          const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
          std::int64_t ldc, std::optional<GemmMath> math = std::nullopt);

// gemm with A and B of `dtype` (BF16 or F16) and C fp32: cublasGemmEx with fp32 compute on
// tensor cores (the handle's math switched to CUBLAS_DEFAULT_MATH for the call, then back). The
// products of 16-bit values are exact in fp32, so this computes what gemm computes on the same
// values converted to fp32 (TF32 holds them exactly), up to the order of the fp32 additions.
void gemm16(CublasHandle& h, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
            const void* A, std::int64_t lda, const void* B, std::int64_t ldb, DType dtype,
            float beta, float* C, std::int64_t ldc);

}  // namespace prnn
