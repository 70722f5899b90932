"""The stamps files the persistent labs' patches dump (gated_stamps.patch, tc_backward_stamps.patch):
a header of three int64 (CTAs, warps, slots), then CTAs·warps·slots uint64 sums of SM clocks, slot
7 the steps counted."""
import struct


def warp_slots(path, warps_used=None):
    """Yields (warp, slots) for every warp (of the first `warps_used`) that counted steps."""
    data = open(path, "rb").read()
    ctas, warps, slots = struct.unpack_from("<3q", data, 0)
    values = struct.unpack_from("<%dQ" % (ctas * warps * slots), data, 24)
    for c in range(ctas):
        for w in range(min(warps, warps_used or warps)):
            v = values[(c * warps + w) * slots:(c * warps + w + 1) * slots]
            if v[7] != 0:
                yield w, v
