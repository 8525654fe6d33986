#!/usr/bin/env python3
"""Where a paged decode call's extra time comes from: one row's graph-replay time, in one
process and alternating rounds, for the contiguous call, the contiguous call with
seqused_k (the paged call's first dependent read), and paged calls by page size and page
order (identity: the pool is the contiguous cache cut into pages; random: compare_decode.py's
permutation). Each step adds one difference to the one before.

    python3 bench/decode_variants.py [--row 1x8192] [--pages 16,256] [--rounds 7]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402
from ab_decode import CALLS, replay_us  # noqa: E402
from compare_decode import paged_call  # noqa: E402
from graph_timeline import capture  # noqa: E402


def with_seqused(q, k, v, out):
    """The contiguous call with seqused_k = s_k for every sequence (a device array)."""
    used = torch.full((q.shape[0],), k.shape[1], device="cuda", dtype=torch.int32)
    return (lambda: flashattn._core.fwd(q, k, v, out, None, seqused_k=used)), used


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", default="1x8192")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--pages", default="16,256")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    b, s_k = (int(x) for x in a.row.split("x"))
    torch.manual_seed(0)
    q = torch.randn(b, 1, a.heads, a.dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, s_k, a.kv_heads, a.dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    calls = [("contiguous", (lambda: flashattn.attention(q, k, v, out=out)), None),
             ("contiguous + seqused_k",) + with_seqused(q, k, v, out)]
    for page in [int(p) for p in a.pages.split(",")]:
        for order in ("identity", "random"):
            calls.append(("paged P=%d %s" % (page, order),) + paged_call(q, k, v, out, False, page, 0, order))
        calls.append(("paged P=%d random, no seqused" % page,) + paged_call(q, k, v, out, False, page, 0, "random", False))
    graphs = [capture(run, CALLS) for _, run, _ in calls]
    times = [[] for _ in calls]
    for _ in range(a.rounds):
        for i, graph in enumerate(graphs):
            times[i].append(replay_us(graph))
    base = statistics.median(times[0])
    print("b %d s_k %d h %d/%d d %d: us per call, median of %d rounds" % (b, s_k, a.heads, a.kv_heads, a.dim, a.rounds))
    for (name, _, _), t in zip(calls, times):
        us = statistics.median(t)
        print("  %-34s %7.2f  x%.3f of contiguous  (spread %.2f)" % (name, us, us / base, max(t) - min(t)))


if __name__ == "__main__":
    main()
