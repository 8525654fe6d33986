#!/usr/bin/env python3
"""Two builds of the forward on the same inputs, bit for bit: a kernel change that should not
change the arithmetic (a restructured loop, a moved wait) must leave every byte of O and
LSE as it was. Both libraries are loaded by path in one process (ab_decode.Library:
RTLD_LOCAL, the binding's state swapped between them). Cases: every warpgroup head dim,
fp16 and bf16, causal both ways, lengths off the tiles both ways, GQA 6/2, single keys,
one key tile, windows narrower than a tile, split-KV and softcap. Prints one line per
differing case and exits 1 if any differ.

    python3 bench/same_bits.py --a MAIN/libflashattn.so --b NEW/libflashattn.so
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_decode import Library  # noqa: E402
import flashattn  # noqa: E402

# (head dim, s_q, s_k, causal, window, num_splits, softcap)
CASES = [(d, sq, sk, causal, (-1, -1), 0, 0.0)
         for d in (64, 128, 192, 256) for sq, sk in ((301, 517), (517, 301), (1100, 1100), (300, 1), (300, 128))
         for causal in (False, True)]
CASES += [(d, 517, 450, False, w, 0, 0.0) for d in (64, 128, 256) for w in ((20, 0), (0, 30), (3, 5))]
CASES += [(d, 301, 3 * n - 7, c, (-1, -1), 3, 0.0) for d, n in ((64, 128), (128, 128), (256, 80)) for c in (False, True)]
CASES += [(d, 777, 901, True, (-1, -1), 0, 30.0) for d in (64, 128, 256)]


def inputs(d, sq, sk, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(2, sq, 6, d, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(2, sk, 2, d, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(2, sk, 2, d, device="cuda", dtype=dtype, generator=g)
    return q, k, v


def run(lib, case, dtype, seed):
    lib.use()
    d, sq, sk, causal, window, splits, softcap = case
    q, k, v = inputs(d, sq, sk, dtype, seed)
    out = torch.full_like(q, float("nan"))
    out, lse = flashattn.attention(q, k, v, causal=causal, window=window, num_splits=splits, softcap=softcap,
                                   return_lse=True, out=out)
    torch.cuda.synchronize()
    return out.view(torch.int16).clone(), lse.view(torch.int32).clone()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    a = ap.parse_args()
    libs = Library(a.a), Library(a.b)
    if os.path.realpath(a.a) != os.path.realpath(a.b) and libs[0].lib._handle == libs[1].lib._handle:
        sys.exit("same_bits: both paths opened one library (the comparison would be empty)")
    differ = 0
    for i, case in enumerate(CASES):
        for dtype in (torch.float16, torch.bfloat16):
            try:
                (oa, la), (ob, lb) = (run(lib, case, dtype, 1000 + i) for lib in libs)
            except flashattn.FlashAttnError as e:
                differ += 1
                print(f"error: {case} {dtype}: {e}")
                continue
            if not (torch.equal(oa, ob) and torch.equal(la, lb)):
                differ += 1
                print(f"differ: {case} {dtype}: {(oa != ob).sum().item()} output and "
                      f"{(la != lb).sum().item()} LSE values")
    print(f"same_bits: {2 * len(CASES) - differ} of {2 * len(CASES)} cases identical ({a.a} / {a.b})")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
