// CPU reference: multi-layer, optionally bidirectional vanilla RNN / GRU / LSTM, forward and
// backward (BPTT). The literal loops, written for reading; the oracle every GPU path is tested
// against and the CPU backend. Templated on float and double.
//
// Shapes and parameter layout: see prnn/rnn.h. All pointers are host memory, contiguous.
//   x [T, B, I]; h0, c0, hn, cn, dh0, dc0, dhn, dcn [L*D, B, H]; y, dy [T, B, D*H];
//   params, dparams [rnn_param_count(desc)].
// Nullable: h0/c0 (zeros), hn/cn (not written), dhn/dcn (zeros), dx/dh0/dc0/dparams (not
// computed). c0/cn/dc0/dcn are used only for LSTM. Gradient outputs are overwritten, not
// accumulated. Residual connections: desc.residual_every (prnn/rnn.h).
// lengths: nullable [B], lengths[b] in [1, T]; steps t >= lengths[b] of batch row b are identity
// steps (prnn/rnn.h: state passed through, y = 0, dx = 0, dy ignored); null: all T.
// Throws InvalidArgument for non-positive sizes, a null required pointer or a length out of range.
#pragma once

#include <cstdint>

#include "prnn/rnn.h"

namespace prnn::reference {

template <class T>
void rnn_forward(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, const T* x,
                 const T* h0, const T* c0, const T* params, T* y, T* hn, T* cn,
                 const std::int32_t* lengths = nullptr);

// Recomputes the forward pass internally, then runs backpropagation through time.
template <class T>
void rnn_backward(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, const T* x,
                  const T* h0, const T* c0, const T* params, const T* dy, const T* dhn,
                  const T* dcn, T* dx, T* dh0, T* dc0, T* dparams,
                  const std::int32_t* lengths = nullptr);

// rnn_forward and rnn_backward from one forward computation: y, hn, cn as rnn_forward writes
// them (hn, cn nullable; y may be null too), then the gradients as rnn_backward writes them.
template <class T>
void rnn_forward_backward(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, const T* x,
                          const T* h0, const T* c0, const T* params, const T* dy, const T* dhn,
                          const T* dcn, T* y, T* hn, T* cn, T* dx, T* dh0, T* dc0, T* dparams,
                          const std::int32_t* lengths = nullptr);

}  // namespace prnn::reference
