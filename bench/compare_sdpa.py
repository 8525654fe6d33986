#!/usr/bin/env python3
"""Side-by-side forward benchmark on one GPU, in one process, on the same inputs:
flashattn vs torch SDPA's FLASH_ATTENTION (FlashAttention-2) and CUDNN_ATTENTION backends.

Shapes as docs/anchors.md#shapes-and-flop-counting: b*s = 16384 tokens, h*d = 2048,
FLOPs = 4*b*h*s^2*d (halved when causal). q/k/v are allocated in torch's [b, h, s, d]
layout; flashattn reads the same memory as a strided BSHD view (any outer strides are part
of its contract). Each dtype's dense matrix rate (cuBLAS 8192^3) is measured first in the
same run; "of ceil" is flashattn's rate as a fraction of it.

    python3 bench/compare_sdpa.py [--dims 64,128,256] [--seqlens 512,...] [--dtypes bf16,f16]
                                  [--json out.json]
"""
import argparse
import json
import os
import sys

import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}  # the library's spelling (fa_dtype_name)


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def time_ms(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def sdpa_fn(backend, q, k, v, causal):
    def run():
        with sdpa_kernel([backend]):
            return sdpa(q, k, v, is_causal=causal)
    return run


def backward_fn(forward, inputs, dout):
    """Times only the backward: the graph is built once and replayed (retain_graph)."""
    leaves = [t.detach().requires_grad_(True) for t in inputs]
    out = forward(*leaves)

    def run():
        torch.autograd.grad(out, leaves, dout, retain_graph=True)
    return run


def bench_backward(row, q, k, v, causal, flops):
    """Backward TFLOP/s (2.5x the forward's FLOPs) of flashattn (default: dQ by atomics;
    deterministic: dQ in its own pass) and the SDPA backends."""
    dout = torch.randn_like(q)

    def ours(deterministic):
        return backward_fn(lambda a, b, c: flashattn.flash_attn_func(
            a.transpose(1, 2), b.transpose(1, 2), c.transpose(1, 2), causal=causal,
            deterministic=deterministic).transpose(1, 2), (q, k, v), dout)
    for name, fn in (("flashattn_bwd", lambda: ours(False)),
                     ("flashattn_bwd_det", lambda: ours(True)),
                     ("fa2_bwd", lambda: backward_fn(sdpa_fn_args(SDPBackend.FLASH_ATTENTION, causal), (q, k, v), dout)),
                     ("cudnn_bwd", lambda: backward_fn(sdpa_fn_args(SDPBackend.CUDNN_ATTENTION, causal), (q, k, v), dout))):
        try:
            row[name] = tflops(2.5 * flops, time_ms(fn()))
        except (RuntimeError, flashattn.FlashAttnError) as err:
            row[name] = None
            row[name + "_error"] = str(err).splitlines()[0]


def sdpa_fn_args(backend, causal):
    def run(q, k, v):
        with sdpa_kernel([backend]):
            return sdpa(q, k, v, is_causal=causal)
    return run


def bench_row(d, s, causal, dtype, backward=False, forward=True):
    b, h = 16384 // s, 2048 // d
    gen = torch.Generator(device="cuda").manual_seed(s * 1000 + d)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
    qf, kf, vf = (t.transpose(1, 2) for t in (q, k, v))  # BSHD views of the same memory
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    out = torch.empty_like(qf)
    ours = lambda: flashattn.attention(qf, kf, vf, causal=causal, out=out)  # noqa: E731
    row = {"d": d, "seqlen": s, "causal": causal, "dtype": str(dtype).split(".")[-1], "batch": b, "heads": h}
    ref = sdpa_fn(SDPBackend.FLASH_ATTENTION, q, k, v, causal)()
    ours()
    row["max_abs_diff_vs_fa2"] = (out.transpose(1, 2).float() - ref.float()).abs().max().item()
    row["flashattn"] = tflops(flops, time_ms(ours)) if forward else None
    for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)) if forward else ():
        try:
            row[name] = tflops(flops, time_ms(sdpa_fn(backend, q, k, v, causal)))
        except RuntimeError as err:  # a backend that refuses the shape
            row[name] = None
            row[name + "_error"] = str(err).splitlines()[0]
    if backward:
        bench_backward(row, q, k, v, causal, flops)
    return row


def matrix_ceiling(dtype, n=8192):
    """The device's dense matrix rate in this run: torch.matmul (cuBLAS) of n x n x n in
    `dtype`, TFLOP/s, so that a kernel's rate can be read as a fraction of it."""
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    return tflops(2.0 * n ** 3, time_ms(lambda: torch.matmul(a, b)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--dtypes", default="bf16,f16")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--backward", action="store_true", help="also time the backward pass")
    ap.add_argument("--no-forward", action="store_true", help="with --backward: skip timing the forward")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    ceilings = {dt: matrix_ceiling(DTYPES[dt]) for dt in args.dtypes.split(",")}
    for dt, rate in ceilings.items():
        print("matrix ceiling %s (cuBLAS 8192^3, this run): %.1f TFLOP/s" % (dt, rate), flush=True)
    print("%-5s %-4s %6s %-6s %9s %9s %9s %7s %7s %9s %8s" % ("dtype", "d", "seqlen", "causal", "ours", "FA2", "cuDNN",
                                                       "vs FA2", "vs cuDNN", "maxdiff", "of ceil"), flush=True)
    for dt in args.dtypes.split(","):
        for d in map(int, args.dims.split(",")):
            for s in map(int, args.seqlens.split(",")):
                for causal in (c == "1" for c in args.causal.split(",")):
                    r = bench_row(d, s, causal, DTYPES[dt], args.backward, not args.no_forward)
                    rows.append(r)
                    ratio = lambda other: ("%7.2f" % (r["flashattn"] / r[other])) if r.get(other) else "    n/a"  # noqa: E731
                    r["ceiling"] = ceilings[dt]
                    if r["flashattn"] is not None:
                        print("%-5s %-4d %6d %-6s %9.1f %9s %9s %7s %7s %9.2e %8.2f" % (
                            dt, d, s, "yes" if causal else "no", r["flashattn"],
                            "%.1f" % r["fa2"] if r.get("fa2") else "n/a",
                            "%.1f" % r["cudnn"] if r.get("cudnn") else "n/a",
                            ratio("fa2"), ratio("cudnn"), r["max_abs_diff_vs_fa2"], r["flashattn"] / ceilings[dt]),
                              flush=True)
                    if args.backward:
                        fmt = lambda key: "%.1f" % r[key] if r.get(key) else "n/a"  # noqa: E731
                        rel = lambda key: "%.2f" % (r["flashattn_bwd"] / r[key]) if r.get(key) and r.get("flashattn_bwd") else "n/a"  # noqa: E731
                        det = "%.2f" % (r["flashattn_bwd_det"] / r["fa2_bwd"]) if r.get("flashattn_bwd_det") and r.get("fa2_bwd") else "n/a"
                        det_default = "%.2f" % (r["flashattn_bwd_det"] / r["flashattn_bwd"]) if r.get("flashattn_bwd_det") and r.get("flashattn_bwd") else "n/a"
                        print("%-5s %-4d %6d %-6s bwd: ours %s (deterministic %s)  FA2 %s  cuDNN %s  vs FA2 %s (det %s)  vs cuDNN %s  det/default %s" % (
                            dt, d, s, "yes" if causal else "no", fmt("flashattn_bwd"), fmt("flashattn_bwd_det"), fmt("fa2_bwd"), fmt("cudnn_bwd"),
                            rel("fa2_bwd"), det, rel("cudnn_bwd"), det_default), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "matrix_ceiling": ceilings,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
