// The warp-rows kernels' instantiation table for one activation (warp_rows_kernel.cuh):
// per shape of kWarpRowsShapes, forward with and without the input projection (J = shape · 2 +
// projects; the backward's two are one, and so are a wide shape's, which has no projecting
// form), with and without sequence lengths. Each kernels_warp_rows_<activation>.cu instantiates
// it for its activation, so that the three compile in parallel.
#pragma once

#include "persistent/kernel_tables.cuh"
#include "persistent/warp_rows_kernel.cuh"

namespace prnn::persistent {

template <Activation A>
struct WarpRowsOf {
  template <int J, bool L, Pass P>
  struct Kernel {
    static constexpr KernelFn get() {
      constexpr WarpRowsShape s = kWarpRowsShapes[J / 2];
      constexpr bool kInput = P == Pass::Forward && J % 2 == 1 && s.smem_slots == 0;
      return &warp_rows_kernel<s.records_per_lane, s.smem_slots, s.batch_per_warp, s.max_threads,
                               s.own_slots, A, L, P, kInput>;
    }
  };
};

template <Activation A>
KernelFn warp_rows_kernel_of(int shape, bool projects, bool lengths, Pass pass) {
  return pick<WarpRowsOf<A>::template Kernel, kWarpRowsShapeCount * 2>(
      shape * 2 + (projects ? 1 : 0), lengths, pass);
}

}  // namespace prnn::persistent
