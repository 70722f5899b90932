#!/usr/bin/env python3
"""PyTorch's nn.LSTM / nn.GRU / nn.RNN (cuDNN through PyTorch) on the cases of `prnn bench`.

  python3 scripts/bench_torch_rnn.py --cases-from prnn.csv [--out torch.csv]
  python3 scripts/bench_torch_rnn.py --cell lstm --dtypes f32,bf16 --hidden 1024,1152 --batch 4

Writes tidy CSV in the schema of `prnn bench` (DESIGN.md, "Benchmark results format"):
  suite,case,impl,metric,value,unit
with the same case strings (cell=<c>;dtype=<d>;H=<H>;B=<B>;T=<T>[;I=<I>]) and the same metrics:
  fwd_us_per_step     training-mode forward of T steps / T (autograd on: cuDNN keeps its reserve)
  fwdbwd_us_per_step  forward + backward of T steps / T: torch.autograd.grad of y, hn (LSTM: cn)
                      with respect to x, h0 (c0) and every parameter (fresh gradients, no
                      accumulation)
  fwd_tflops          2·T·B·G·H·(I+H) / forward time
impl is torch-<cell> (torch-lstm, torch-gru, torch-relu, torch-tanh); with --tf32, torch-<cell>-tf32.
One layer, unidirectional, time-major, input size I (= H unless the case says). Inputs x, h0, c0,
dy, dhn, dcn uniform in [-1, 1); the parameters keep PyTorch's init U(-1/sqrt(H), 1/sqrt(H)).
PyTorch keeps bf16 weights out of cuDNN's flat weight buffer (flatten_parameters() skips them and it
warns that they are compacted at every call): that cost is in its bf16 rows, as a PyTorch user gets
it. fp32 runs with TF32 off (torch.backends.cudnn.allow_tf32 = False), as prnn and `prnn bench`'s
cuDNN rows run strict fp32, unless --tf32. Every time is the median of --repeats runs timed with
CUDA events on the current stream, after --warmup runs; everything is allocated before timing.
A case PyTorch cannot run gives one row metric status, value 0, unit not_supported (PyTorch says
it is not implemented or not supported) or error (anything else); the reason goes to stderr.

--cases-from takes the cases (and the suite column) from a CSV of `prnn bench lstm|gru|rnn`, so
the two runs cover exactly the same cases; header lines starting with '#' are skipped.
Exits with status 2 and a message when PyTorch or CUDA is missing."""
import argparse
import csv
import datetime
import sys

CELLS = {"lstm": 4, "gru": 3, "relu": 1, "tanh": 1}  # cell -> gates G
DTYPE_NAMES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
COLUMNS = ["suite", "case", "impl", "metric", "value", "unit"]


def fail(message):
    print(f"bench_torch_rnn.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_case(case):
    return dict(kv.split("=", 1) for kv in case.split(";") if "=" in kv)


def case_name(cell, dtype, hidden, batch, steps, input_size):
    name = f"cell={cell};dtype={dtype};H={hidden};B={batch};T={steps}"
    return name if input_size == hidden else name + f";I={input_size}"


def cases_from_csv(path):
    """(suite, case string, cell, dtype, H, B, T, I) of every case of a prnn bench CSV, in order."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    seen, cases = set(), []
    for r in rows:
        c = parse_case(r.get("case") or "")
        if not all(k in c for k in ("cell", "dtype", "H", "B", "T")):
            continue  # e.g. the grid-sync floor row
        if c["cell"] not in CELLS or r["case"] in seen:
            continue
        seen.add(r["case"])
        hidden = int(c["H"])
        cases.append((r["suite"], r["case"], c["cell"], c["dtype"], hidden, int(c["B"]),
                      int(c["T"]), int(c.get("I", hidden))))
    if not cases:
        fail(f"--cases-from {path}: no lstm/gru/relu/tanh case found")
    return cases


def grid_cases(args):
    suite = "rnn" if args.cell in ("relu", "tanh") else args.cell
    cases = []
    for dtype in args.dtypes:
        for hidden in args.hidden:
            for batch in args.batch:
                for steps in args.steps:
                    i = args.input_size or hidden
                    cases.append((suite, case_name(args.cell, dtype, hidden, batch, steps, i),
                                  args.cell, dtype, hidden, batch, steps, i))
    return cases


def int_list(text):
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got '{text}'")
    return values


def dtype_list(text):
    names = [v for v in text.split(",") if v]
    bad = [n for n in names if n not in DTYPE_NAMES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"expected some of {', '.join(DTYPE_NAMES)}, got '{text}'")
    return names


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases-from", help="CSV of prnn bench: time PyTorch on exactly its cases")
    p.add_argument("--cell", choices=sorted(CELLS), default="lstm", help="without --cases-from")
    p.add_argument("--dtypes", type=dtype_list, default=["f32", "bf16"], help="f32,bf16,f16")
    p.add_argument("--hidden", type=int_list, default=[1152])
    p.add_argument("--batch", type=int_list, default=[4])
    p.add_argument("--steps", type=int_list, default=[256])
    p.add_argument("--input-size", type=int, default=0, help="0: same as hidden")
    p.add_argument("--repeats", type=int, default=10, help="timed runs per measurement")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs before timing")
    p.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 (PyTorch's default)")
    p.add_argument("--out", help="CSV file (default: stdout)")
    p.add_argument("--no-header", action="store_true",
                   help="rows only: no '#' lines and no column header (to append to a CSV)")
    args = p.parse_args()
    if args.repeats <= 0 or args.warmup < 0 or args.input_size < 0:
        p.error("--repeats must be > 0, --warmup and --input-size >= 0")

    cases = cases_from_csv(args.cases_from) if args.cases_from else grid_cases(args)

    try:
        import torch
    except ImportError as e:
        fail(f"PyTorch is not installed ({e}); it is needed for the PyTorch rows")
    if not torch.cuda.is_available():
        fail("PyTorch sees no CUDA GPU (torch.cuda.is_available() is False); the PyTorch rows "
             "need one")
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32

    out = open(args.out, "w", newline="") if args.out else sys.stdout
    if not args.no_header:
        gpu = torch.cuda.get_device_name(0)
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        out.write("# cmd: python3 " + " ".join(sys.argv) + "\n")
        out.write(f"# gpu: {gpu}, {today}\n")
        out.write(f"# torch: {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
                  f"TF32 {'on' if args.tf32 else 'off'}\n")
        out.write(",".join(COLUMNS) + "\n")
    writer = csv.writer(out, lineterminator="\n")

    def median_us(run):
        for _ in range(args.warmup):
            run()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeats):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(1000.0 * start.elapsed_time(stop))
        return sorted(times)[len(times) // 2]  # the upper median, as bench/bench_timer.h

    for suite, case, cell, dtype, hidden, batch, steps, input_size in cases:
        impl = f"torch-{cell}" + ("-tf32" if args.tf32 else "")

        def row(metric, value, unit):
            writer.writerow([suite, case, impl, metric, f"{value:.6g}", unit])
            out.flush()
            print(f"{case:44s} {impl:18s} {metric:20s} {value:12.4g} {unit}", file=sys.stderr)

        try:
            if dtype not in DTYPE_NAMES:
                raise NotImplementedError(f"dtype {dtype} is not benchmarked")
            dev, dt = torch.device("cuda", 0), getattr(torch, DTYPE_NAMES[dtype])
            if cell == "lstm":
                module = torch.nn.LSTM(input_size, hidden)
            elif cell == "gru":
                module = torch.nn.GRU(input_size, hidden)
            else:
                module = torch.nn.RNN(input_size, hidden, nonlinearity=cell)
            module = module.to(device=dev, dtype=dt)
            module.flatten_parameters()  # one weight buffer, as cuDNN wants (no per-call copy)

            def uniform(*shape, grad=False):
                t = torch.rand(*shape, device=dev, dtype=torch.float32).mul_(2).sub_(1).to(dt)
                return t.requires_grad_(grad)

            x = uniform(steps, batch, input_size, grad=True)
            h0 = uniform(1, batch, hidden, grad=True)
            c0 = uniform(1, batch, hidden, grad=True) if cell == "lstm" else None
            dy = uniform(steps, batch, hidden)
            dhn, dcn = uniform(1, batch, hidden), uniform(1, batch, hidden)
            inputs = [x, h0] + ([c0] if c0 is not None else []) + list(module.parameters())

            def forward():
                if c0 is not None:
                    y, (hn, cn) = module(x, (h0, c0))
                    return [y, hn, cn], [dy, dhn, dcn]
                y, hn = module(x, h0)
                return [y, hn], [dy, dhn]

            def forward_backward():
                outputs, grads = forward()
                torch.autograd.grad(outputs, inputs, grad_outputs=grads)

            fwd = median_us(forward)
            row("fwd_us_per_step", fwd / steps, "us")
            flops = 2.0 * batch * CELLS[cell] * hidden * (input_size + hidden) * steps
            row("fwd_tflops", flops / (fwd * 1e6), "TFLOP/s")
            row("fwdbwd_us_per_step", median_us(forward_backward) / steps, "us")
        except (RuntimeError, NotImplementedError, ValueError) as e:
            text = str(e).splitlines()[0] if str(e) else type(e).__name__
            unsupported = isinstance(e, NotImplementedError) or any(
                s in text.lower() for s in ("not implemented", "not supported", "unsupported"))
            print(f"{case} {impl}: {text}", file=sys.stderr)
            row("status", 0.0, "not_supported" if unsupported else "error")
        finally:
            torch.cuda.empty_cache()
    if out is not sys.stdout:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
