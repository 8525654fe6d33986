#!/usr/bin/env python3
"""Where a backward call's time goes, kernel by kernel: flashattn's backward (preprocess,
dK/dV, dQ conversion) and SDPA's cuDNN and FLASH (FA2) backward on the same inputs, timed
by torch.profiler (CUDA time per kernel, averaged over the repeats), in one process.
    python3 bench/bwd_kernel_times.py --dims 128 --seqlens 512,2048 [--causal 0,1]
Shapes as compare_sdpa.py's: b*s = 16k tokens, h*d = 2048, bf16.
"""
import argparse
import collections
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402


def backward_call(forward, inputs, dout):
    leaves = [t.detach().requires_grad_(True) for t in inputs]
    out = forward(*leaves)
    return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)


def kernel_times(fn, repeats):
    """Mean CUDA microseconds per call of each kernel fn launches, in launch order."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    total = collections.OrderedDict()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] = total.get(e.name, 0.0) + e.device_time / repeats
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", default="128")
    ap.add_argument("--seqlens", default="512,2048")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    for d in map(int, a.dims.split(",")):
        for s in map(int, a.seqlens.split(",")):
            for causal in (c == "1" for c in a.causal.split(",")):
                b, h = 16384 // s, 2048 // d
                q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                dout = torch.randn_like(q)
                calls = {
                    "flashattn": backward_call(lambda x, y, z: flashattn.flash_attn_func(
                        x.transpose(1, 2), y.transpose(1, 2), z.transpose(1, 2), causal=causal,
                        deterministic=a.deterministic).transpose(1, 2), (q, k, v), dout),
                }
                for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
                    def fwd(x, y, z, backend=backend):
                        with sdpa_kernel([backend]):
                            return sdpa(x, y, z, is_causal=causal)
                    calls[name] = backward_call(fwd, (q, k, v), dout)
                print("== d%d s%d b%d h%d %s" % (d, s, b, h, "causal" if causal else "non-causal"), flush=True)
                for name, fn in calls.items():
                    times = kernel_times(fn, a.repeats)
                    print("  %-9s total %8.1f us" % (name, sum(times.values())))
                    for kernel, us in times.items():
                        print("    %8.1f us  %s" % (us, kernel[:110]))


if __name__ == "__main__":
    main()
