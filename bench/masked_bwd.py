#!/usr/bin/env python3
"""Backward TFLOP/s of flashattn alone under the masks and biases SDPA's FLASH and cuDNN
backends do not take (ALiBi, sliding windows), beside the same shape without them, in one
process: an A/B of two builds runs this once per build (FLASHATTN_LIBRARY), alternated.
Shapes as compare_sdpa.py: b*s = 16384 tokens, h*d = 2048; FLOPs 2.5 x the forward's
(4*b*h*s^2*d, halved when causal; the window's and ALiBi's visible share is not counted).

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
            ("window 1024", False, (512, 512), False))


def backward_tflops(d, s, dtype, causal, window, alibi):
    b, h = 16384 // s, 2048 // d
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(4))
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], device="cuda") if alibi else None
    leaves = [t.requires_grad_(True) for t in (q, k, v)]
    out = flashattn.flash_attn_func(*leaves, causal=causal, window_size=window, alibi_slopes=slopes)
    ms = triton.testing.do_bench(lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True),
                                 warmup=25, rep=100, return_mode="median")
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0) * 2.5
    return flops / (ms * 1e-3) / 1e12


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
            rates = [backward_tflops(d, s, dtype, c, w, al) for _, c, w, al in VARIANTS]
            print(f"{d:<5} {s:<5}" + "".join(f"{r:14.1f}" for r in rates))


if __name__ == "__main__":
    main()
