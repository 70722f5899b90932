// CPU reference of the linear-recurrence layers GILR, GILR-LSTM, SRU (2017) and QRNN(k),
// forward and backward. Formulas and the parameter layout are in prnn/layers.h.
//   x, dx [T, B, I]; y, dy [T, B, H]; state0, state_n, dstate_n, dstate0 [B, state_size]
//   laid out as [S, B, H] with S = 2 for GILR-LSTM (h̃ then c), 1 otherwise.
//   params, dparams [desc.param_count()].
// Nullable: state0 (zeros), state_n (not written), dstate_n (zeros), dx/dparams/dstate0 (not
// computed). Gradient outputs are overwritten. Throws InvalidArgument on bad sizes / nulls.
#pragma once

#include <cstdint>

#include "prnn/layers.h"

namespace prnn::reference {

template <class T>
void linear_layer_forward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                          const T* x, const T* params, const T* state0, T* y, T* state_n);

template <class T>
void linear_layer_backward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                           const T* x, const T* params, const T* state0, const T* dy,
                           const T* dstate_n, T* dx, T* dparams, T* dstate0);

}  // namespace prnn::reference
