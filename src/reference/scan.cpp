// CPU reference of the elementwise linear recurrence (contract in scan.h):
//   forward   h_t = a_t ⊙ h_{t-1} + x_t,               h_{-1} = h0 (zeros when null)
//   backward  g_t = dh_t + a_{t+1} ⊙ g_{t+1},  da_t = h_{t-1} ⊙ g_t,  dx_t = g_t,  dh0 = a_0 ⊙ g_0
// Both are the plain sequential loop over t (every channel of a step before the next step);
// [steps, channels] time-major.
#include "reference/scan.h"

#include <cstddef>

#include "core/check.h"

namespace prnn::reference {
namespace {

void check_sizes(const char* fn, std::int64_t steps, std::int64_t channels) {
  PRNN_EXPECT(steps >= 1, "{}: steps: expected >= 1, got {}", fn, steps);
  PRNN_EXPECT(channels >= 1, "{}: channels: expected >= 1, got {}", fn, channels);
}

void check_pointer(const char* fn, const char* name, const void* p) {
  PRNN_EXPECT(p != nullptr, "{}: {}: expected a non-null pointer, got null", fn, name);
}

}  // namespace

template <class T>
void linear_scan_forward(std::int64_t steps, std::int64_t channels, const T* a, const T* x,
                         const T* h0, T* h) {
  constexpr const char* fn = "linear_scan_forward";
  check_sizes(fn, steps, channels);
  check_pointer(fn, "a", a);
  check_pointer(fn, "x", x);
  check_pointer(fn, "h", h);

  const auto C = static_cast<std::size_t>(channels);
  const auto S = static_cast<std::size_t>(steps);
  for (std::size_t t = 0; t < S; ++t)
    for (std::size_t c = 0; c < C; ++c) {
      const std::size_t i = t * C + c;
      const T prev = t > 0 ? h[i - C] : (h0 ? h0[c] : T(0));  // h_{t-1}
      h[i] = a[i] * prev + x[i];
    }
}

template <class T>
void linear_scan_backward(std::int64_t steps, std::int64_t channels, const T* a, const T* h,
                          const T* h0, const T* dh, T* da, T* dx, T* dh0) {
  constexpr const char* fn = "linear_scan_backward";
  check_sizes(fn, steps, channels);
  check_pointer(fn, "a", a);
  check_pointer(fn, "h", h);
  check_pointer(fn, "dh", dh);
  check_pointer(fn, "da", da);
  check_pointer(fn, "dx", dx);

  const auto C = static_cast<std::size_t>(channels);
  const auto S = static_cast<std::size_t>(steps);
  for (std::size_t t = S; t-- > 0;)
    for (std::size_t c = 0; c < C; ++c) {
      const std::size_t i = t * C + c;
      // g_t = dh_t + a_{t+1} g_{t+1}, g_{t+1} being dx_{t+1} (written the step before)
      const T g = t + 1 < S ? dh[i] + a[i + C] * dx[i + C] : dh[i];
      const T h_prev = t > 0 ? h[i - C] : (h0 ? h0[c] : T(0));
      da[i] = h_prev * g;
      dx[i] = g;
    }
  if (dh0)
    for (std::size_t c = 0; c < C; ++c) dh0[c] = a[c] * dx[c];  // dx_0 is g_0
}

template void linear_scan_forward<float>(std::int64_t, std::int64_t, const float*, const float*,
                                         const float*, float*);
template void linear_scan_forward<double>(std::int64_t, std::int64_t, const double*, const double*,
                                          const double*, double*);
template void linear_scan_backward<float>(std::int64_t, std::int64_t, const float*, const float*,
                                          const float*, const float*, float*, float*, float*);
template void linear_scan_backward<double>(std::int64_t, std::int64_t, const double*, const double*,
                                           const double*, const double*, double*, double*, double*);

}  // namespace prnn::reference
