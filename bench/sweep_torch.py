#!/usr/bin/env python3
"""The anchors' side of a sweep: the providers PyTorch offers on this machine, measured in
one process on the same inputs, for the shapes of a flashattn_bench preset, written in the
sweep schema (bench/sweep_schema.json) that bench/report.py reads.

Providers: flashattn through its Python package (the library's kernels; paged rows through
a block table), SDPA's FLASH_ATTENTION, CUDNN_ATTENTION and EFFICIENT_ATTENTION backends,
and flash_attn when it is installed. A provider that cannot run a shape gets the row with
its reason as the status (SDPA has no paged K/V). The shapes, their FLOP and byte counts
come from `flashattn_bench --sweep PRESET --list`, so both tools count the same rows; the
ceilings (bf16 matrix product 8192^3 through torch.matmul, device-to-device copy of 1 GiB)
are measured in the same run.

    python3 bench/sweep_torch.py --preset training --bench .carry/flashattn_bench --out sweep.json
"""
import argparse
import datetime
import glob
import json
import os
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402

try:
    import triton.testing as _triton_testing
except ImportError:
    _triton_testing = None
try:
    import flash_attn as _flash_attn
except ImportError:
    _flash_attn = None

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
SDPA = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
        "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION}


def time_ms(fn):
    """Median ms per call: triton's do_bench (which clears L2 between calls) when present,
    else CUDA events around each of 50 calls after 10 warm-ups."""
    if _triton_testing is not None:
        return _triton_testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    for _ in range(10):
        fn()
    times = []
    for _ in range(50):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def find_bench(explicit):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = [explicit] if explicit else (glob.glob(os.path.join(root, ".carry", "flashattn_bench")) +
                                         glob.glob(os.path.join(root, "build*", "bench", "flashattn_bench")))
    if not found or not os.path.exists(found[0]):
        sys.exit("sweep_torch.py: no flashattn_bench (give --bench PATH)")
    return found[0]


def preset_shapes(bench, preset):
    listing = subprocess.run([bench, "--sweep", preset, "--list"], check=True, capture_output=True, text=True)
    return json.loads(listing.stdout)


def device_record():
    """The device as torch sees it; on ROCm torch (torch.version.hip) the arch is the gfx name."""
    props = torch.cuda.get_device_properties(0)
    rocm = torch.version.hip is not None
    record = {"backend": "hip" if rocm else "cuda", "name": props.name,
              "arch": props.gcnArchName.split(":")[0] if rocm else "sm_%d%d" % (props.major, props.minor),
              "arch_row_from_table": False, "compute_units": props.multi_processor_count,
              "runtime": "%s runtime %s (torch %s)" % ("HIP" if rocm else "CUDA", torch.version.hip or torch.version.cuda,
                                                     torch.__version__),
              "driver": "unknown", "host": " ".join(os.uname()[0:3:2])}
    try:
        query = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                                "--format=csv,noheader,nounits", "-i", "0"], capture_output=True, text=True,
                               check=True).stdout.strip().split(", ")
        record["driver"] = "NVIDIA driver %s" % query[0]
        record["clock_mhz"], record["memory_clock_mhz"] = int(query[1]), int(query[2])
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError):
        pass
    return record


def ceilings():
    n = 8192
    left = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    right = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    matrix = 2.0 * n ** 3 / (time_ms(lambda: torch.matmul(left, right)) * 1e-3) * 1e-12
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    copy = 2.0 * src.numel() / (time_ms(lambda: dst.copy_(src)) * 1e-3) * 1e-9
    return {"copy_gbps": {"value": copy, "source": "measured: torch copy_ device to device, 1 GiB, read + write"},
            "matrix_tflops": {"value": matrix, "source": "measured: torch.matmul bf16 8192^3 (cuBLAS)"}}


def inputs(shape, dtype):
    """q (b, s_q, h, d), k/v (b, s_k, h_k, d) as BSHD views of torch's (b, h, s, d) memory."""
    gen = torch.Generator(device="cuda").manual_seed(shape["seqlen_k"] * 131 + shape["head_dim"])
    make = lambda s, h: torch.randn(shape["batch"], h, s, shape["head_dim"], device="cuda", dtype=dtype,  # noqa
                                    generator=gen).transpose(1, 2)
    return make(shape["seqlen_q"], shape["heads"]), make(shape["seqlen_k"], shape["kv_heads"]), \
        make(shape["seqlen_k"], shape["kv_heads"])


def paged(k, v, page):
    """k, v (b, s, h_k, d) as page pools in a shuffled order, with the block table."""
    b, s, h_k, d = k.shape
    width = -(-s // page)
    order = torch.randperm(b * width, device="cuda")
    pools = []
    for t in (k, v):
        padded = torch.nn.functional.pad(t, (0, 0, 0, 0, 0, width * page - s))
        pool = torch.empty(b * width, page, h_k, d, device="cuda", dtype=t.dtype)
        pool[order] = padded.reshape(b * width, page, h_k, d)
        pools.append(pool)
    return pools[0], pools[1], order.view(b, width).to(torch.int32)


def forward_call(provider, shape, q, k, v):
    """A callable for one forward of `provider`, or a string: why it cannot run."""
    causal, page = shape["causal"], shape["page_block_size"]
    if provider == "flashattn":
        out = torch.empty_like(q)
        if page:
            k_pool, v_pool, table = paged(k, v, page)
            return lambda: flashattn._core.fwd(q, k_pool, v_pool, out, None, page_block_size=page, causal=causal,
                                               block_table=table)
        return lambda: flashattn.attention(q, k, v, causal=causal, out=out)
    if provider == "flash_attn":
        if page:
            k_pool, v_pool, table = paged(k, v, page)
            lens = torch.full((q.shape[0],), k.shape[1], dtype=torch.int32, device="cuda")
            return lambda: _flash_attn.flash_attn_with_kvcache(q, k_pool, v_pool, cache_seqlens=lens,
                                                               block_table=table, causal=causal)
        return lambda: _flash_attn.flash_attn_func(q, k, v, causal=causal)
    if page:
        return "unsupported: SDPA has no paged K/V"
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    gqa = shape["heads"] != shape["kv_heads"]

    def run():
        with sdpa_kernel([SDPA[provider]]):
            return sdpa(qt, kt, vt, is_causal=causal and shape["seqlen_q"] > 1, enable_gqa=gqa)
    return run


def backward_call(provider, shape, q, k, v):
    """Only the backward: the forward's graph is built once and its backward replayed."""
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    if provider == "flashattn":
        out = flashattn.flash_attn_func(*leaves, causal=shape["causal"])
    elif provider == "flash_attn":
        out = _flash_attn.flash_attn_func(*leaves, causal=shape["causal"])
    else:
        with sdpa_kernel([SDPA[provider]]):
            out = sdpa(*(t.transpose(1, 2) for t in leaves), is_causal=shape["causal"],
                       enable_gqa=shape["heads"] != shape["kv_heads"])
    dout = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)


def measure(provider, shape, dtype):
    row = dict(provider=provider, **{k: shape[k] for k in ("workload", "pass", "batch", "seqlen_q", "seqlen_k",
                                                         "heads", "kv_heads", "head_dim", "causal",
                                                         "page_block_size", "dtype")})
    row.update(flops=None, bytes=None, time_ms=None, tflops=None, tbps=None)
    try:
        q, k, v = inputs(shape, dtype)
        call = (backward_call if shape["pass"] == "backward" else forward_call)(provider, shape, q, k, v)
        if isinstance(call, str):
            row["status"] = call
            return row
        ms = time_ms(call)
    except (RuntimeError, flashattn.FlashAttnError) as err:
        row["status"] = "failed: " + str(err).splitlines()[0][:200]
        torch.cuda.empty_cache()
        return row
    row.update(status="ok", flops=shape["flops"], bytes=shape["bytes"], time_ms=ms,
               tflops=shape["flops"] / (ms * 1e-3) * 1e-12, tbps=shape["bytes"] / (ms * 1e-3) * 1e-12)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="training")
    ap.add_argument("--bench", help="flashattn_bench (default: .carry/ or build*/bench/)")
    ap.add_argument("--providers", default="flashattn,sdpa-flash,sdpa-cudnn,sdpa-efficient,flash_attn")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    listing = preset_shapes(find_bench(args.bench), args.preset)
    providers = [p for p in args.providers.split(",") if p != "flash_attn" or _flash_attn is not None]
    record = {"schema": listing["schema"], "tool": "sweep_torch.py (torch %s)" % torch.__version__,
              "preset": args.preset, "preset_description": listing["preset_description"],
              "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "device": device_record(), "ceilings": ceilings(), "rows": []}
    shapes = listing["shapes"]
    for i, shape in enumerate(shapes):
        for provider in providers:
            row = measure(provider, shape, DTYPES[shape["dtype"]])
            record["rows"].append(row)
            print("sweep %d/%d %s %s d%d s%d%s %s: %s" % (
                i + 1, len(shapes), provider, shape["pass"], shape["head_dim"], shape["seqlen_k"],
                " causal" if shape["causal"] else "", "P%d" % shape["page_block_size"] if shape["page_block_size"] else "",
                "%.1f TFLOP/s, %.2f TB/s" % (row["tflops"], row["tbps"]) if row["status"] == "ok" else row["status"]),
                file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
