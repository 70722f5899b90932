// Model: parameter storage, initializers, and the binary save/load format (contract in
// prnn/graph.h). Every multi-byte field is written little endian, byte by byte, so files move
// between machines.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "core/check.h"
#include "graph/device_model.h"
#include "graph/model_storage.h"
#include "prnn/graph.h"

namespace prnn::graph {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'N', 'N', 'G', 'R', 'P', 'H'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kChecksumBytes = 8;

std::uint64_t fnv1a(const unsigned char* data, std::size_t n) {
  constexpr std::uint64_t kOffsetBasis = 14695981039346656037ull;
  constexpr std::uint64_t kPrime = 1099511628211ull;
  std::uint64_t h = kOffsetBasis;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ data[i]) * kPrime;
  return h;
}

void check_dim(const char* fn, Dim d) {
  PRNN_EXPECT(d.rows >= 1 && d.cols >= 1, "{}: dim must be positive, got {}", fn, to_string(d));
}

void initialize(std::vector<float>& values, Dim dim, const Initializer& init,
                std::mt19937_64& gen) {
  switch (init.kind) {
    case Initializer::Kind::GlorotUniform: {
      const double s = std::sqrt(6.0 / static_cast<double>(dim.rows + dim.cols));
      std::uniform_real_distribution<double> d(-s, s);
      for (auto& v : values) v = static_cast<float>(d(gen));
      break;
    }
    case Initializer::Kind::Uniform: {
      PRNN_EXPECT(init.a > 0, "Initializer::uniform: bound must be positive, got {}", init.a);
      std::uniform_real_distribution<double> d(-init.a, init.a);
      for (auto& v : values) v = static_cast<float>(d(gen));
      break;
    }
    case Initializer::Kind::Constant:
      std::fill(values.begin(), values.end(), static_cast<float>(init.a));
      break;
    case Initializer::Kind::Normal: {
      PRNN_EXPECT(init.b > 0, "Initializer::normal: stddev must be positive, got {}", init.b);
      std::normal_distribution<double> d(init.a, init.b);
      for (auto& v : values) v = static_cast<float>(d(gen));
      break;
    }
  }
}

// ---- Byte-level writing and reading --------------------------------------------------------

class Writer {
 public:
  void bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  void u32(std::uint32_t v) { le(v, 4); }
  void i64(std::int64_t v) { le(static_cast<std::uint64_t>(v), 8); }
  void u64(std::uint64_t v) { le(v, 8); }
  void floats(const std::vector<float>& v) {
    for (float f : v) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &f, 4);
      u32(bits);
    }
  }
  std::vector<unsigned char>& data() { return out_; }

 private:
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  std::vector<unsigned char> out_;
};

class Reader {
 public:
  Reader(const std::vector<unsigned char>& in, std::size_t end, const std::string& path)
      : in_(in), end_(end), path_(path) {}
  void need(std::size_t n, const char* what) const {
    PRNN_EXPECT(pos_ + n <= end_, "Model::load: {}: file is truncated (reading {})", path_, what);
  }
  bool bytes_equal(const void* p, std::size_t n) {
    need(n, "header");
    const bool eq = std::memcmp(in_.data() + pos_, p, n) == 0;
    pos_ += n;
    return eq;
  }
  std::uint64_t le(int n, const char* what) {
    need(static_cast<std::size_t>(n), what);
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(in_[pos_++]) << (8 * i);
    return v;
  }
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(le(4, what)); }
  std::int64_t i64(const char* what) { return static_cast<std::int64_t>(le(8, what)); }
  void floats(std::vector<float>& v, const char* what) {
    for (auto& f : v) {
      const std::uint32_t bits = u32(what);
      std::memcpy(&f, &bits, 4);
    }
  }
  std::size_t pos() const { return pos_; }

 private:
  const std::vector<unsigned char>& in_;
  std::size_t end_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

}  // namespace

// ---- Handles --------------------------------------------------------------------------------

Dim Parameter::dim() const {
  return model_->storage().params.at(index_).dim;
}
std::span<float> Parameter::values() const {
  return model_->storage().params.at(index_).value;
}
std::span<float> Parameter::gradients() const {
  return model_->storage().params.at(index_).grad;
}

std::int64_t LookupParameter::size() const {
  return model_->storage().tables.at(index_).size;
}
Dim LookupParameter::dim() const {
  return model_->storage().tables.at(index_).dim;
}

std::span<float> LookupParameter::values(std::int64_t row) const {
  auto& t = model_->storage().tables.at(index_);
  PRNN_EXPECT(row >= 0 && row < t.size, "LookupParameter::values: row {} out of range [0, {})", row,
              t.size);
  const auto n = static_cast<std::size_t>(t.dim.size());
  return std::span<float>(t.value).subspan(static_cast<std::size_t>(row) * n, n);
}

std::span<float> LookupParameter::gradients(std::int64_t row) const {
  auto& t = model_->storage().tables.at(index_);
  PRNN_EXPECT(row >= 0 && row < t.size, "LookupParameter::gradients: row {} out of range [0, {})",
              row, t.size);
  const auto n = static_cast<std::size_t>(t.dim.size());
  return std::span<float>(t.grad).subspan(static_cast<std::size_t>(row) * n, n);
}

std::vector<std::int64_t> LookupParameter::touched_rows() const {
  const auto& t = model_->storage().tables.at(index_);
  std::vector<std::int64_t> rows;
  for (std::size_t r = 0; r < t.touched.size(); ++r)
    if (t.touched[r]) rows.push_back(static_cast<std::int64_t>(r));
  return rows;
}

// ---- Model ----------------------------------------------------------------------------------

Model::Model(std::uint64_t seed) : storage_(std::make_unique<Storage>()) {
  storage_->gen.seed(seed);
}
Model::~Model() = default;

Parameter Model::add_parameters(Dim dim, Initializer init) {
  check_dim("Model::add_parameters", dim);
  DenseParameter p;
  p.dim = dim;
  p.value.resize(static_cast<std::size_t>(dim.size()));
  p.grad.assign(p.value.size(), 0.0f);
  initialize(p.value, dim, init, storage_->gen);
  storage_->params.push_back(std::move(p));
  return Parameter(this, static_cast<int>(storage_->params.size() - 1));
}

LookupParameter Model::add_lookup_parameters(std::int64_t n, Dim dim, Initializer init) {
  check_dim("Model::add_lookup_parameters", dim);
  PRNN_EXPECT(n >= 1, "Model::add_lookup_parameters: n must be positive, got {}", n);
  LookupTable t;
  t.size = n;
  t.dim = dim;
  t.value.resize(static_cast<std::size_t>(n * dim.size()));
  t.grad.assign(t.value.size(), 0.0f);
  t.touched.assign(static_cast<std::size_t>(n), false);
  initialize(t.value, dim, init, storage_->gen);
  storage_->tables.push_back(std::move(t));
  return LookupParameter(this, static_cast<int>(storage_->tables.size() - 1));
}

std::size_t Model::parameter_count() const {
  return storage_->params.size();
}
std::size_t Model::lookup_count() const {
  return storage_->tables.size();
}

Parameter Model::parameter(std::size_t i) {
  PRNN_EXPECT(i < storage_->params.size(), "Model::parameter: index {} out of range [0, {})", i,
              storage_->params.size());
  return Parameter(this, static_cast<int>(i));
}

LookupParameter Model::lookup_parameter(std::size_t i) {
  PRNN_EXPECT(i < storage_->tables.size(), "Model::lookup_parameter: index {} out of range [0, {})",
              i, storage_->tables.size());
  return LookupParameter(this, static_cast<int>(i));
}

void Model::zero_gradients() {
  for (auto& p : storage_->params) std::fill(p.grad.begin(), p.grad.end(), 0.0f);
  for (auto& t : storage_->tables) {
    std::fill(t.grad.begin(), t.grad.end(), 0.0f);
    std::fill(t.touched.begin(), t.touched.end(), false);
  }
  zero_device_gradients(*storage_);
}

void Model::save(const std::string& path) const {
  copy_device_to_host(*storage_);  // the device copy is the master while there is one
  Writer w;
  w.bytes(kMagic, sizeof kMagic);
  w.u32(kFormatVersion);
  w.u32(static_cast<std::uint32_t>(storage_->params.size()));
  w.u32(static_cast<std::uint32_t>(storage_->tables.size()));
  for (const auto& p : storage_->params) {
    w.i64(p.dim.rows);
    w.i64(p.dim.cols);
  }
  for (const auto& t : storage_->tables) {
    w.i64(t.size);
    w.i64(t.dim.rows);
    w.i64(t.dim.cols);
  }
  for (const auto& p : storage_->params) w.floats(p.value);
  for (const auto& t : storage_->tables) w.floats(t.value);
  w.u64(fnv1a(w.data().data(), w.data().size()));

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(w.data().data()),
          static_cast<std::streamsize>(w.data().size()));
  if (!f) throw RuntimeError("Model::save", "cannot write " + path, __FILE__, __LINE__);
}

void Model::load(const std::string& path) {
  constexpr const char* fn = "Model::load";
  std::ifstream f(path, std::ios::binary);
  PRNN_EXPECT(f.good(), "{}: {}: cannot open the file", fn, path);
  const std::vector<unsigned char> in{std::istreambuf_iterator<char>(f),
                                      std::istreambuf_iterator<char>()};
  PRNN_EXPECT(in.size() >= sizeof kMagic + kChecksumBytes, "{}: {}: file is truncated ({} bytes)",
              fn, path, in.size());
  const std::size_t body = in.size() - kChecksumBytes;
  Reader r(in, body, path);
  PRNN_EXPECT(r.bytes_equal(kMagic, sizeof kMagic), "{}: {}: not a prnn graph model file", fn,
              path);
  std::uint64_t stored = 0;
  for (std::size_t i = 0; i < kChecksumBytes; ++i)
    stored |= static_cast<std::uint64_t>(in[body + i]) << (8 * i);
  const std::uint64_t actual = fnv1a(in.data(), body);
  PRNN_EXPECT(stored == actual, "{}: {}: checksum mismatch (stored {:016x}, computed {:016x})", fn,
              path, stored, actual);
  const std::uint32_t version = r.u32("version");
  PRNN_EXPECT(version == kFormatVersion, "{}: {}: format version {}, expected {}", fn, path,
              version, kFormatVersion);
  const std::uint32_t n_params = r.u32("parameter count");
  const std::uint32_t n_tables = r.u32("lookup table count");
  PRNN_EXPECT(n_params == storage_->params.size(),
              "{}: {}: file has {} parameters, the model has {}", fn, path, n_params,
              storage_->params.size());
  PRNN_EXPECT(n_tables == storage_->tables.size(),
              "{}: {}: file has {} lookup parameters, the model has {}", fn, path, n_tables,
              storage_->tables.size());
  for (std::size_t i = 0; i < n_params; ++i) {
    const Dim d{r.i64("a parameter shape"), r.i64("a parameter shape")};
    const Dim want = storage_->params[i].dim;
    PRNN_EXPECT(d == want, "{}: {}: parameter {} has shape {} in the file, {} in the model", fn,
                path, i, to_string(d), to_string(want));
  }
  for (std::size_t i = 0; i < n_tables; ++i) {
    const std::int64_t size = r.i64("a lookup shape");
    const Dim d{r.i64("a lookup shape"), r.i64("a lookup shape")};
    const auto& t = storage_->tables[i];
    PRNN_EXPECT(size == t.size && d == t.dim,
                "{}: {}: lookup parameter {} has {} rows of {} in the file, {} rows of {} in the "
                "model",
                fn, path, i, size, to_string(d), t.size, to_string(t.dim));
  }
  // Read into copies so a truncated file leaves the model unchanged.
  std::vector<std::vector<float>> values;
  for (const auto& p : storage_->params) {
    values.emplace_back(p.value.size());
    r.floats(values.back(), "parameter values");
  }
  for (const auto& t : storage_->tables) {
    values.emplace_back(t.value.size());
    r.floats(values.back(), "lookup values");
  }
  PRNN_EXPECT(r.pos() == body, "{}: {}: {} unexpected bytes after the values", fn, path,
              body - r.pos());
  std::size_t k = 0;
  for (auto& p : storage_->params) p.value = std::move(values[k++]);
  for (auto& t : storage_->tables) t.value = std::move(values[k++]);
  copy_to_device();
  zero_gradients();
  storage_->host_stale = false;
}

}  // namespace prnn::graph
