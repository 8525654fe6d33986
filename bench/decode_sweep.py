#!/usr/bin/env python3
"""Decode tiles and split counts, swept on one GPU: for each row, flashattn's graph-replay
time with every forced decode tile (FLASHATTN_FORCE_TILE) and split count
(params.num_splits), next to the dispatcher's own choice and SDPA cuDNN in the same
process. The data behind the dispatcher's decode ranking and split rule (bench/NOTES.md).

    python3 bench/decode_sweep.py [--rows 1x8192,16x8192] [--heads 32] [--kv-heads 8] [--dim 128]
                                  [--tiles 16x64,16x128,64x64] [--splits 0,8,16,32,64] [--page P]

--page P: flashattn reads the keys from a paged cache of page size P (compare_decode.py's
pools, pages in a random order) instead of the contiguous cache.
"""
import argparse
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402
from compare_decode import paged_call, timed_ms  # noqa: E402


def sweep_row(b, s_k, h, h_k, d, tiles, splits, page):
    torch.manual_seed(0)
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, s_k, h_k, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    kv_bytes = 2 * k.numel() * k.element_size()
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        cudnn_ms, _ = timed_ms(lambda: sdpa(qt, kt, vt, enable_gqa=h != h_k))
    print("b %d s_k %d h %d/%d d %d%s: %.0f MiB; cuDNN %.1f us (%.2f TB/s)"
          % (b, s_k, h, h_k, d, " paged P=%d" % page if page else "", kv_bytes / 2**20, cudnn_ms * 1e3,
             kv_bytes / cudnn_ms / 1e9), flush=True)

    def call(n):
        if not page:
            return lambda: flashattn.attention(q, k, v, num_splits=n, out=out)
        run, keep = paged_call(q, k, v, out, False, page, n)
        return lambda: (run(), keep)
    print("  %-8s" % "tile" + "".join("%10s" % ("auto" if n == 0 else "splits %d" % n) for n in splits))
    for tile in ["auto"] + tiles:
        if tile == "auto":
            os.environ.pop("FLASHATTN_FORCE_TILE", None)
        else:
            os.environ["FLASHATTN_FORCE_TILE"] = tile
        cells = []
        for n in splits:
            try:
                ms, _ = timed_ms(call(n))
                cells.append("%6.1f %.2f" % (ms * 1e3, cudnn_ms / ms))
            except Exception as e:  # noqa: BLE001 - a tile that does not fit is a cell, not a crash
                cells.append("%10s" % "n/a")
                print("    %s splits %d: %s" % (tile, n, str(e).splitlines()[0][:100]), file=sys.stderr)
        print("  %-8s" % tile + "".join("%10s" % c for c in cells), flush=True)
    os.environ.pop("FLASHATTN_FORCE_TILE", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1x8192,16x8192")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--tiles", default="16x64,16x128,64x64")
    ap.add_argument("--splits", default="0,8,16,24,32,48,64")
    ap.add_argument("--page", type=int, default=0)
    args = ap.parse_args()
    print("cells: us per call and cuDNN's time / ours (> 1: faster than cuDNN)")
    for pair in args.rows.split(","):
        b, s_k = (int(x) for x in pair.split("x"))
        sweep_row(b, s_k, args.heads, args.kv_heads, args.dim, [t for t in args.tiles.split(",") if t],
                  [int(x) for x in args.splits.split(",")], args.page)


if __name__ == "__main__":
    main()
