#!/usr/bin/env python3
"""Where a decode call's time goes: the kernels of one flashattn decode call (and of SDPA
cuDNN's) with their device durations from torch.profiler, next to the graph-replay time
of the whole call with the library's own workspace and with a caller-owned one.

    python3 bench/decode_timeline.py [--rows 1x8192,16x8192] [--heads 32] [--kv-heads 8] [--dim 128]
"""
import argparse
import ctypes
import os
import sys

import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402


def graph_us(fn):
    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=50, return_mode="median") * 1e3


def kernels_us(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" and e.count >= reps:
            rows.append((e.key[:60], e.count // reps, e.device_time / max(e.count, 1)))
    return rows


def with_workspace(qb, kb, vb, out):
    """flashattn.attention's call with a caller-owned workspace (no allocation in the call)."""
    lib = flashattn.library()
    core = flashattn._core
    ctx = core._context(qb.device)
    params, _ = core._params(qb)
    views = [core._view(t) for t in (qb, kb, vb, out)]
    size = ctypes.c_size_t()
    core._check(ctx, lib.fa_fwd_workspace_size(ctx, *[ctypes.byref(x) for x in views[:3]],
                                                    ctypes.byref(params), ctypes.byref(size)))
    ws = torch.empty(max(size.value, 16), dtype=torch.uint8, device="cuda")

    def run():
        core._bind_stream(ctx, qb.device)
        core._check(ctx, lib.fa_fwd(ctx, *[ctypes.byref(x) for x in views[:3]], ctypes.byref(params),
                                         ctypes.byref(views[3]), None, ws.data_ptr(), size.value))
    return run, size.value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1x8192,16x8192,64x4096")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    a = ap.parse_args()
    for spec in a.rows.split(","):
        b, s_k = (int(x) for x in spec.split("x"))
        q = torch.randn(b, a.heads, 1, a.dim, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, a.kv_heads, s_k, a.dim, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        qb, kb, vb = (t.transpose(1, 2) for t in (q, k, v))
        out = torch.empty_like(qb)
        lib_ws = lambda: flashattn.attention(qb, kb, vb, out=out)  # noqa: E731
        own_ws, ws_bytes = with_workspace(qb, kb, vb, out)

        def cudnn():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return sdpa(q, k, v, enable_gqa=a.heads != a.kv_heads)
        print("b=%d s_k=%d: graph us: flashattn %.1f, with own workspace (%d B) %.1f, cuDNN %.1f"
              % (b, s_k, graph_us(lib_ws), ws_bytes, graph_us(own_ws), graph_us(cudnn)))
        for name, fn in (("flashattn", own_ws), ("cudnn", cudnn)):
            for key, per_call, us in kernels_us(fn):
                print("   %-9s %-60s x%d %7.1f us" % (name, key, per_call, us))


if __name__ == "__main__":
    main()
