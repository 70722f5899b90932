// One linear-scan problem with fresh random inputs, and its expected results from the CPU
// reference path in double. Shared by the CPU and GPU scan tests.
#pragma once

#include <vector>

#include "prnn/scan.h"
#include "support/random.h"

namespace prnn::test {

struct ScanCase {
  ScanDesc desc;
  bool with_h0 = true;
  bool with_lengths = false;
  bool with_final = true;
};

struct ScanData {
  std::vector<double> a, x, h0, dh, dh_final;
  std::vector<std::int32_t> lengths;
  // expected (reference, double)
  std::vector<double> h, h_final, da, dx, dh0;
};

// a in [0.5, 1) keeps the recurrence contracting so fp32 error stays at rounding level;
// x, h0, dh in [-1, 1]. With `round_to` a 16-bit dtype, inputs are rounded to it first, so the
// reference sees exactly what the device sees.
inline ScanData make_scan_data(const ScanCase& sc, Rng& rng, DType round_to = DType::F64) {
  const ScanDesc& d = sc.desc;
  const auto n = static_cast<std::size_t>(d.steps * d.batch * d.channels);
  const auto ns = static_cast<std::size_t>(d.batch * d.channels);
  ScanData s;
  s.a = rng.uniform(n, 0.5, 1.0);
  s.x = rng.uniform(n);
  s.h0 = rng.uniform(ns);
  s.dh = rng.uniform(n);
  s.dh_final = rng.uniform(ns);
  if (round_to == DType::F16 || round_to == DType::BF16 || round_to == DType::F32) {
    for (auto* v : {&s.a, &s.x, &s.h0, &s.dh, &s.dh_final}) {
      std::vector<std::uint8_t> tmp(v->size() * size_of(round_to));
      convert(v->data(), DType::F64, tmp.data(), round_to, v->size());
      convert(tmp.data(), round_to, v->data(), DType::F64, v->size());
    }
  }
  if (sc.with_lengths) {
    s.lengths.resize(static_cast<std::size_t>(d.batch));
    for (auto& l : s.lengths) l = static_cast<std::int32_t>(rng.integer(0, d.steps));
    s.lengths[0] = static_cast<std::int32_t>(d.steps);  // one full-length sequence
  }
  ScanDesc host = d;
  host.device = Device::host();
  host.dtype = DType::F64;
  LinearScan ref(host, ScanAlgo::Reference);
  const Shape seq = host.sequence_shape(), st = host.state_shape();
  s.h.assign(n, 0.0);
  s.h_final.assign(ns, 0.0);
  ScanForwardArgs f;
  f.a = TensorView::of(s.a.data(), seq);
  f.x = TensorView::of(s.x.data(), seq);
  if (sc.with_h0) f.h0 = TensorView::of(s.h0.data(), st);
  f.lengths = sc.with_lengths ? s.lengths.data() : nullptr;
  f.h = TensorView::of(s.h.data(), seq);
  f.h_final = TensorView::of(s.h_final.data(), st);
  ref.forward(f);
  if (round_to == DType::F16 || round_to == DType::BF16) {  // backward reads h as stored
    std::vector<std::uint8_t> tmp(n * 2);
    convert(s.h.data(), DType::F64, tmp.data(), round_to, n);
    convert(tmp.data(), round_to, s.h.data(), DType::F64, n);
  }
  s.da.assign(n, 0.0);
  s.dx.assign(n, 0.0);
  s.dh0.assign(ns, 0.0);
  ScanBackwardArgs bw;
  bw.a = f.a;
  bw.h = TensorView::of(s.h.data(), seq);
  bw.h0 = f.h0;
  bw.lengths = f.lengths;
  bw.dh = TensorView::of(s.dh.data(), seq);
  if (sc.with_final) bw.dh_final = TensorView::of(s.dh_final.data(), st);
  bw.da = TensorView::of(s.da.data(), seq);
  bw.dx = TensorView::of(s.dx.data(), seq);
  bw.dh0 = TensorView::of(s.dh0.data(), st);
  ref.backward(bw);
  return s;
}

}  // namespace prnn::test
