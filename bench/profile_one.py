#!/usr/bin/env python3
"""Runs one flashattn forward (or, with --backward, forward + backward) shape a few
times, for ncu to profile the last launch of a kernel.
    ncu --kernel-name regex:fa_cuda_fwd_d --launch-skip 3 --launch-count 1 \
        python3 bench/profile_one.py --dim 128 --seqlen 4096 [--causal]
    ncu --kernel-name regex:_dkdv --launch-skip 3 --launch-count 1 \
        python3 bench/profile_one.py --dim 128 --seqlen 4096 --backward [--deterministic]
--fa2 runs torch SDPA's FLASH_ATTENTION backend instead (FlashAttention-2), --cudnn its
CUDNN_ATTENTION backend, for the same ncu metrics on their kernels (e.g. --kernel-name
regex:flash_bwd_dq_dk_dv; bench/ncu_stalls.sh knows the names).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--dim", type=int, default=128)
ap.add_argument("--seqlen", type=int, default=4096)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--backward", action="store_true")
ap.add_argument("--deterministic", action="store_true")
ap.add_argument("--fa2", action="store_true")
ap.add_argument("--cudnn", action="store_true")
a = ap.parse_args()
b, h = 16384 // a.seqlen, 2048 // a.dim
q, k, v = (torch.randn(b, a.seqlen, h, a.dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(4):
    if a.fa2 or a.cudnn:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention as sdpa
        leaves = [t.transpose(1, 2).detach().requires_grad_(a.backward) for t in (q, k, v)]
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION if a.cudnn else SDPBackend.FLASH_ATTENTION]):
            o = sdpa(*leaves, is_causal=a.causal)
        if a.backward:
            o.backward(torch.randn_like(o))
    elif a.backward:
        out, lse = flashattn.attention(q, k, v, causal=a.causal, return_lse=True)
        flashattn.attention_backward(torch.randn_like(out), q, k, v, out, lse, causal=a.causal,
                                     deterministic=a.deterministic)
    else:
        flashattn.attention(q, k, v, causal=a.causal)
torch.cuda.synchronize()
