#!/usr/bin/env python3
"""Runs issue 12's two small decode rows (b 1 and 16, s_k 8192; bf16, h 32, h_k 8, d 128)
three times each through flashattn and torch SDPA's cuDNN backend, then b 1 from a paged
cache (P = 16) through flashattn, for ncu to time every kernel side by side:
    ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        python3 bench/profile_decode.py
"""
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402

for b, s_k in ((1, 8192), (16, 8192)):
    q = torch.randn(b, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, 8, s_k, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    qb, kb, vb = (t.transpose(1, 2) for t in (q, k, v))
    out = torch.empty_like(qb)
    for _ in range(3):
        flashattn.attention(qb, kb, vb, out=out)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            sdpa(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()

# The same b 1 row read from a paged cache (16-key pages, with seqused_k): the device check's
# kernels, the forward and the combine.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_decode import paged_call  # noqa: E402

q = torch.randn(1, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 8192, 8, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn_like(k)
out = torch.empty_like(q)  # lives as long as the calls that write it
run, keep = paged_call(q, k, v, out, False, 16)
for _ in range(3):
    run()
torch.cuda.synchronize()
