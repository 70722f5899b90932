#include "prnn/tensor.h"

#include <fmt/format.h>

#include "core/check.h"

namespace prnn {

std::string to_string(Device d) {
  return d.kind == MemoryKind::Host ? std::string("host") : fmt::format("cuda:{}", d.index);
}

Shape::Shape(std::initializer_list<std::int64_t> d) {
  PRNN_EXPECT(d.size() <= static_cast<std::size_t>(kMaxRank), "shape: expected rank <= {}, got {}",
              kMaxRank, d.size());
  rank = static_cast<int>(d.size());
  std::size_t i = 0;
  for (auto v : d) dims[i++] = v;
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= (*this)[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if ((*this)[i] != o[i]) return false;
  return true;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

namespace {
Shape contiguous_strides(const Shape& shape) {
  Shape st;
  st.rank = shape.rank;
  std::int64_t acc = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    st.dims[static_cast<std::size_t>(i)] = acc;
    acc *= shape[i];
  }
  return st;
}
}  // namespace

TensorView::TensorView(const void* data, DType dtype, Shape shape, Device device)
    : TensorView(data, dtype, shape, contiguous_strides(shape), device) {}

TensorView::TensorView(const void* data, DType dtype, Shape shape, Shape strides, Device device)
    : data_(const_cast<void*>(data)),
      dtype_(dtype),
      shape_(shape),
      strides_(strides),
      device_(device) {
  PRNN_EXPECT(shape.rank == strides.rank, "tensor: shape {} and strides {} differ in rank",
              to_string(shape), to_string(strides));
  for (int i = 0; i < shape.rank; ++i)
    PRNN_EXPECT(shape[i] >= 0, "tensor: expected non-negative sizes, got shape {}",
                to_string(shape));
}

bool TensorView::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

void check_not_null(const TensorView& t, const char* name) {
  PRNN_EXPECT(t.data() != nullptr || t.numel() == 0, "{}: expected a non-null pointer, got null",
              name);
}

void check_shape(const TensorView& t, const char* name, const Shape& expected) {
  PRNN_EXPECT(t.shape() == expected, "{}: expected shape {}, got {}", name, to_string(expected),
              to_string(t.shape()));
}

void check_dtype(const TensorView& t, const char* name, DType expected) {
  PRNN_EXPECT(t.dtype() == expected, "{}: expected dtype {}, got {}", name, to_string(expected),
              to_string(t.dtype()));
}

void check_device(const TensorView& t, const char* name, Device expected) {
  PRNN_EXPECT(t.device() == expected, "{}: expected memory on {}, got {}", name, to_string(expected),
              to_string(t.device()));
}

void check_contiguous(const TensorView& t, const char* name) {
  PRNN_EXPECT(t.is_contiguous(), "{}: expected a contiguous tensor, got shape {} with strides {}",
              name, to_string(t.shape()), to_string(t.strides()));
}

void check_positive(std::int64_t value, const char* name) {
  PRNN_EXPECT(value >= 1, "{}: expected a value >= 1, got {}", name, value);
}

}  // namespace prnn
