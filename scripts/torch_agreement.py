#!/usr/bin/env python3
"""prnn::Rnn and torch.nn.LSTM / nn.GRU given the same weights must agree (DESIGN.md).

  python3 scripts/torch_agreement.py --tool build/gpu/tools/rnn_io/prnn-rnn-io
      [--algos persistent,gemm_per_step] [--dtypes f32[,bf16]] [--only SUBSTRING] [--keep DIR]

For every case below, every algorithm and every dtype: random inputs and weights (seeded per
case), rounded to the dtype and to float32, go to prnn through prnn-rnn-io (tools/rnn_io, one
forward + backward_data + backward_weights through the public API); the same values, as float64,
go into torch.nn.LSTM / nn.GRU on the CPU (float64, PyTorch's own formulation; its parameters are
copied in by name, weight_ih_l{l}[_reverse] ..., from prnn's flat layout: for l: for d: W_ih,
W_hh, b_ih, b_hh). Compared: y, hn (LSTM cn), dx, dh0 (LSTM dc0) and every parameter gradient,
the gradients being those of sum(y·dy) + sum(hn·dhn) (+ sum(cn·dcn)).

Tolerance: relative L2 error |prnn - torch| / |torch| against torch in float64, at most 1e-5 for
f32 (fp32 storage and math against an exact-ish reference; the GPU tests' bound) and 1e-2 for
bf16 / f16 (16-bit storage of every tensor, fp32 accumulation). A parameter block under 16
elements (a bias of H = 1, ...) is held to the same bound against the norm of its whole layer
direction's gradient, as in tests/rnn/rnn_gpu_test.cpp: its own norm can cancel to nearly zero.

Prints one line per (case, algo, dtype) and the summary line
  torch-agreement: passed N | failed M
Exit status 0 only if every check passed and at least one ran. Missing PyTorch, a missing tool, a
GPU prnn cannot use and a case prnn calls Unsupported are failures, never skips."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

GATES = {"lstm": 4, "gru": 3}
TOLERANCE = {"f32": 1e-5, "bf16": 1e-2, "f16": 1e-2}  # relative L2 vs torch float64 (see above)
TORCH_DTYPE = {"bf16": "bfloat16", "f16": "float16"}
MIN_BLOCK = 16  # parameter blocks smaller than this are checked against their layer direction
TOOL_TIMEOUT_S = 600

# name, cell, input I, hidden H, layers L, bidirectional, steps T, batch B, initial states h0/c0
# given, final-state gradients dhn/dcn given. Odd sizes; both directions; stacks; absent states
# (zeros) and absent final gradients; two cases at the performance targets' sizes.
CASES = [
    ("lstm-tiny", "lstm", 5, 7, 1, False, 4, 3, True, True),
    ("lstm-h1", "lstm", 3, 1, 1, False, 2, 1, False, False),
    ("lstm-bi-stack", "lstm", 13, 33, 2, True, 9, 5, True, True),
    ("lstm-stack-odd", "lstm", 37, 100, 2, False, 11, 7, True, False),
    ("lstm-bi-nostate", "lstm", 8, 19, 1, True, 6, 2, False, True),
    ("lstm-h1024", "lstm", 1024, 1024, 1, False, 6, 4, True, True),
    ("gru-tiny", "gru", 6, 11, 1, False, 5, 2, True, True),
    ("gru-h1", "gru", 2, 1, 1, False, 3, 1, False, False),
    ("gru-bi-stack", "gru", 17, 29, 2, True, 7, 3, True, True),
    ("gru-bi-b16", "gru", 9, 64, 1, True, 3, 16, False, True),
    ("gru-stack-odd", "gru", 31, 97, 2, False, 10, 5, True, False),
    ("gru-h1152", "gru", 1152, 1152, 1, False, 5, 4, True, True),
]


def fail_setup(message):
    print(f"torch-agreement: {message}")
    print("torch-agreement: passed 0 | failed 1")
    sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tool", required=True, help="path of prnn-rnn-io")
    p.add_argument("--algos", default="persistent,gemm_per_step",
                   help="prnn algorithms, comma-separated: persistent, gemm_per_step, auto, "
                        "reference (the CPU reference: checks this script and the tool)")
    p.add_argument("--dtypes", default="f32", help="comma-separated: f32, bf16, f16")
    p.add_argument("--only", default="", help="only cases whose name contains this")
    p.add_argument("--keep", help="keep every case's files under this directory")
    args = p.parse_args()
    algos = [a for a in args.algos.split(",") if a]
    dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in dtypes if d not in TOLERANCE]
    if bad or not dtypes or not algos:
        p.error(f"--dtypes: expected some of {', '.join(TOLERANCE)}; --algos: not empty")

    try:
        import torch
    except ImportError as e:
        fail_setup(f"FAILED: PyTorch is not installed ({e}); this check compares prnn with "
                   "torch.nn.LSTM / nn.GRU and needs it (pip install torch)")
    if sys.byteorder != "little":
        fail_setup("FAILED: prnn-rnn-io files are little-endian float32; this host is big-endian")
    if not (os.path.isfile(args.tool) and os.access(args.tool, os.X_OK)):
        fail_setup(f"FAILED: no executable prnn-rnn-io at '{args.tool}' (build the prnn_rnn_io "
                   "target)")
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))

    cases = [c for c in CASES if args.only in c[0]]
    if not cases:
        p.error(f"--only '{args.only}' matches no case")

    passed = failed = 0
    keep_root = args.keep
    with tempfile.TemporaryDirectory(prefix="torch_agreement_") as tmp:
        root = keep_root or tmp
        for index, case in enumerate(cases):
            for dtype in dtypes:
                inputs, want = make_case(torch, case, dtype, seed=1000 + index)
                for algo in algos:
                    directory = os.path.join(root, f"{case[0]}-{dtype}-{algo}")
                    os.makedirs(directory, exist_ok=True)
                    ok, line = run_case(torch, args.tool, directory, case, dtype, algo, inputs,
                                        want)
                    passed += ok
                    failed += not ok
                    print(line, flush=True)
    print(f"torch-agreement: passed {passed} | failed {failed}")
    return 0 if failed == 0 and passed > 0 else 1


def layer_input(case, layer):
    _, _, i, h, _, bidir, *_ = case
    return i if layer == 0 else (2 if bidir else 1) * h


def param_blocks(case):
    """(name, shape, offset) of every parameter tensor in prnn's flat order."""
    _, cell, _, h, layers, bidir, *_ = case
    g, blocks, offset = GATES[cell], [], 0
    for layer in range(layers):
        for d in range(2 if bidir else 1):
            suffix = f"_l{layer}" + ("_reverse" if d else "")
            for name, shape in ((f"weight_ih{suffix}", (g * h, layer_input(case, layer))),
                                (f"weight_hh{suffix}", (g * h, h)),
                                (f"bias_ih{suffix}", (g * h,)),
                                (f"bias_hh{suffix}", (g * h,))):
                blocks.append((name, shape, offset))
                n = 1
                for s in shape:
                    n *= s
                offset += n
    return blocks, offset


def make_case(torch, case, dtype, seed):
    """The inputs (float64, already rounded to dtype and float32) and torch's float64 results."""
    name, cell, i, h, layers, bidir, steps, batch, states, final_grads = case
    d = 2 if bidir else 1
    gen = torch.Generator().manual_seed(seed)
    blocks, count = param_blocks(case)

    def rounded(t):
        if dtype in TORCH_DTYPE:
            t = t.to(getattr(torch, TORCH_DTYPE[dtype]))
        return t.to(torch.float32).to(torch.float64)

    def uniform(shape, scale=1.0):
        return rounded((torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale)

    inputs = {
        "x": uniform((steps, batch, i)),
        "params": uniform((count,), scale=1.0 / h ** 0.5),
        "dy": uniform((steps, batch, d * h)),
    }
    state = (layers * d, batch, h)
    if states:
        inputs["h0"] = uniform(state)
        if cell == "lstm":
            inputs["c0"] = uniform(state)
    if final_grads:
        inputs["dhn"] = uniform(state)
        if cell == "lstm":
            inputs["dcn"] = uniform(state)

    module_type = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
    module = module_type(i, h, num_layers=layers, bidirectional=bidir, dtype=torch.float64)
    with torch.no_grad():
        for pname, shape, offset in blocks:
            n = 1
            for s in shape:
                n *= s
            getattr(module, pname).copy_(inputs["params"][offset:offset + n].view(shape))
    zeros = torch.zeros(state, dtype=torch.float64)
    x = inputs["x"].clone().requires_grad_()
    h0 = inputs.get("h0", zeros).clone().requires_grad_()
    params = [getattr(module, pname) for pname, _, _ in blocks]
    if cell == "lstm":
        c0 = inputs.get("c0", zeros).clone().requires_grad_()
        y, (hn, cn) = module(x, (h0, c0))
        outs, seeds = [y, hn, cn], [inputs["dy"], inputs.get("dhn", zeros),
                                    inputs.get("dcn", zeros)]
        wrt = [x, h0, c0] + params
    else:
        y, hn = module(x, h0)
        outs, seeds = [y, hn], [inputs["dy"], inputs.get("dhn", zeros)]
        wrt = [x, h0] + params
    grads = torch.autograd.grad(outs, wrt, grad_outputs=seeds)
    want = {"y": y.detach(), "hn": hn.detach(), "dx": grads[0], "dh0": grads[1],
            "dparams": torch.cat([g.reshape(-1) for g in grads[len(wrt) - len(params):]])}
    if cell == "lstm":
        want["cn"] = cn.detach()
        want["dc0"] = grads[2]
    return inputs, want


def write_f32(torch, path, t):
    flat = t.detach().to(torch.float32).contiguous().reshape(-1)
    buf = bytearray(flat.numel() * 4)
    torch.frombuffer(buf, dtype=torch.float32).copy_(flat)
    with open(path, "wb") as f:
        f.write(buf)


def read_f32(torch, path, n):
    with open(path, "rb") as f:
        buf = bytearray(f.read())
    if len(buf) != 4 * n:
        raise ValueError(f"{os.path.basename(path)}: expected {n} float32 values, "
                         f"got {len(buf)} bytes")
    return torch.frombuffer(buf, dtype=torch.float32).to(torch.float64)


def rel_error(torch, got, want, scale=0.0):
    """|got - want| / max(|want|, scale); NaN (an unwritten element) stays NaN."""
    diff = torch.linalg.vector_norm(got - want).item()
    norm = max(torch.linalg.vector_norm(want).item(), scale)
    return diff / norm if norm > 0 else diff


def run_case(torch, tool, directory, case, dtype, algo, inputs, want):
    name, cell, i, h, layers, bidir, steps, batch, *_ = case
    label = (f"{name} ({cell} I={i} H={h} L={layers} {'bi' if bidir else 'uni'} T={steps} "
             f"B={batch}) {dtype} {algo}")
    for f in os.listdir(directory):
        os.remove(os.path.join(directory, f))
    spec = {"cell": cell, "input_size": i, "hidden_size": h, "layers": layers,
            "bidirectional": bidir, "steps": steps, "batch": batch, "algo": algo, "dtype": dtype}
    with open(os.path.join(directory, "case.json"), "w") as f:
        json.dump(spec, f)
    for key, t in inputs.items():
        write_f32(torch, os.path.join(directory, key + ".f32"), t)
    try:
        proc = subprocess.run([tool, directory], capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"FAIL {label}: prnn-rnn-io did not finish in {TOOL_TIMEOUT_S} s"
    if proc.returncode != 0:
        kind = "unsupported" if proc.returncode == 2 else f"exit {proc.returncode}"
        message = " ".join(proc.stderr.split()) or "(no message)"
        return False, f"FAIL {label}: prnn-rnn-io {kind}: {message}"

    tol = TOLERANCE[dtype]
    errors = []  # (what, relative error)
    try:
        for key, ref in want.items():
            got = read_f32(torch, os.path.join(directory, key + ".f32"), ref.numel())
            if key != "dparams":
                errors.append((key, rel_error(torch, got, ref.reshape(-1))))
                continue
            blocks, _ = param_blocks(case)
            for start in range(0, len(blocks), 4):  # one layer direction: W_ih, W_hh, b_ih, b_hh
                group = blocks[start:start + 4]
                lo = group[0][2]
                hi = group[-1][2] + group[-1][1][0]  # b_hh is 1-D
                scale = torch.linalg.vector_norm(ref[lo:hi]).item()
                for pname, shape, offset in group:
                    n = 1
                    for s in shape:
                        n *= s
                    errors.append((f"d{pname}", rel_error(torch, got[offset:offset + n],
                                                          ref[offset:offset + n],
                                                          scale if n < MIN_BLOCK else 0.0)))
    except (OSError, ValueError) as e:
        return False, f"FAIL {label}: {e}"
    bad = [(w, e) for w, e in errors if not e <= tol]  # `not <=` so NaN fails
    worst = max(errors, key=lambda we: we[1] if we[1] == we[1] else float("inf"))
    with open(os.path.join(directory, "result.json")) as f:
        ran = json.load(f).get("algo", "?")
    if bad:
        listed = ", ".join(f"{w} {e:.3g}" for w, e in bad[:8])
        more = f" (+{len(bad) - 8} more)" if len(bad) > 8 else ""
        return False, f"FAIL {label} [ran {ran}]: over {tol:g}: {listed}{more}"
    return True, f"PASS {label} [ran {ran}]: worst {worst[0]} {worst[1]:.2e} (tol {tol:g})"


if __name__ == "__main__":
    sys.exit(main())
