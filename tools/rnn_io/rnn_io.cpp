// prnn-rnn-io: one training step of prnn::Rnn (forward, backward_data, backward_weights) on inputs
// read from raw files; every output and gradient is written back as a raw file. The PyTorch
// agreement check (scripts/torch_agreement.py) drives it; nothing here compares anything.
//
// Usage:   prnn-rnn-io DIR
// DIR/case.json, e.g.
//   {"cell": "lstm", "input_size": 5, "hidden_size": 7, "layers": 2, "bidirectional": true,
//    "steps": 3, "batch": 2, "algo": "persistent", "dtype": "f32"}
//   cell   relu, clipped_relu, tanh, gru, lstm
//   algo   auto, persistent, gemm_per_step (tensors on GPU 0) or reference (host tensors)
//   dtype  the prnn weight dtype (default f32); every tensor is converted from and to float32 on
//          the host, so 16-bit runs see the inputs rounded to that dtype.
//   gemm_math  fp32 (default) or tf32: RnnDesc::gemm_math, the f32 layers' GEMMs over all steps.
// Files:   raw little-endian float32, row-major, the shapes of include/prnn/rnn.h
//          (D = 2 if bidirectional else 1, L = layers):
//   inputs   x [T, B, I], params [rnn_param_count] (PyTorch order: for l: for d: W_ih, W_hh,
//            b_ih, b_hh), dy [T, B, D*H]                         required
//            h0, c0, dhn, dcn [L*D, B, H]                         optional (absent: zeros);
//                                                                 c0 and dcn LSTM only
//   outputs  y [T, B, D*H], hn [L*D, B, H], dx [T, B, I], dh0 [L*D, B, H], dparams
//            [rnn_param_count]; LSTM also cn, dc0 [L*D, B, H]; result.json {"algo", "reason"}
//   Every output is poisoned (NaN) before the run, so an element prnn never writes shows.
//   Outputs are written only after forward, backward_data, backward_weights and check() have
//   all succeeded.
// Exit:    0 done; 2 Unsupported (prnn cannot run the case; the reason on stderr); 1 any other
//          error (bad case file, wrong file size, CUDA failure).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "prnn/dtype.h"
#include "prnn/error.h"
#include "prnn/rnn.h"
#include "prnn/tensor.h"

namespace {

namespace fs = std::filesystem;
using prnn::DType;
using prnn::Shape;
using prnn::TensorView;

constexpr int kExitError = 1;
constexpr int kExitUnsupported = 2;
constexpr int kPoisonByte = 0xFF;  // NaN in every float dtype
constexpr int kGpuIndex = 0;

struct Case {
  prnn::RnnDesc desc;
  std::int64_t steps = 0, batch = 0;
  prnn::RnnAlgo algo = prnn::RnnAlgo::Auto;
};

// Reads DIR/case.json; throws InvalidArgument naming the field that is missing or wrong.
Case read_case(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw prnn::InvalidArgument("case file: cannot open '" + path.string() + "'");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    Case c;
    c.desc.cell = prnn::parse_cell(j.at("cell").get<std::string>());
    c.desc.input_size = j.at("input_size").get<std::int64_t>();
    c.desc.hidden_size = j.at("hidden_size").get<std::int64_t>();
    c.desc.layers = j.value("layers", std::int64_t{1});
    c.desc.direction = j.value("bidirectional", false) ? prnn::Direction::Bidirectional
                                                       : prnn::Direction::Unidirectional;
    c.desc.weight_dtype = prnn::parse_dtype(j.value("dtype", std::string("f32")));
    c.desc.gemm_math = prnn::parse_gemm_math(j.value("gemm_math", std::string("fp32")));
    c.steps = j.at("steps").get<std::int64_t>();
    c.batch = j.at("batch").get<std::int64_t>();
    c.algo = prnn::parse_rnn_algo(j.at("algo").get<std::string>());
    c.desc.validate();
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw prnn::InvalidArgument("case file '" + path.string() + "': " + e.what());
  }
}

std::size_t elements(const Shape& s) { return static_cast<std::size_t>(s.numel()); }

// Reads n float32 values; throws InvalidArgument when the file does not hold exactly n.
std::vector<float> read_floats(const fs::path& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw prnn::InvalidArgument("input: cannot open '" + path.string() + "'");
  const auto bytes = static_cast<std::size_t>(in.tellg());
  if (bytes != n * sizeof(float))
    throw prnn::InvalidArgument("input '" + path.string() + "': expected " + std::to_string(n) +
                                " float32 values (" + std::to_string(n * sizeof(float)) +
                                " bytes), got " + std::to_string(bytes) + " bytes");
  std::vector<float> v(n);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
  if (!in) throw prnn::InvalidArgument("input '" + path.string() + "': read failed");
  return v;
}

void write_floats(const fs::path& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out) throw prnn::InvalidArgument("output: cannot write '" + path.string() + "'");
}

// Owns every tensor of the run, in the case's dtype, on the host or GPU 0; views stay valid for
// the arena's lifetime.
class Arena {
 public:
  Arena(DType dtype, prnn::Device device) : dtype_(dtype), device_(device) {}

  // A tensor holding `values` (converted to the dtype).
  TensorView input(const std::vector<float>& values, const Shape& shape) {
    Slot& s = add(shape);
    prnn::convert(values.data(), DType::F32, s.host.data(), dtype_, values.size());
    upload(s);
    return s.view;
  }
  // A poisoned tensor for prnn to write.
  TensorView output(const Shape& shape) {
    Slot& s = add(shape);
    std::memset(s.host.data(), kPoisonByte, s.host.size());
    upload(s);
    return s.view;
  }
  // The current contents of a tensor made here, as float32.
  std::vector<float> fetch(const TensorView& view) {
    for (Slot& s : slots_) {
      if (s.view.data() != view.data()) continue;
      if (device_.kind == prnn::MemoryKind::Cuda) s.device.copy_to_host(s.host.data(), s.host.size());
      std::vector<float> v(elements(s.view.shape()));
      prnn::convert(s.host.data(), dtype_, v.data(), DType::F32, v.size());
      return v;
    }
    throw prnn::InternalError("Arena::fetch: the view was not made by this arena");
  }

 private:
  struct Slot {
    std::vector<std::byte> host;
    prnn::DeviceBuffer device;
    TensorView view;
  };

  Slot& add(const Shape& shape) {
    Slot& s = slots_.emplace_back();
    s.host.resize(elements(shape) * prnn::size_of(dtype_));
    if (device_.kind == prnn::MemoryKind::Cuda) {
      s.device = prnn::DeviceBuffer(s.host.size());
      s.view = s.device.view(dtype_, shape);
    } else {
      s.view = TensorView(s.host.data(), dtype_, shape, device_);
    }
    return s;
  }
  void upload(Slot& s) {
    if (device_.kind == prnn::MemoryKind::Cuda) s.device.copy_from_host(s.host.data(), s.host.size());
  }

  DType dtype_;
  prnn::Device device_;
  std::deque<Slot> slots_;  // a deque: slots never move
};

void run(const fs::path& dir) {
  const Case c = read_case(dir / "case.json");
  const prnn::RnnDesc& d = c.desc;
  const std::int64_t T = c.steps, B = c.batch, I = d.input_size, H = d.hidden_size;
  const std::int64_t DH = d.directions() * H, LD = d.layers * d.directions();
  const bool lstm = prnn::has_cell_state(d.cell);
  const Shape seq_in{T, B, I}, seq_out{T, B, DH}, state{LD, B, H};
  const Shape flat{prnn::rnn_param_count(d)};
  const prnn::Device device = c.algo == prnn::RnnAlgo::Reference ? prnn::Device::host()
                                                                 : prnn::Device::cuda(kGpuIndex);

  prnn::Rnn rnn(d, T, B, device, c.algo);
  Arena arena(d.weight_dtype, device);
  auto required = [&](const char* name, const Shape& shape) {
    return arena.input(read_floats(dir / (std::string(name) + ".f32"), elements(shape)), shape);
  };
  // Absent file: an empty view (zeros, by the Rnn contract).
  auto maybe = [&](const char* name, const Shape& shape, bool allowed) {
    const fs::path path = dir / (std::string(name) + ".f32");
    if (!fs::exists(path)) return TensorView();
    if (!allowed)
      throw prnn::InvalidArgument(std::string("input '") + path.string() +
                                  "': only an LSTM takes " + name);
    return arena.input(read_floats(path, elements(shape)), shape);
  };
  const TensorView x = required("x", seq_in), params = required("params", flat);
  const TensorView dy = required("dy", seq_out);
  const TensorView h0 = maybe("h0", state, true), dhn = maybe("dhn", state, true);
  const TensorView c0 = maybe("c0", state, lstm), dcn = maybe("dcn", state, lstm);
  const TensorView y = arena.output(seq_out), hn = arena.output(state);
  const TensorView dx = arena.output(seq_in), dh0 = arena.output(state);
  const TensorView dparams = arena.output(flat);
  const TensorView cn = lstm ? arena.output(state) : TensorView();
  const TensorView dc0 = lstm ? arena.output(state) : TensorView();

  constexpr cudaStream_t kStream = nullptr;
  rnn.forward(x, params, h0, c0, y, hn, cn, kStream);
  rnn.backward_data(params, dy, dhn, dcn, dx, dh0, dc0, kStream);
  rnn.backward_weights(x, h0, c0, dparams, kStream);
  rnn.check(kStream);

  std::vector<std::pair<const char*, TensorView>> outputs{
      {"y", y}, {"hn", hn}, {"dx", dx}, {"dh0", dh0}, {"dparams", dparams}};
  if (lstm) outputs.insert(outputs.end(), {{"cn", cn}, {"dc0", dc0}});
  for (const auto& [name, view] : outputs)
    write_floats(dir / (std::string(name) + ".f32"), arena.fetch(view));
  const nlohmann::json result = {{"algo", prnn::to_string(rnn.algo())}, {"reason", rnn.reason()}};
  std::ofstream(dir / "result.json") << result.dump() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: %s DIR   (DIR/case.json and the raw float32 inputs; the format is in "
                 "tools/rnn_io/rnn_io.cpp)\n",
                 argv[0]);
    return kExitError;
  }
  try {
    run(argv[1]);
  } catch (const prnn::Unsupported& e) {
    std::fprintf(stderr, "prnn-rnn-io: unsupported: %s\n", e.what());
    return kExitUnsupported;
  } catch (const prnn::Error& e) {
    std::fprintf(stderr, "prnn-rnn-io: error: %s\n", e.what());
    return kExitError;
  }
  return 0;
}
