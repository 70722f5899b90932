// The persistent kernels' instantiation tables: for each kernel family, the __global__ function
// of a shape (tiling.h), pass and sequence-lengths form. Each family's table is its own
// translation unit (kernels_*.cu), so that their kernels compile in parallel; the one dispatch
// point that picks among them is rnn_kernels.cu's kernel_for. Included by those files only.
#pragma once

#include <cstddef>
#include <utility>

#include "persistent/rnn_kernels.h"
#include "persistent/tiling.h"

namespace prnn::persistent {

using KernelFn = void (*)(Params);

// The FMA kernels (direct and staged; kernels_fma.cu) of kShapes[shape].
KernelFn fma_kernel(int shape, bool lengths, Pass pass);
// The tensor-core kernels of kTensorCoreShapes[shape] for pass P (kernels_tensor_core_forward.cu
// and kernels_tensor_core_backward.cu).
template <Pass P>
KernelFn tensor_core_kernel_of(int shape, bool lengths);
// The gated warp-rows kernels of kGatedWarpRowsShapes[shape] (kernels_gated_warp_rows.cu;
// sequence lengths are checked at run time); the pass's product on the FMA pipes (product
// F32) or on tensor cores in BF16 / F16, which only the shapes gated_warp_rows_has_mma (forward)
// and gated_warp_rows_has_backward_mma (backward) take have (null otherwise).
KernelFn gated_warp_rows_kernel_of(int shape, Pass pass, DType product = DType::F32);
// The warp-rows kernels of kWarpRowsShapes[shape] for activation A, forward with the input
// projection where `projects` (kernels_warp_rows_<activation>.cu, one per activation).
template <Activation A>
KernelFn warp_rows_kernel_of(int shape, bool projects, bool lengths, Pass pass);

// Family Of's kernel for shape `shape` (of N), with or without lengths (L), for pass P: one
// table per (lengths, pass) over the family's shapes.
template <template <int, bool, Pass> class Of, bool L, Pass P, std::size_t... I>
KernelFn pick_in(int shape, std::index_sequence<I...>) {
  constexpr KernelFn fns[] = {Of<static_cast<int>(I), L, P>::get()...};
  return fns[shape];
}

template <template <int, bool, Pass> class Of, int N, Pass P>
KernelFn pick_pass(int shape, bool lengths) {
  const auto seq = std::make_index_sequence<N>{};
  return lengths ? pick_in<Of, true, P>(shape, seq) : pick_in<Of, false, P>(shape, seq);
}

template <template <int, bool, Pass> class Of, int N>
KernelFn pick(int shape, bool lengths, Pass pass) {
  return pass == Pass::Forward ? pick_pass<Of, N, Pass::Forward>(shape, lengths)
                               : pick_pass<Of, N, Pass::BackwardData>(shape, lengths);
}

}  // namespace prnn::persistent
