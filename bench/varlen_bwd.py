#!/usr/bin/env python3
"""Varlen backward side by side in one process, on the same packed inputs: flashattn's
fa_bwd against FlashAttention-2's varlen backward as PyTorch ships it
(torch.ops.aten._flash_attention_backward with cumulative sequence offsets, what nested
tensors run), and flashattn's fixed-length backward at the mean length for scale.

A packed batch: 16384 tokens, h*d = 2048, sequence lengths drawn uniformly from
[s/2, 3s/2] (seeded, the last one cut to fill the tokens), so most sequences end inside a
tile; --equal makes every one s long (a varlen call over the fixed-length shape). FLOPs 2.5 x the forward's 4*h*d x the visible pairs of each sequence (s_i^2, half
that when causal: compare_sdpa.py's convention). Both libraries get the same q, k, v,
dout, out and LSE (each its own forward's) and write into preallocated gradients; the
timed call is the backward alone.

    FLASHATTN_LIBRARY=<lib> python3 bench/varlen_bwd.py [--dims 64,128,256] [--seqlens 1024,2048,4096] [--equal]
"""
import argparse
import os
import sys

import torch
import triton.testing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from flashattn import _core  # noqa: E402
from varlen_packing import TOKENS, lengths_for  # noqa: E402


def time_ms(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def tflops(lengths, h, d, causal, ms):
    pairs = sum(s * s / (2 if causal else 1) for s in lengths)
    return 2.5 * 4 * h * d * pairs / (ms * 1e-3) / 1e12


def ours(q, k, v, dout, cu, max_s, causal, deterministic=False):
    """flashattn's backward (after its forward) over the packed rows, or fixed length when cu
    is None (then q, k, v are [b, s, h, d])."""
    opts = dict(causal=causal, deterministic=deterministic)
    if cu is not None:
        opts.update(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_s, max_seqlen_k=max_s)
    out = torch.empty_like(q)
    rows = q.shape[0] if cu is not None else q.shape[1]
    lse_shape = (q.shape[1], rows) if cu is not None else (q.shape[0], q.shape[2], rows)
    lse = torch.empty(lse_shape, device=q.device, dtype=torch.float32)
    _core.fwd(q, k, v, out, lse, **opts)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    return lambda: _core.bwd(dout, q, k, v, out, lse, dq, dk, dv, **opts)


def fa2(q, k, v, dout, cu, max_s, causal):
    """PyTorch's FlashAttention-2 varlen backward (after its forward)."""
    out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, max_s, max_s, 0.0, causal,
                                                                       False)
    return lambda: torch.ops.aten._flash_attention_backward(dout, q, k, v, out, lse, cu, cu, max_s, max_s, 0.0,
                                                            causal, rng, unused)


def rate(make, lengths, h, d, causal):
    try:
        return f"{tflops(lengths, h, d, causal, time_ms(make())):10.1f}"
    except Exception as err:  # an anchor this PyTorch build lacks: say so and go on
        return f"{'(' + str(err).splitlines()[0][:8] + ')':>10}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--seqlens", default="1024,2048,4096")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    ap.add_argument("--equal", action="store_true", help="every sequence of the mean length (still varlen)")
    a = ap.parse_args()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    print(f"# {torch.cuda.get_device_name()}, {a.dtype}, varlen backward TFLOP/s; "
          f"lib {os.environ.get('FLASHATTN_LIBRARY', '(default)')}")
    print(f"{'d':<4} {'mean s':<7} {'seqs':<5} {'causal':<7}{'ours':>10}{'ours det':>10}{'FA2':>10}"
          f"{'vs FA2':>8}{'fixed':>10}")
    for d in (int(x) for x in a.dims.split(",")):
        h = 2048 // d
        for mean in (int(x) for x in a.seqlens.split(",")):
            lengths = lengths_for(mean, a.equal)
            cu = torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(len(lengths))], device="cuda",
                              dtype=torch.int32)
            max_s = max(lengths)
            q, k, v, dout = (torch.randn(TOKENS, h, d, device="cuda", dtype=dtype) for _ in range(4))
            fixed = [t.view(TOKENS // mean, mean, h, d) for t in (q, k, v, dout)]
            for causal in (False, True):
                mine = rate(lambda: ours(q, k, v, dout, cu, max_s, causal), lengths, h, d, causal)
                det = rate(lambda: ours(q, k, v, dout, cu, max_s, causal, True), lengths, h, d, causal)
                theirs = rate(lambda: fa2(q, k, v, dout, cu, max_s, causal), lengths, h, d, causal)
                same = rate(lambda: ours(*fixed, None, mean, causal), [mean] * (TOKENS // mean), h, d, causal)
                ratio = f"{float(mine) / float(theirs):8.2f}" if "(" not in mine + theirs else f"{'-':>8}"
                print(f"{d:<4} {mean:<7} {len(lengths):<5} {int(causal):<7}{mine}{det}{theirs}{ratio}{same}")


if __name__ == "__main__":
    main()
