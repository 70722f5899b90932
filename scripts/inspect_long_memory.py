#!/usr/bin/env python3
"""How well each first-layer cell of a long-memory checkpoint stores the first symbol.

Usage: scripts/inspect_long_memory.py CHECKPOINT...   (files written by `prnn train long-memory`)

The task's class is the sign of x_0 = ±e_0. A first-layer GILR-LSTM cell carries it to step T-1
with input gate i_0 = σ(±w_i0 + b_i) and candidate z_0 = tanh(±w_z0 + b_z), then decays through
its forget gates; the distractors add noise through the same cell. Per cell this prints an
estimate from the gates' input weights alone (the U·h̃ terms are left out, so it is a guide, not
the model's exact output):
  u       the cell's time scale, 1 / (1 - mean forget gate over the 127 distractors)
  decay   exp(-T / u): what is left at T-1 of what entered at t = 0
  signal  |i_0(+) z_0(+) - i_0(-) z_0(-)| · decay: the two classes' difference at T-1
  noise   spread of i_d·z_d over the distractors · sqrt(u / 2): the distractors' spread at T-1
  snr     signal / noise (above ~1 the classifier can read the class off this cell)
The six cells with the highest snr are listed, best first. Checkpoint layout: prnn/train.h
(read_long_memory_checkpoint); parameter layout: prnn/layers.h (GILR-LSTM).
"""
import math
import struct
import sys


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def inspect(path):
    data = open(path, 'rb').read()
    if data[:8] != b'PRNNLMCK':
        sys.exit(f"{path}: not a prnn long-memory checkpoint")
    off = 16  # magic, version, reserved
    alphabet, _classes, _layers, hidden, steps, batch = struct.unpack_from('<6q', data, off)
    off += 48 + 8  # ... and the seed
    lr, _b1, _b2, eps = struct.unpack_from('<4d', data, off)
    off += 32
    iteration, _drawn, _streak, n = struct.unpack_from('<4q', data, off)
    off += 32
    p = struct.unpack_from('<%df' % n, data, off)
    A, H, T = alphabet, hidden, steps
    W = lambda row, col: p[row * A + col]          # layer 1: W [6H, A] = (s; u; i; f; z; o)
    bias = lambda row: p[6 * H * A + 4 * H * H + row]  # then U [4H, H], then b [6H]
    cells = []
    for k in range(H):
        ri, rf, rz = 2 * H + k, 3 * H + k, 4 * H + k
        bi, bf, bz = bias(ri), bias(rf), bias(rz)
        wi0, wz0 = W(ri, 0), W(rz, 0)
        f_mean = sum(sigmoid(W(rf, d) + bf) for d in range(1, A)) / (A - 1)
        u = 1.0 / max(1e-12, 1.0 - f_mean)
        decay = math.exp(-T / u) if T / u < 700 else 0.0
        signal = abs(sigmoid(wi0 + bi) * math.tanh(wz0 + bz) -
                     sigmoid(-wi0 + bi) * math.tanh(-wz0 + bz)) * decay
        iz = [sigmoid(W(ri, d) + bi) * math.tanh(W(rz, d) + bz) for d in range(1, A)]
        mean = sum(iz) / len(iz)
        noise = math.sqrt(sum((v - mean) ** 2 for v in iz) / len(iz)) * math.sqrt(u / 2.0)
        cells.append((signal / max(noise, 1e-30), k, wi0, bi, wz0, u, decay, signal, noise))
    cells.sort(reverse=True)
    print(f"{path}: iteration {iteration}, T {T}, H {H}, B {batch}, lr {lr:g}, eps {eps:g}; "
          f"max |w_i0| {max(abs(c[2]) for c in cells):.3f}, max |w_z0| {max(abs(c[4]) for c in cells):.3f}")
    print("  snr      cell  w_i0     b_i      w_z0     u         decay     signal    noise")
    for c in cells[:6]:
        print("  %-8.3g %-5d %-8.3f %-8.2f %-8.3f %-9.3g %-9.3g %-9.3g %-9.3g" % c)


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for f in sys.argv[1:]:
        inspect(f)
