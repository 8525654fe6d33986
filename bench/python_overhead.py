"""What the Python layer costs per call (GPU machine): a small decode call, where the GPU
work is a few microseconds and the host is the limit, timed end to end in eager mode for
flashattn's entry points (the direct ctypes call, flash_attn_func without and with a gradient to record,
flash_attn_with_kvcache) and SDPA's FLASH and cuDNN backends in the same process, and
the flashattn call replayed from a CUDA graph (no host work per call). Median of 7 runs of
200 back-to-back calls each, microseconds per call. --profile: cProfile of the custom-op
call (q requires grad), the 15 entries with the most time of their own.
Run: FLASHATTN_LIBRARY=... python3 bench/python_overhead.py [--profile]"""
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402
from graph_timeline import capture  # noqa: E402

CALLS = 200


def per_call_us(fn):
    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - start) / CALLS * 1e6)
    return statistics.median(runs)


def main():
    b, s_k, h, h_k, d = 1, 4096, 32, 8, 128
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, s_k, h_k, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = torch.empty_like(q)
    q_grad = q.clone().requires_grad_(True)
    seqlens = torch.full((b,), s_k, dtype=torch.int32, device="cuda")
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    rows = [("flashattn.attention (direct ctypes call)", lambda: flashattn.attention(q, k, v, out=out)),
            ("flash_attn_func (no grad: the op layer skipped)", lambda: flashattn.flash_attn_func(q, k, v)),
            ("flash_attn_func (q requires grad: custom op)", lambda: flashattn.flash_attn_func(q_grad, k, v)),
            ("flash_attn_with_kvcache", lambda: flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens))]
    for name, backend in (("SDPA FLASH", SDPBackend.FLASH_ATTENTION), ("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION)):
        def call(backend=backend):
            with sdpa_kernel(backend):
                return sdpa(qt, kt, vt, enable_gqa=True)
        try:
            call()
            rows.append((name, call))
        except RuntimeError as e:
            print("%s: not available (%s)" % (name, str(e).splitlines()[0][:80]))
    print("decode b %d s_k %d h %d/%d d %d bf16, torch %s: us per call (eager: host-bound)"
          % (b, s_k, h, h_k, d, torch.__version__))
    for name, fn in rows:
        print("  %-44s %8.1f" % (name, per_call_us(fn)))
    if "--profile" in sys.argv:
        profile = cProfile.Profile()
        profile.runcall(lambda: [rows[2][1]() for _ in range(2000)])
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    graph = capture(lambda: flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens), CALLS)
    graph_us = per_call_us(graph.replay) / CALLS
    print("  %-44s %8.1f" % ("flash_attn_with_kvcache in a CUDA graph", graph_us))


if __name__ == "__main__":
    main()
