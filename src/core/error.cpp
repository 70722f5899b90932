#include "prnn/error.h"

#include "prnn/log.h"

#if PRNN_WITH_CUDA
#include <cublas_v2.h>

#include "core/cuda_check.h"
#endif

#include <fmt/format.h>

namespace prnn::detail {

#if PRNN_WITH_CUDA
void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw RuntimeError(call, fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err)),
                     file, line);
}

void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept {
  try {
    log(LogLevel::Error, fmt::format("{}:{}: {} failed: {} ({})", file, line, call,
                                     cudaGetErrorString(err), cudaGetErrorName(err)));
  } catch (...) {
  }
}

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  throw RuntimeError(call, fmt::format("{} ({})", cublasGetStatusString(s), cublasGetStatusName(s)),
                     file, line);
}
#endif

}  // namespace prnn::detail
