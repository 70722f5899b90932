// The owned cuBLAS handle and the row-major GEMM (contract in core/cublas.h).
#if PRNN_WITH_CUDA

#include "core/cublas.h"

#include "core/check.h"
#include "core/cuda_check.h"

namespace prnn {
namespace {

cublasMath_t math_mode(GemmMath math) {
  return math == GemmMath::Tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH;
}

}  // namespace

CublasHandle::CublasHandle() {
  PRNN_CUBLAS_CHECK(cublasCreate(&h_));
}

CublasHandle::CublasHandle(GemmMath math) : CublasHandle() {
  math_ = math;
  PRNN_CUBLAS_CHECK(cublasSetMathMode(h_, math_mode(math)));
}

CublasHandle::CublasHandle(GemmMath math, cudaStream_t stream) : CublasHandle(math) {
  bind(stream);
}

CublasHandle::~CublasHandle() {
  if (h_ != nullptr) (void)cublasDestroy(h_);
}

void CublasHandle::own_workspace(int device) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  int major = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  workspace_ = DeviceBuffer(major >= 9 ? 32 * kMiB : 4 * kMiB);  // cuBLAS's recommendation
}

void CublasHandle::bind(cudaStream_t stream) {
  PRNN_CUBLAS_CHECK(cublasSetStream(h_, stream));
  if (workspace_.data() != nullptr)
    PRNN_CUBLAS_CHECK(cublasSetWorkspace(h_, workspace_.data(), workspace_.bytes()));
}

void gemm(CublasHandle& h, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
          const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
          std::int64_t ldc, std::optional<GemmMath> math) {
  PRNN_ASSERT(M > 0 && N > 0 && K > 0);
  const bool switched = math.has_value() && *math != h.math();
  const float one = 1.0f;
  if (switched) PRNN_CUBLAS_CHECK(cublasSetMathMode(h.get(), math_mode(*math)));
  PRNN_CUBLAS_CHECK(cublasSgemm(
      h.get(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
      static_cast<int>(M), static_cast<int>(K), &one, B, static_cast<int>(ldb), A,
      static_cast<int>(lda), &beta, C, static_cast<int>(ldc)));
  if (switched) PRNN_CUBLAS_CHECK(cublasSetMathMode(h.get(), math_mode(h.math())));
}

void gemm16(CublasHandle& h, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
            const void* A, std::int64_t lda, const void* B, std::int64_t ldb, DType dtype,
            float beta, float* C, std::int64_t ldc) {
  PRNN_ASSERT(M > 0 && N > 0 && K > 0);
  PRNN_ASSERT(dtype == DType::BF16 || dtype == DType::F16);
  const cudaDataType_t type = dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f;
  PRNN_CUBLAS_CHECK(cublasSetMathMode(h.get(), CUBLAS_DEFAULT_MATH));
  PRNN_CUBLAS_CHECK(
      cublasGemmEx(h.get(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                   static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one, B, type,
                   static_cast<int>(ldb), A, type, static_cast<int>(lda), &beta, C, CUDA_R_32F,
                   static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  PRNN_CUBLAS_CHECK(cublasSetMathMode(h.get(), math_mode(h.math())));
}

}  // namespace prnn

#endif  // PRNN_WITH_CUDA
