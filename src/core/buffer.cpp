#include <utility>

#include "prnn/error.h"
#include "prnn/tensor.h"

#if PRNN_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace prnn {

#if PRNN_WITH_CUDA
DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) PRNN_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

void DeviceBuffer::reset() noexcept {
  if (data_ != nullptr) PRNN_CUDA_CHECK_NOTHROW(cudaFree(data_));
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes) {
  if (bytes > bytes_)
    throw InvalidArgument("DeviceBuffer::copy_from_host: expected at most " +
                          std::to_string(bytes_) + " bytes, got " + std::to_string(bytes));
  if (bytes > 0) PRNN_CUDA_CHECK(cudaMemcpy(data_, src, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes) const {
  if (bytes > bytes_)
    throw InvalidArgument("DeviceBuffer::copy_to_host: expected at most " + std::to_string(bytes_) +
                          " bytes, got " + std::to_string(bytes));
  if (bytes > 0) PRNN_CUDA_CHECK(cudaMemcpy(dst, data_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(int value) {
  if (bytes_ > 0) PRNN_CUDA_CHECK(cudaMemset(data_, value, bytes_));
}

TensorView DeviceBuffer::view(DType dtype, Shape shape) const {
  int device = 0;
  PRNN_CUDA_CHECK(cudaGetDevice(&device));
  if (static_cast<std::size_t>(shape.numel()) * size_of(dtype) > bytes_)
    throw InvalidArgument("DeviceBuffer::view: shape " + to_string(shape) + " of " +
                          to_string(dtype) + " needs more than the buffer's " +
                          std::to_string(bytes_) + " bytes");
  return TensorView(data_, dtype, shape, Device::cuda(device));
}
#else
namespace {
[[noreturn]] void no_cuda() {
  throw Unsupported("DeviceBuffer", "prnn was built without CUDA (PRNN_CUDA=OFF)");
}
}  // namespace
DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) { no_cuda(); }
void DeviceBuffer::reset() noexcept {}
void DeviceBuffer::copy_from_host(const void*, std::size_t) { no_cuda(); }
void DeviceBuffer::copy_to_host(void*, std::size_t) const { no_cuda(); }
void DeviceBuffer::fill_bytes(int) { no_cuda(); }
TensorView DeviceBuffer::view(DType, Shape) const { no_cuda(); }
#endif

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

}  // namespace prnn
