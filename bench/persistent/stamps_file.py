"""The stamps files the persistent labs' patches dump (gated_stamps.patch, tc_backward_stamps.patch,
tc_forward_stamps.patch): a header of three int64 (CTAs, warps, slots), then CTAs·warps·slots
uint64 sums of SM clocks, slot 7 the steps counted."""
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


def print_roles(path, finishing, phases, whole):
    """Mean SM cycles per counted step of phases 0..6 (slots 0..6) and of the whole (slot 8), for
    the finishing warps (the first `finishing`) and the others, over every warp that counted."""
    roles = {"finishing warps": [], "other warps": []}
    for w, v in warp_slots(path):
        role = "finishing warps" if w < finishing else "other warps"
        roles[role].append([x / v[7] for x in v[:7]] + [v[8] / v[7]])
    for role, rows in roles.items():
        if not rows:
            continue
        print("%s (%d warps):" % (role, len(rows)))
        for i, name in enumerate(list(phases) + [whole]):
            print("  %-34s %8.0f cycles" % (name, sum(r[i] for r in rows) / len(rows)))
