#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "prnn/layers.h"

namespace prnn {

const char* to_string(LinearLayerKind k) {
  switch (k) {
    case LinearLayerKind::Gilr: return "gilr";
    case LinearLayerKind::GilrLstm: return "gilr_lstm";
    case LinearLayerKind::Sru: return "sru";
    case LinearLayerKind::Qrnn: return "qrnn";
  }
  return "?";
}

LinearLayerKind parse_linear_layer(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  std::replace(s.begin(), s.end(), '-', '_');
  if (s == "gilr") return LinearLayerKind::Gilr;
  if (s == "gilr_lstm") return LinearLayerKind::GilrLstm;
  if (s == "sru") return LinearLayerKind::Sru;
  if (s == "qrnn") return LinearLayerKind::Qrnn;
  throw InvalidArgument(
      fmt::format("layer: expected one of gilr, gilr_lstm, sru, qrnn, got '{}'", name));
}

void LinearLayerDesc::validate() const {
  PRNN_EXPECT(input_size >= 1, "LinearLayerDesc.input_size: expected >= 1, got {}", input_size);
  PRNN_EXPECT(hidden_size >= 1, "LinearLayerDesc.hidden_size: expected >= 1, got {}", hidden_size);
  if (kind == LinearLayerKind::Qrnn) {
    PRNN_EXPECT(window >= 1, "LinearLayerDesc.window: expected >= 1 for qrnn, got {}", window);
  } else {
    PRNN_EXPECT(window == 1, "LinearLayerDesc.window: expected 1 for {}, got {}", to_string(kind),
                window);
  }
}

std::int64_t LinearLayerDesc::projection_rows() const {
  const std::int64_t H = hidden_size;
  switch (kind) {
    case LinearLayerKind::Gilr: return 2 * H;
    case LinearLayerKind::GilrLstm: return 6 * H;
    case LinearLayerKind::Sru: return input_size == H ? 3 * H : 4 * H;
    case LinearLayerKind::Qrnn: return 3 * H;
  }
  return 0;
}

std::int64_t LinearLayerDesc::projection_cols() const {
  return kind == LinearLayerKind::Qrnn ? window * input_size : input_size;
}

std::int64_t LinearLayerDesc::param_count() const {
  validate();
  const std::int64_t H = hidden_size;
  const std::int64_t w = projection_rows() * projection_cols();
  switch (kind) {
    case LinearLayerKind::Gilr: return w + 2 * H;
    case LinearLayerKind::GilrLstm: return w + 4 * H * H + 6 * H;
    case LinearLayerKind::Sru: return w + 2 * H;
    case LinearLayerKind::Qrnn: return w + 3 * H;
  }
  return 0;
}

std::int64_t LinearLayerDesc::state_size() const {
  return kind == LinearLayerKind::GilrLstm ? 2 * hidden_size : hidden_size;
}

}  // namespace prnn
