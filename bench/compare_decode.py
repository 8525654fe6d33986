#!/usr/bin/env python3
"""Decode benchmark on one GPU, in one process, on the same inputs: flashattn against torch
SDPA's FLASH_ATTENTION (FlashAttention-2) and CUDNN_ATTENTION backends, as the bandwidth at
which each reads the KV cache, next to two ceilings measured in the same run.

    TB/s = bytes of K and V read (2 * b * s_k * h_k * d * element size) / time

Ceilings: "copy" is a device-to-device copy of a 2 GiB buffer counted as read + write
bytes (the convention of issue 12's table); "read" is a reduction over the same buffer
(torch.sum), counting only the bytes read, which is what a decode kernel does (a lower
bound of what reads reach: a purpose-built read kernel measured 4.62 TB/s on the H200,
docs/research/issue12_decode.md, against torch.sum's 4.2). Both are
timed with plain launches: inside a CUDA graph the copy becomes a memcpy node on the copy
engines, measured at 2.8 TB/s against 4.2 for the kernel copy. Every attention function
is timed as a CUDA graph replay (triton's do_bench_cudagraph), so host launch overhead,
large next to a 10 us decode, is not counted for anyone; one that cannot be captured is
timed with plain launches instead and marked "*".

--cold: every timed call reads K/V that the L2 cache does not hold. A graph replay of the
same call re-reads the same cache, and a cache smaller than L2 (b 1 x 8192: 32 MiB; the
H100's and H200's L2: 50 MiB) is then partly served from L2 (ncu, bench/NOTES.md dec8);
a server's decode step reads each layer's cache once per step, so the cold number is the
one it sees. Each function then runs over `copies` sets of inputs in turn (together at
least 3x the L2 size), the time divided by the copies; rows of K/V at least that size
are cold either way and keep one copy.

s_q > 1 is causal with the diagonal at the bottom right (each new token sees the cache
and the new tokens up to itself), flashattn's convention; SDPA gets it as
torch.nn.attention.bias.causal_lower_right (its is_causal aligns top-left, under which
the new tokens would see only the first keys).

    python3 bench/compare_decode.py [--rows 1x8192,16x8192,...] [--heads 32] [--kv-heads 8]
                                    [--dims 128] [--sq 1] [--dtype bf16] [--pages 16,256]
                                    [--page-order random|identity] [--cold] [--json out.json]

--pages P,...: flashattn also reads the same keys from a paged cache of page size P (pools
[pages, P, h_k, d], pages in a random order, params.block_table), reported as TB/s and as
a fraction of flashattn's contiguous read in the same row (SDPA has no paged input).
--page-order identity: pages in order (page i of sequence b is pool page b * width + i),
which separates the cost of scattered pages from that of reading through the table.
"""
import argparse
import json
import os
import sys

import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
from torch.nn.functional import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}  # the library's spelling
ISSUE_ROWS = "1x8192,1x131072,16x8192,16x32768,64x4096,64x16384"  # issue 12's table (b x s_k)


def launched_ms(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def timed_ms(fn):
    """Median ms of a graph replay of fn; plain launches when fn cannot be captured."""
    fn()
    torch.cuda.synchronize()
    try:
        return triton.testing.do_bench_cudagraph(fn, rep=50, return_mode="median"), "graph"
    except Exception:  # noqa: BLE001 - any capture failure: fall back, say so
        torch.cuda.synchronize()
        return launched_ms(fn), "launch"


def ceilings():
    """TB/s of a 2 GiB copy (read + write bytes) and of a reduction over it (read bytes)."""
    n = 1 << 30
    src = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    copy_ms = launched_ms(lambda: dst.copy_(src))
    read_ms = launched_ms(lambda: src.sum(dtype=torch.float32))
    nbytes = src.numel() * src.element_size()
    return 2 * nbytes / (copy_ms * 1e-3) / 1e12, nbytes / (read_ms * 1e-3) / 1e12


def cold_copies(kv_bytes, cold):
    """Input sets a timed function cycles through: enough that together they pass 3x the
    L2 cache (--cold), else 1."""
    if not cold:
        return 1
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return max(1, -(-3 * l2 // kv_bytes))


def in_turn(fns):
    """One function that calls each of fns once."""
    def run():
        for fn in fns:
            fn()
    return run


def bench_row(b, s_k, s_q, h, h_k, d, dtype, pages=(), page_order="random", cold=False):
    torch.manual_seed(0)
    kv_bytes = 2 * b * h_k * s_k * d * torch.finfo(dtype).bits // 8
    copies = cold_copies(kv_bytes, cold)
    sets = []
    for _ in range(copies):
        q = torch.randn(b, h, s_q, d, device="cuda", dtype=dtype)
        k = torch.randn(b, h_k, s_k, d, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        # flashattn reads the same memory as strided BSHD views.
        qb, kb, vb = (t.transpose(1, 2) for t in (q, k, v))
        sets.append((q, k, v, qb, kb, vb, torch.empty_like(qb)))
    causal = s_q > 1  # bottom-right: each new token sees the cache and the tokens before it
    mask = causal_lower_right(s_q, s_k) if causal else None
    fns = {"flashattn": in_turn([lambda t=t: flashattn.attention(t[3], t[4], t[5], causal=causal, out=t[6])
                                 for t in sets])}
    for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def run(backend=backend, t=sets[0]):
            with sdpa_kernel([backend]):
                return sdpa(t[0], t[1], t[2], attn_mask=mask, enable_gqa=h != h_k)
        fns[name] = in_turn([lambda t=t, run=run: run(t=t) for t in sets])
        fns[name + "_one"] = run
    row = {"b": b, "s_k": s_k, "s_q": s_q, "heads": h, "heads_k": h_k, "d": d,
           "dtype": str(dtype).replace("torch.", ""), "kv_mib": kv_bytes / 2**20, "copies": copies}
    ref = None
    out = sets[0][6]
    for name in ("flashattn", "fa2", "cudnn"):
        try:
            ms, how = timed_ms(fns[name])
            ms /= copies
            row[name] = {"tbps": kv_bytes / (ms * 1e-3) / 1e12, "us": ms * 1e3, "timing": how}
            if name != "flashattn" and ref is None:  # the first SDPA backend that runs
                ref = fns[name + "_one"]().transpose(1, 2).float()
        except Exception as e:  # noqa: BLE001 - an unsupported backend is a row entry, not a crash
            row[name] = {"error": str(e).splitlines()[0][:120]}
    if ref is not None:
        row["max_abs_diff_vs_sdpa"] = (out.float() - ref).abs().max().item()
    for page in pages:
        runs, keeps, outs = [], [], []
        for t in sets:
            outs.append(torch.empty_like(t[3]))
            run, keep = paged_call(t[3], t[4], t[5], outs[-1], causal, page, order=page_order)
            runs.append(run)
            keeps.append(keep)
        ms, how = timed_ms(in_turn(runs))
        ms /= copies
        row["paged%d" % page] = {"tbps": kv_bytes / (ms * 1e-3) / 1e12, "us": ms * 1e3, "timing": how,
                                 "max_abs_diff_vs_contiguous": (outs[0].float() - out.float()).abs().max().item()}
        del keeps
    return row


def paged_call(qb, kb, vb, out, causal, page, num_splits=0, order="random", seqused=True):
    """flashattn over kb/vb laid out as a paged cache of `page` keys per page, pages in a
    random order (with seqused_k = s_k unless seqused is False); the call, and the tensors
    it reads."""
    b, s_k, h_k, d = kb.shape
    width = (s_k + page - 1) // page
    pad = width * page - s_k
    gen = torch.Generator(device="cpu").manual_seed(1)
    perm = torch.randperm(b * width, generator=gen).to("cuda") if order == "random" else \
        torch.arange(b * width, device="cuda")
    pools = []
    for t in (kb, vb):
        full = torch.nn.functional.pad(t.contiguous(), (0, 0, 0, 0, 0, pad))  # [b, width*P, h_k, d]
        pool = torch.empty(b * width, page, h_k, d, device="cuda", dtype=t.dtype)
        pool[perm] = full.view(b * width, page, h_k, d)
        pools.append(pool)
    table = perm.view(b, width).to(torch.int32).contiguous()
    used = torch.full((b,), s_k, device="cuda", dtype=torch.int32)
    run = lambda: flashattn._core.fwd(qb, pools[0], pools[1], out, None, page_block_size=page,  # noqa: E731
                                      causal=causal, num_splits=num_splits, block_table=table,
                                      seqused_k=used if seqused else None)
    return run, (pools, table, used)


def cell(entry):
    if "error" in entry:
        return "%16s" % "n/a"
    mark = "" if entry["timing"] == "graph" else "*"
    return "%6.2f (%5.1fus)%s" % (entry["tbps"], entry["us"], mark)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default=ISSUE_ROWS, help="b x s_k pairs")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dims", default="128")
    ap.add_argument("--sq", default="1")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--pages", default="", help="page sizes of paged flashattn runs")
    ap.add_argument("--page-order", default="random", choices=("random", "identity"))
    ap.add_argument("--cold", action="store_true", help="K/V not in L2 at each timed call")
    ap.add_argument("--json")
    args = ap.parse_args()
    pages = [int(x) for x in args.pages.split(",") if x]

    copy_tbps, read_tbps = ceilings()
    print("%s, torch %s; ceilings in this run: copy %.2f TB/s (read + write), read %.2f TB/s"
          % (torch.cuda.get_device_name(), torch.__version__, copy_tbps, read_tbps))
    print("TB/s of K/V read (us per call); * = timed with plain launches (not capturable)%s"
          % ("; cold: K/V not in L2 at any timed call" if args.cold else ""))
    print("%-4s %-7s %-3s %-4s %-8s | %-16s %-16s %-16s | %-7s %-7s %-8s"
          % ("b", "s_k", "s_q", "d", "KV MiB", "flashattn", "SDPA FA2", "SDPA cuDNN",
             "vs cuDNN", "vs read", "maxdiff"))
    rows = []
    for pair in args.rows.split(","):
        b, s_k = (int(x) for x in pair.split("x"))
        for d in (int(x) for x in args.dims.split(",")):
            for s_q in (int(x) for x in args.sq.split(",")):
                row = bench_row(b, s_k, s_q, args.heads, args.kv_heads, d, DTYPES[args.dtype], pages, args.page_order,
                                args.cold)
                rows.append(row)
                ours, cudnn = row["flashattn"], row["cudnn"]
                vs_cudnn = ours["tbps"] / cudnn["tbps"] if "tbps" in ours and "tbps" in cudnn else float("nan")
                vs_read = ours["tbps"] / read_tbps if "tbps" in ours else float("nan")
                print("%-4d %-7d %-3d %-4d %-8.0f | %s %s %s | %-8.2f %-7.2f %-8.2g"
                      % (b, s_k, s_q, d, row["kv_mib"], cell(ours), cell(row["fa2"]), cell(cudnn),
                         vs_cudnn, vs_read, row.get("max_abs_diff_vs_sdpa", float("nan"))), flush=True)
                for page in pages:
                    entry = row["paged%d" % page]
                    print("     paged P=%-5d flashattn %s = %.2fx contiguous (max diff %.2g)"
                          % (page, cell(entry), entry["tbps"] / ours["tbps"] if "tbps" in ours else float("nan"),
                             entry["max_abs_diff_vs_contiguous"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "copy_tbps": copy_tbps, "read_tbps": read_tbps, "heads": args.heads,
                       "heads_k": args.kv_heads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
