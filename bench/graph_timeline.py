#!/usr/bin/env python3
"""Where a decode call's time goes inside a CUDA graph: every kernel of one call with its
start and end relative to the call's first kernel, and the period between calls, from
torch.profiler's device trace of graph replays (each graph holds `--calls` calls back to
back, the way compare_decode.py times them). Rows: flashattn contiguous, flashattn from a
paged cache (compare_decode.py's paged call, seqused_k and a random page order), SDPA
cuDNN. Gaps between kernels are what launch chains and dependent waits cost; a kernel
that starts before the previous one ends overlaps it (programmatic dependent launch).

    python3 bench/graph_timeline.py [--rows 1x8192] [--pages 16,256] [--calls 10]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402
from compare_decode import paged_call  # noqa: E402


def capture(fn, calls):
    """A CUDA graph of `calls` calls of fn, after one plain call (first-call set-up)."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def graph_kernels(fn, calls, replays=5):
    """The device kernels of `replays` replays of a graph of `calls` calls of fn, as
    (name, start us, end us) in time order."""
    graph = capture(fn, calls)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    kernels = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("cat") == "kernel"]
    return sorted(kernels, key=lambda k: k[1])


def call_timeline(kernels, per_call):
    """Median start / end of each kernel of a call relative to the call's first kernel's
    start, and the median period between calls (the first and last call of each replay
    are left out: they border the replay's own launch)."""
    calls = [kernels[i:i + per_call] for i in range(0, len(kernels) - per_call + 1, per_call)]
    inner = calls[1:-1]
    rows = []
    for j in range(per_call):
        starts = [c[j][1] - c[0][1] for c in inner]
        ends = [c[j][2] - c[0][1] for c in inner]
        rows.append((calls[0][j][0], statistics.median(starts), statistics.median(ends)))
    periods = [b[0][1] - a[0][1] for a, b in zip(calls, calls[1:]) if 0 < b[0][1] - a[0][1] < 1e4]
    return rows, statistics.median(periods)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1x8192")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--pages", default="16,256")
    ap.add_argument("--calls", type=int, default=10)
    a = ap.parse_args()
    for spec in a.rows.split(","):
        b, s_k = (int(x) for x in spec.split("x"))
        torch.manual_seed(0)
        q = torch.randn(b, a.heads, 1, a.dim, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, a.kv_heads, s_k, a.dim, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        qb, kb, vb = (t.transpose(1, 2) for t in (q, k, v))
        out = torch.empty_like(qb)
        fns = {"flashattn": lambda: flashattn.attention(qb, kb, vb, out=out)}
        keep = []
        for page in [int(p) for p in a.pages.split(",") if p]:
            run, held = paged_call(qb, kb, vb, torch.empty_like(qb), False, page)
            fns["paged P=%d" % page] = run
            keep.append(held)

        def cudnn():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return sdpa(q, k, v, enable_gqa=a.heads != a.kv_heads)
        fns["cudnn"] = cudnn
        for name, fn in fns.items():
            kernels = graph_kernels(fn, a.calls, replays=5)
            per_call = len(kernels) // (5 * a.calls)
            rows, period = call_timeline(kernels, per_call)
            print("b=%d s_k=%d %-12s period %6.2f us (%d kernels a call)" % (b, s_k, name, period, per_call))
            for kname, start, end in rows:
                print("    %7.2f .. %7.2f us  (%6.2f)  %s" % (start, end, end - start, kname[:70]))


if __name__ == "__main__":
    main()
