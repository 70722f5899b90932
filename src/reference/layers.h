// CPU reference of the linear-recurrence layers GILR, GILR-LSTM, SRU (2017) and QRNN(k),
// forward and backward. Formulas and the parameter layout are in prnn/layers.h.
//   x, dx [T, B, I]; y, dy [T, B, H]; state0, state_n, dstate_n, dstate0 [B, state_size]
//   laid out as [S, B, H] with S = 2 for GILR-LSTM (h̃ then c), 1 otherwise.
//   params, dparams [desc.param_count()].
// Nullable: state0 (zeros), state_n (not written), dstate_n (zeros), dx/dparams/dstate0 (not
// computed). Gradient outputs are overwritten. Throws InvalidArgument on bad sizes / nulls.
// lengths (nullable: every sequence has T steps): host int32 [B], lengths[b] in [0, T], the
// valid steps of sequence b (PyTorch's packed sequences): y_t = 0 for t >= lengths[b],
// state_n[b] is the state after step lengths[b] - 1 (state0[b] when lengths[b] = 0); in the
// backward dy_t at padded steps is ignored, dx_t there is 0, padded steps add nothing to dparams,
// and dstate_n reaches step lengths[b] - 1 (dstate0[b] = dstate_n[b] when lengths[b] = 0).
// Each sequence with lengths[b] < T runs alone, as the layer over lengths[b] steps.
#pragma once

#include <cstdint>

#include "prnn/layers.h"

namespace prnn::reference {

template <class T>
void linear_layer_forward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                          const T* x, const T* params, const T* state0, T* y, T* state_n,
                          const std::int32_t* lengths = nullptr);

template <class T>
void linear_layer_backward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                           const T* x, const T* params, const T* state0, const T* dy,
                           const T* dstate_n, T* dx, T* dparams, T* dstate0,
                           const std::int32_t* lengths = nullptr);

}  // namespace prnn::reference
