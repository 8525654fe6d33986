#!/usr/bin/env python3
"""llama_profile.py - where a training step of bench/llama_step.py's model goes: one step
of each attention implementation (SDPA, flashattn) under torch.profiler after warm-up,
reported as the step's time, the GPU's busy time (the union of kernel intervals), the
idle rest, the kernels grouped (attention forward / backward and the library's helper
kernels, GEMMs, everything else) and the host's synchronizing calls. A step that takes
longer without its kernels taking longer is waiting on the host.

Usage: python3 bench/llama_profile.py [--shapes 4x2048,1x8192] [--warmup 3] [--top 12]
Needs what llama_step.py needs.
"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_step  # noqa: E402

SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy ",
              "cudaMemcpy", "cuStreamSynchronize", "cuCtxSynchronize")


def kernel_group(name):
    """A coarse class of a CUDA kernel by its name."""
    low = name.lower()
    if "fa_" in low or "flashattn" in low:
        return "flashattn kernels"
    if "flash" in low or "fmha" in low or "cudnn" in low or "attention" in low or "sdpa" in low:
        return "SDPA attention kernels"
    if "gemm" in low or "cutlass" in low or "sm90_xmma" in low or "nvjet" in low or "cublas" in low:
        return "GEMM"
    if "adam" in low or "foreach" in low or "multi_tensor" in low:
        return "optimizer"
    return "other"


def busy_us(intervals):
    """Length of the union of [start, end) intervals."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def profile_step(model, optimizer, tokens):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        ms = llama_step.timed_step(model, optimizer, tokens)
    kernels, syncs = [], collections.Counter()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.time_range.elapsed_us() > 0:
            kernels.append((ev.name, ev.time_range.start, ev.time_range.end))
        elif any(ev.name.startswith(s) for s in SYNC_CALLS):
            syncs[ev.name] += 1
    return ms, kernels, syncs


def report(label, ms, kernels, syncs, top):
    busy = busy_us([(s, e) for _, s, e in kernels]) / 1000
    groups = collections.defaultdict(lambda: [0.0, 0])
    names = collections.defaultdict(lambda: [0.0, 0])
    for name, s, e in kernels:
        for table, key in ((groups, kernel_group(name)), (names, name[:90])):
            table[key][0] += (e - s) / 1000
            table[key][1] += 1
    print(f"### {label}: step {ms:.2f} ms, GPU busy {busy:.2f} ms, idle {ms - busy:.2f} ms, "
          f"{len(kernels)} kernels")
    print("| group | ms | kernels |\n|---|---|---|")
    for key, (t, n) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        print(f"| {key} | {t:.2f} | {n} |")
    print(f"top {top} kernels by time:")
    for key, (t, n) in sorted(names.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {t:8.3f} ms  {n:5d}  {key}")
    print("synchronizing host calls:", dict(syncs) or "none", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4x2048,1x8192")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    name = llama_step.fa_hf.register()
    ref = llama_step.make_model("sdpa")
    models = {"sdpa": ref, "flashattn": llama_step.make_model(name, ref.state_dict())}
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for shape in args.shapes.split(","):
        batch, seq = (int(x) for x in shape.split("x"))
        tokens = torch.randint(0, 32000, (batch, seq), device="cuda")
        for label, model in models.items():
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
            for _ in range(args.warmup):
                llama_step.step(model, optimizer, tokens)
            report(f"{label} {batch} x {seq}", *profile_step(model, optimizer, tokens), args.top)
            del optimizer
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
