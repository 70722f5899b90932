// Non-owning tensor views and an owning device buffer.
//   TensorView  pointer + dtype + shape + strides (in elements) + where the memory lives.
//   DeviceBuffer  RAII cudaMalloc/cudaFree, move-only; in a build without CUDA it throws
//                 Unsupported on construction.
// The check_* helpers are how every public entry point validates its arguments: they throw
// InvalidArgument naming the argument, what was expected and what was given.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "prnn/dtype.h"

namespace prnn {

enum class MemoryKind : std::uint8_t { Host, Cuda };

struct Device {
  MemoryKind kind = MemoryKind::Host;
  int index = 0;
  static constexpr Device host() { return {MemoryKind::Host, 0}; }
  static constexpr Device cuda(int i = 0) { return {MemoryKind::Cuda, i}; }
  bool operator==(const Device&) const = default;
};
std::string to_string(Device d);

inline constexpr int kMaxRank = 6;

struct Shape {
  int rank = 0;
  std::array<std::int64_t, kMaxRank> dims{};

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> d);
  std::int64_t operator[](int i) const { return dims[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const;
  bool operator==(const Shape& o) const;
};
std::string to_string(const Shape& s);

class TensorView {
 public:
  TensorView() = default;
  // Contiguous row-major view.
  TensorView(const void* data, DType dtype, Shape shape, Device device = Device::host());
  // Strided view; strides are in elements.
  TensorView(const void* data, DType dtype, Shape shape, Shape strides, Device device);

  template <class T>
  static TensorView of(const T* data, Shape shape, Device device = Device::host()) {
    return TensorView(data, dtype_v<T>, shape, device);
  }

  void* data() const { return data_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int rank() const { return shape_.rank; }
  std::int64_t size(int i) const { return shape_[i]; }
  std::int64_t stride(int i) const { return strides_[i]; }
  std::int64_t numel() const { return shape_.numel(); }
  Device device() const { return device_; }
  bool is_contiguous() const;
  bool empty() const { return data_ == nullptr; }

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::F32;
  Shape shape_;
  Shape strides_;
  Device device_;
};

// Argument checks: `name` is the argument's name as the caller knows it.
void check_not_null(const TensorView& t, const char* name);
void check_shape(const TensorView& t, const char* name, const Shape& expected);
void check_dtype(const TensorView& t, const char* name, DType expected);
void check_device(const TensorView& t, const char* name, Device expected);
void check_contiguous(const TensorView& t, const char* name);
void check_positive(std::int64_t value, const char* name);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  void* data() const { return data_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }
  TensorView view(DType dtype, Shape shape) const;

  void copy_from_host(const void* src, std::size_t bytes);
  void copy_to_host(void* dst, std::size_t bytes) const;
  // Fills every byte with `value` (tests poison outputs with 0xFF, which is NaN in every dtype).
  void fill_bytes(int value);

 private:
  void reset() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace prnn
