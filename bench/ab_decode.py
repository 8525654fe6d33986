#!/usr/bin/env python3
"""Two builds of the library side by side in one process, on the same inputs: each
decode row's graph-replay time through library A and library B in alternating rounds, so
a change worth a few tenths of a microsecond is not lost in the spread between processes
(bench/NOTES.md dec7: b 1 x 8192 moved 8.99-9.28 us between calls). Both libraries are
loaded by path with ctypes (RTLD_LOCAL: their symbols do not meet); the binding's module
state is swapped between them.

    python3 bench/ab_decode.py --a OLD/libflashattn.so --b NEW/libflashattn.so
                               [--rows 1x8192,16x8192] [--pages 16] [--rounds 7]
"""
import argparse
import ctypes
import os
import statistics
import sys

import torch
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402
from compare_decode import paged_call  # noqa: E402
from graph_timeline import capture  # noqa: E402

CALLS = 10  # calls per captured graph


class Library:
    """One build's ctypes library and contexts, installed into the binding on use."""

    def __init__(self, path):
        os.environ["FLASHATTN_LIBRARY"] = os.path.abspath(path)
        flashattn._library._lib, flashattn._core._contexts = None, {}
        self.lib, self.contexts = flashattn.library(), flashattn._core._contexts
        self.path = path

    def use(self):
        flashattn._library._lib, flashattn._core._contexts = self.lib, self.contexts


def replay_us(graph):
    ms = triton.testing.do_bench(graph.replay, warmup=10, rep=40, return_mode="median")
    return ms * 1e3 / CALLS


def row_calls(lib, b, s_k, h, h_k, d, page):
    """The row's flashattn call through `lib` (contiguous, or paged with page size `page`)."""
    lib.use()
    torch.manual_seed(0)
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, s_k, h_k, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    if page:
        run, keep = paged_call(q, k, v, out, False, page)
    else:
        run, keep = (lambda: flashattn.attention(q, k, v, out=out)), None
    return capture(run, CALLS), (q, k, v, out, keep)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="library A (the baseline)")
    ap.add_argument("--b", required=True, help="library B")
    ap.add_argument("--rows", default="1x8192,16x8192")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--pages", default="0", help="0: contiguous; P: paged, page size P")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    libs = [Library(a.a), Library(a.b)]
    entry = [ctypes.cast(lib.lib.fa_fwd, ctypes.c_void_p).value for lib in libs]
    if entry[0] == entry[1]:  # the loader handed back the first library for the second path
        sys.exit("A and B resolve to the same fa_fwd: two copies of one build, or one library loaded twice")
    print("A = %s\nB = %s\nus per call, median of %d alternating rounds (each a median of graph replays)"
          % (a.a, a.b, a.rounds))
    for spec in a.rows.split(","):
        b, s_k = (int(x) for x in spec.split("x"))
        for page in [int(p) for p in a.pages.split(",")]:
            graphs = [row_calls(lib, b, s_k, a.heads, a.kv_heads, a.dim, page) for lib in libs]
            times = [[], []]
            for _ in range(a.rounds):
                for i in (0, 1):
                    times[i].append(replay_us(graphs[i][0]))
            ta, tb = (statistics.median(t) for t in times)
            print("b %-3d s_k %-7d %-9s A %8.2f  B %8.2f  B/A %.3f  (spread A %.2f, B %.2f)"
                  % (b, s_k, "P=%d" % page if page else "contig", ta, tb, tb / ta,
                     max(times[0]) - min(times[0]), max(times[1]) - min(times[1])))


if __name__ == "__main__":
    main()
