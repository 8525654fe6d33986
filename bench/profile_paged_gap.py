#!/usr/bin/env python3
"""One contiguous decode call with seqused_k, then one paged call over the same cache cut
into 256-key pages in order (the same bytes at the same places: only the table differs),
each three times (b 1 x 8192, bf16, h 32 / 8, d 128), for ncu to compare the decode
kernel of the two side by side (bench/decode_variants.py measured the paged call 1.5 us
slower at b 1 with the same layout):
    ncu --kernel-name regex:fa_cuda_dec --launch-skip 2 --launch-count 2 \
        --section WarpStateStats --section SourceCounters python3 bench/profile_paged_gap.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from compare_decode import paged_call  # noqa: E402
from decode_variants import with_seqused  # noqa: E402

q = torch.randn(1, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 8192, 8, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn_like(k)
out = torch.empty_like(q)
for run, _ in (with_seqused(q, k, v, out), paged_call(q, k, v, out, False, 256, 0, "identity")):
    for _ in range(3):
        run()
    torch.cuda.synchronize()
