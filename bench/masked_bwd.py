#!/usr/bin/env python3
"""Backward TFLOP/s of flashattn alone under the masks and biases SDPA's FLASH and cuDNN
backends do not take (ALiBi, sliding windows), beside the same shape without them, in one
process: an A/B of two builds runs this once per build (FLASHATTN_LIBRARY), alternated.
Shapes as compare_sdpa.py: b*s = 16384 tokens, h*d = 2048; FLOPs 2.5 x the forward's
4*b*h*d x the visible (query, key) pairs: s^2, s^2 / 2 when causal (compare_sdpa.py's
convention), the window's exact count. q, k, v are contiguous [b, s, h, d] here (SDPA's
layout is not needed), so plain and causal rows differ slightly from compare_sdpa.py's.

    FLASHATTN_LIBRARY=<lib> python3 bench/masked_bwd.py [--dims 128] [--seqlens 1024,2048,4096]
"""
import argparse
import os
import sys

import torch
import triton.testing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402

# (name, causal, window, ALiBi)
VARIANTS = (("plain", False, (-1, -1), False), ("causal", True, (-1, -1), False),
            ("alibi", False, (-1, -1), True), ("causal+alibi", True, (-1, -1), True),
            ("window 512/512", False, (512, 512), False))


def visible_pairs(s, causal, window):
    if causal:
        return s * s / 2
    left, right = window
    if left < 0 and right < 0:
        return s * s
    return sum(min(s - 1, q + right if right >= 0 else s) - max(0, q - left if left >= 0 else 0) + 1
               for q in range(s))


def backward_tflops(d, s, dtype, causal, window, alibi):
    b, h = 16384 // s, 2048 // d
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(4))
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], device="cuda") if alibi else None
    leaves = [t.requires_grad_(True) for t in (q, k, v)]
    out = flashattn.flash_attn_func(*leaves, causal=causal, window_size=window, alibi_slopes=slopes)
    ms = triton.testing.do_bench(lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True),
                                 warmup=25, rep=100, return_mode="median")
    flops = 4 * b * h * d * visible_pairs(s, causal, window) * 2.5
    return flops / (ms * 1e-3) / 1e12


def rate_or_why(*shape):
    try:
        return f"{backward_tflops(*shape):14.1f}"
    except (RuntimeError, flashattn.FlashAttnError) as err:
        return f"{'(' + str(err).splitlines()[0][:11] + ')':>14}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", default="128")
    ap.add_argument("--seqlens", default="1024,2048,4096")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    a = ap.parse_args()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    print(f"# {torch.cuda.get_device_name()}, {a.dtype}, backward TFLOP/s; lib {os.environ.get('FLASHATTN_LIBRARY', '(default)')}")
    print("d     s    " + "".join(f"{name:>14}" for name, *_ in VARIANTS))
    for d in (int(x) for x in a.dims.split(",")):
        for s in (int(x) for x in a.seqlens.split(",")):
            print(f"{d:<5} {s:<5}" + "".join(rate_or_why(d, s, dtype, c, w, al) for _, c, w, al in VARIANTS))


if __name__ == "__main__":
    main()
