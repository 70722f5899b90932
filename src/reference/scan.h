// CPU reference: the elementwise linear recurrence over `channels` independent lanes.
//   h_t = a_t ⊙ h_{t-1} + x_t,  t = 0..steps-1,  h_{-1} = h0 (zeros when null)
// Backward (Martin & Cundy §2.2), with dh the gradient arriving at every h_t:
//   g_{T-1} = dh_{T-1};  g_t = a_{t+1} ⊙ g_{t+1} + dh_t
//   da_t = h_{t-1} ⊙ g_t;  dx_t = g_t;  dh0 = a_0 ⊙ g_0
// Layout: a, x, h, dh, da, dx [steps, channels] time-major; h0, dh0 [channels].
// Other layouts (batch-first, reverse direction, per-sequence lengths) are mapped onto this one
// by the callers' tests. dh0 is nullable. Throws InvalidArgument on bad sizes or null pointers.
#pragma once

#include <cstdint>

namespace prnn::reference {

template <class T>
void linear_scan_forward(std::int64_t steps, std::int64_t channels, const T* a, const T* x,
                         const T* h0, T* h);

// h is the forward output (read for h_{t-1}).
template <class T>
void linear_scan_backward(std::int64_t steps, std::int64_t channels, const T* a, const T* h,
                          const T* h0, const T* dh, T* da, T* dx, T* dh0);

}  // namespace prnn::reference
