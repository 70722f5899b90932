// Checked CUDA calls (internal; needs the CUDA runtime).
//   PRNN_CUDA_CHECK(call)          throws RuntimeError with file:line, the call text and the error
//   PRNN_CUDA_CHECK_NOTHROW(call)  logs the same at Error level (destructors, cleanup paths)
//   PRNN_CHECK_LAUNCH()            checks the last launch (cudaGetLastError, which also clears a
//                                  non-sticky error so it does not leak into the next call)
//   PRNN_CUBLAS_CHECK(call)        the same for cuBLAS status codes
#pragma once

#include <cuda_runtime.h>

namespace prnn::detail {
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept;
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);
}  // namespace prnn::detail

#define PRNN_CUDA_CHECK(call)                                                \
  do {                                                                       \
    cudaError_t prnn_err_ = (call);                                          \
    if (prnn_err_ != cudaSuccess) {                                          \
      (void)cudaGetLastError();                                              \
      ::prnn::detail::throw_cuda_error(prnn_err_, #call, __FILE__, __LINE__); \
    }                                                                        \
  } while (0)

#define PRNN_CUDA_CHECK_NOTHROW(call)                                      \
  do {                                                                     \
    cudaError_t prnn_err_ = (call);                                        \
    if (prnn_err_ != cudaSuccess) {                                        \
      (void)cudaGetLastError();                                            \
      ::prnn::detail::log_cuda_error(prnn_err_, #call, __FILE__, __LINE__); \
    }                                                                      \
  } while (0)

#define PRNN_CHECK_LAUNCH() PRNN_CUDA_CHECK(cudaGetLastError())

#define PRNN_CUBLAS_CHECK(call)                                                              \
  do {                                                                                       \
    int prnn_status_ = static_cast<int>(call);                                               \
    if (prnn_status_ != 0) ::prnn::detail::throw_cublas_error(prnn_status_, #call, __FILE__, __LINE__); \
  } while (0)
