#!/usr/bin/env python3
"""amd_decode_model.py - a bandwidth model of the decode family (dec_instances.txt) on the
MI300X (gfx942), built on Little's law and read from the compiled code objects (issue 19).

Decode streams K and V once per KV head: its time is the bytes over the rate the memory
system delivers, and that rate is set by the bytes a CU keeps in flight. Three parts:

1. The memory system: bandwidth as a function of the bytes in flight per CU (SM). With
   a plateau P, an idle latency L0 and N CUs, Little's law alone gives BW = N x / L0 up to
   P; measured curves bend smoothly into the plateau because latency grows under load.
   The form   BW(x) = P y / (1 + y^n)^(1/n),   y = N x / (L0 P)
   has that shape; its loaded latency is L(f) = L0 / (1 - f^n)^(1/n) at f = BW / P.
   n and L0 are fitted on our own read probe of the H200 (SOURCES H200-PROBE: seven
   points, 2 KiB to 256 KiB in flight per SM), the only such curve we have measured.

2. A decode block on CDNA: one stage, copies through registers (attn_fwd.h). What the
   code object says: the most 16-byte loads one lane has in flight in the main loop
   (`loads_in_flight`: global loads issued before the s_waitcnt that retires the first
   of them), and whether matrix instructions issue while loads are outstanding. If they
   do (held copies, FA_DEC_HELD: tile t+1's K and V load during tile t's work), an
   iteration takes the longer of its round trips and its issue time; if not (the
   synchronous loop: K and V waited for apart), their sum. A tile operand of c chunks
   per lane takes ceil(c / loads in flight) round trips. The issue time: the loop's math
   path (amd_resources.py's loop without the regions that hold no matrix instruction:
   copy paths, softcap, masks) plus a load and an LDS store per chunk, priced as
   bench/amd_model.py prices instructions, serially (one wave per SIMD: nothing else
   hides it). Workgroups per CU from the code object's LDS and VGPRs. One iteration
   moves 2 x tile_n x d x 2 bytes per block; the CU's rate is resident blocks x bytes /
   iteration time, the memory system's f P, with the loaded latency L(f) in the
   iteration time: the model solves the two for f.

3. The call: the dispatcher's split count (select/dispatch.c decode_splits, the same
   formula), rounds of blocks over 304 CUs, a fixed cost per block (the Q load and the
   output write: two idle latencies) and, with splits, the combine (three dependent
   round trips and its partials at the plateau). Kernel launch gaps are not counted.

What is not known, and how it is handled: no MI300X read-probe curve, HBM latency or
decode measurement with its full shape (batch, context, heads, dtype) was found in the
sources searched (SOURCES); AMD's published decode figures are for the MI355X (gfx950).
So the MI300X plateau is taken as the spec's 5.3 TB/s times the fraction the H200 probe
reached of its own spec (0.963: an assumption, stated), and the idle latency is a band
(L0_BAND) over which every prediction is given. The calibration that is possible: the
curve on the H200 probe, then the whole model against our H200 decode measurements
(bench/NOTES.md, Issue 12 dec3), where the kernel is the same algorithm with
asynchronous copies. Nothing here ran on AMD hardware.

Sources (figures quoted in bench/amd_decode_sources.md):
  [H200-PROBE] docs/research/issue12_decode.md section 3.1: H200 read-only streaming
    kernel, TB/s by bytes in flight per SM; spec 4.8 TB/s; plateau ~4.62.
  [H200-DEC3] bench/NOTES.md "Issue 12, dec3" final table: our decode kernel
    (fa_cuda_dec_d128_bf16_16x128x2, 4 warps, one block per SM, cp.async with both
    stages in flight) on the H200, bf16 h 32/8 d 128, contiguous K/V.
  [AMD-NOTES] /work/shared/AMD_NOTES.md hardware rows: 304 CUs, 64 KiB LDS, 5.3 TB/s.
  [AITER-PA-MI355X] github.com/ROCm/aiter/issues/2495: aiter paged attention on the
    MI355X (context only, not a calibration: another chip, 8 TB/s).
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

import amd_model
import amd_resources as ar

# [H200-PROBE]: KiB in flight per SM, measured TB/s (low, high of the configurations).
H200_PROBE = [(2, 0.67, 0.67), (4, 1.30, 1.30), (8, 2.42, 2.42), (16, 3.42, 3.92),
              (32, 4.45, 4.51), (64, 4.55, 4.63), (128, 4.55, 4.64)]
H200 = {"units": 132, "spec": 4.8, "plateau": 4.62}
# [H200-DEC3]: (batch, s_k, measured TB/s) of the final table, contiguous K/V.
H200_DEC3 = [(1, 8192, 2.38), (1, 131072, 4.15), (16, 8192, 4.31), (16, 32768, 4.51),
             (64, 4096, 4.36), (64, 16384, 4.53)]
# The H200 kernel of [H200-DEC3]: 16 x 128 tile, two stages, both in flight while a tile is
# waited for (attn_fwd.h FA_LOAD_AHEAD), one block per SM (64 KiB of K+V per stage).
H200_KERNEL = {"tile_n": 128, "stages": 2, "blocks_per_sm": 1}

MI300X = {"units": amd_model.CUS, "spec": 5.3, "lds_per_cu": 65536, "clock_ghz": amd_model.CLOCK_GHZ}
PLATEAU_FRACTION = H200["plateau"] / H200["spec"]  # assumed to carry over (see the header)
L0_BAND = (500e-9, 750e-9, 1000e-9)  # idle HBM latency on the MI300X: not found, a band
TARGET_FRACTION = 0.85  # issue 19: decode >= 85% of 5.3 TB/s

# The issue's decode rows (bf16, h 32 / h_k 8, d 128, s_q 1), as on the H200.
ROWS = [(1, 8192), (1, 131072), (16, 8192), (16, 32768), (64, 4096), (64, 16384)]
HEADS_K, HEAD_DIM, ELEM = 8, 128, 2  # the H200 rows' head dim; ours are predicted at their own
# Head dims predicted for our instances (the same rows at each): d128, the issue's, and d64.
HEAD_DIMS = (128, 64)

# select/dispatch.c's decode split constants (the same values).
MAX_SPLITS, SPLIT_OVERHEAD, COMBINE_COST, COMBINE_ROUND_COST = 128, 2, 3, 2


def curve(x, units, plateau, l0, n):
    """TB/s at x bytes in flight per CU (SM)."""
    y = units * x / (l0 * plateau * 1e12)
    return plateau * y / (1.0 + y ** n) ** (1.0 / n)


def loaded_latency(f, l0, n):
    return l0 / (1.0 - min(f, 0.999999) ** n) ** (1.0 / n)


def fit_probe():
    """(worst error, L0, n) of the curve over [H200-PROBE]; a point inside its measured range
    counts as exact."""
    best = None
    for l0_ns in range(300, 701, 5):
        for n10 in range(10, 61):
            err = 0.0
            for kib, lo, hi in H200_PROBE:
                bw = curve(kib * 1024, H200["units"], H200["plateau"], l0_ns * 1e-9, n10 / 10)
                err = max(err, 0.0 if lo <= bw <= hi else min(abs(bw / lo - 1), abs(bw / hi - 1)))
            if best is None or err < best[0]:
                best = (err, l0_ns * 1e-9, n10 / 10)
    return best


def decode_splits(grid, kv_tiles, slots, wave=64):
    """select/dispatch.c decode_splits: the shortest makespan, the smallest count within
    1/32 of it."""
    cap = min(MAX_SPLITS, max(kv_tiles, 1))
    costs = {}
    for s in range(1, cap + 1):
        per = -(-kv_tiles // s)
        used = -(-kv_tiles // per)
        rounds = -(-used // wave)
        costs[s] = -(-grid * used // slots) * (per + SPLIT_OVERHEAD) + \
            (COMBINE_COST + (rounds - 1) * COMBINE_ROUND_COST if used > 1 else 0)
    best = min(costs.values())
    return min(s for s in costs if costs[s] * 32 <= best * 33)


def solve(units, plateau, l0, n, rate_at):
    """The fraction f of the plateau where the blocks' rate (rate_at(latency), bytes/s per
    unit) meets the memory system's: bisection on f."""
    lo, hi = 0.0, 0.999999
    for _ in range(60):
        f = 0.5 * (lo + hi)
        demand = units * rate_at(loaded_latency(f, l0, n)) / (plateau * 1e12)
        lo, hi = (f, hi) if demand > f else (lo, f)
    return 0.5 * (lo + hi)


def call_time(batch, s_k, kernel, hw, l0, n):
    """(seconds, splits, f) of one decode call: kernel is the instance's block model
    (tile_n, blocks per CU, bytes per iteration, iteration time as a function of latency)."""
    units, plateau = hw["units"], hw["plateau"]
    tiles = -(-s_k // kernel["tile_n"])
    grid = batch * HEADS_K
    splits = decode_splits(grid, tiles, units * kernel["blocks"])
    blocks = grid * splits
    resident = min(kernel["blocks"], blocks / units)
    f = solve(units, plateau, l0, n, lambda lat: resident * kernel["bytes"] / kernel["iter"](lat))
    lat = loaded_latency(f, l0, n)
    rounds = -(-blocks // (units * kernel["blocks"]))
    per_block = -(-tiles // splits) * kernel["iter"](lat) + 2 * l0
    t = rounds * per_block
    if splits > 1:
        partials = batch * HEADS_K * 4 * splits * (kernel["d"] + 1) * 4  # 4 packed rows, fp32 O + LSE
        t += 3 * l0 + partials / (plateau * 1e12)
    return t, splits, f


def kv_bytes(batch, s_k, d=HEAD_DIM):
    return 2.0 * batch * s_k * HEADS_K * d * ELEM


def h200_kernel(l0, n):
    """The [H200-DEC3] kernel: both stages in flight, so a block's iteration is the latency
    of its oldest tile over the stages (its issue time is hidden: measured at the plateau)."""
    k = H200_KERNEL
    tile = 2 * k["tile_n"] * HEAD_DIM * ELEM
    return {"tile_n": k["tile_n"], "d": HEAD_DIM, "blocks": k["blocks_per_sm"], "bytes": tile,
            "iter": lambda lat: lat / k["stages"]}


def calibration(probe_fit):
    err, l0, n = probe_fit
    hw = {"units": H200["units"], "plateau": H200["plateau"]}
    rows = []
    for b, s_k, measured in H200_DEC3:
        t, splits, _ = call_time(b, s_k, h200_kernel(l0, n), hw, l0, n)
        rows.append((b, s_k, splits, measured, kv_bytes(b, s_k) / t / 1e12))
    return rows


# ---- our code objects ------------------------------------------------------------------

def loads_in_flight(objdump_text, kernel):
    """Within the kernel's main loop (amd_resources.main_loop): the most global/buffer
    loads one lane has issued and not yet waited for, their widest width in bytes, and
    whether matrix instructions issue while loads are outstanding (the loads overlap the
    tile's work: held copies) or only between waits (each round trip is exposed)."""
    body = ar.main_loop(ar.read_instructions(objdump_text, kernel))
    if not body:
        return 0, 0, False
    lo, hi = body[0][0], body[-1][0]
    outstanding = most = width = 0
    overlapped = False
    inside = False
    for line in objdump_text.splitlines():
        head = re.match(r"^([0-9a-f]+) <(\S+)>:", line)
        if head:
            if not head.group(2).startswith("label_"):
                inside = head.group(2) == kernel
                start = int(head.group(1), 16)
            continue
        m = re.match(r"^\s+(\S+)\s*(.*?)\s*// ([0-9A-F]+):", line)
        if not inside or not m or not lo <= int(m.group(3), 16) - start <= hi:
            continue
        mn, ops = m.group(1), m.group(2)
        overlapped = overlapped or (outstanding > 0 and ar.classify(mn) == "mma")
        if mn.startswith(("global_load", "buffer_load")):
            outstanding += 1
            most = max(most, outstanding)
            w = re.search(r"dwordx(\d)", mn)
            width = max(width, 4 * int(w.group(1)) if w else 4)
        elif mn == "s_waitcnt":
            v = re.search(r"vmcnt\((\d+)\)", ops)
            if v:
                outstanding = min(outstanding, int(v.group(1)))
    return most, width, overlapped


def math_path(body):
    """The loop body without any forward-branch region free of matrix instructions: the
    math of a tile without its copies (each copy path, contiguous whole tile, checked tile
    and paged, sits behind such a branch) and without the optional steps plain_path skips."""
    skip = set()
    for off, _, target in body:
        if target is None or target <= off:
            continue
        region = [i for i in body if off < i[0] < target]
        if region and all(ar.classify(i[1]) != "mma" for i in region):
            skip.update(i[0] for i in region)
    return [i for i in body if i[0] not in skip]


def block_model(k, meta, mix, loads, hw_clock_ghz):
    """The block of one of our decode instances on CDNA, one stage. mix: the loop's math
    path (math_path) and, per 16-byte chunk a lane copies, one load and one LDS store
    issued (4 cycles each: a wave64 instruction on a 16-wide unit), the instructions of
    the whole-tile copy path; the address arithmetic of the other copy paths (checked and
    paged tiles) is not counted. loads: loads_in_flight's (most, width, overlapped). A
    synchronous loop waits for K and V apart, each in ceil(chunks / most) round trips after
    which the tile's work issues; a held-copy loop (overlapped) issues tile t+1's K and V
    before tile t's work, so an iteration is the longer of its round trips and its work."""
    waves, n, d = k["waves"], k["n"], k["d"]
    most, _, overlapped = loads
    chunks = n * d // 8 // (waves * 64)  # 16-byte chunks per lane per K (or V) tile
    trips = -(-2 * chunks // max(most, 1)) if overlapped else 2 * -(-chunks // max(most, 1))
    parts = amd_model.parts_from_mix({"m": k["m"], "waves": waves, "n": n, "d": d}, mix)
    issue = (sum(parts) + 2 * chunks * 2 * amd_model.VALU_CYCLES) / (hw_clock_ghz * 1e9)
    row = {"unit": "mfma", "smem_per_cu": MI300X["lds_per_cu"]}
    blocks = ar.waves_per_cu(meta, row, k) // waves
    if overlapped:
        step = lambda lat: max(trips * lat, issue)
    else:
        step = lambda lat: trips * lat + issue
    return {"tile_n": n, "d": d, "blocks": max(blocks, 1), "bytes": 2 * n * d * ELEM, "trips": trips,
            "overlapped": overlapped, "issue": issue, "iter": step}


def read_objects(build, names, llvm_bin, sfx):
    """kernel name -> (manifest entry, metadata, math-path mix, loads_in_flight) for the
    gfx942 code of the named wave64 bf16 decode kernels of HEAD_DIMS (all of them with
    names None)."""
    _, kernels = ar.read_manifest(os.path.join(build, "hip", "manifest.txt"))
    objcopy, bundler = ar.tool("llvm-objcopy", sfx, llvm_bin), ar.tool("clang-offload-bundler", sfx, llvm_bin)
    readelf, objdump = ar.tool("llvm-readelf", sfx, llvm_bin), ar.tool("llvm-objdump", sfx, llvm_bin)
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(bundler), llvm_bin, os.environ.get("PATH", "")])
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, k in enumerate(kernels):
            if k["pass"] != "dec" or k["d"] not in HEAD_DIMS or k["dtype"] != "bf16" or k["wave32"] or \
                    (names and k["name"] not in names):
                continue
            base = os.path.join(tmp, str(i))
            ar.run([objcopy, "--dump-section", ".hip_fatbin=" + base + ".fatbin", k["obj"], base + ".x"])
            ar.run([bundler, "--unbundle", "--type=o", "--input=" + base + ".fatbin",
                    "--targets=hipv4-amdgcn-amd-amdhsa--gfx942", "--output=" + base + ".co"])
            meta = ar.parse_notes(ar.run([readelf, "--notes", base + ".co"]))[k["name"]]
            text = ar.run([objdump, "-d", base + ".co"])
            mix = ar.count_mix(math_path(ar.main_loop(ar.read_instructions(text, k["name"]))))
            out[k["name"]] = (k, meta, mix, loads_in_flight(text, k["name"]))
    return out


def predictions(objects):
    """Markdown lines: per instance its code-object facts and, per row of the issue, the
    predicted TB/s over the L0 band."""
    plateau = MI300X["spec"] * PLATEAU_FRACTION
    err, _, n = fit_probe()
    hw = {"units": MI300X["units"], "plateau": plateau}
    out = ["| kernel | LDS | VGPRs | scratch | blocks (waves) per CU | 16-B loads in flight per lane | "
           "loads overlap the tile's work | round trips per tile | issue us per tile | bytes per tile |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    models = {}
    for name, (k, meta, mix, loads) in sorted(objects.items()):
        km = block_model(k, meta, mix, loads, MI300X["clock_ghz"])
        models[name] = km
        out.append(f"| {name} | {meta['group_segment_fixed_size']} | {meta['vgpr_count']} | "
                   f"{meta['private_segment_fixed_size']} | {km['blocks']} ({km['blocks'] * k['waves']}) | "
                   f"{loads[0]} (x {loads[1]} B) | {'yes' if loads[2] else 'no'} | {km['trips']} | "
                   f"{km['issue'] * 1e6:.2f} | {km['bytes'] // 1024} KiB |")
    out += ["", f"Predicted MI300X TB/s (plateau {plateau:.2f} = 5.3 x {PLATEAU_FRACTION:.3f}; "
            f"target {TARGET_FRACTION * 5.3:.2f} = 85% of 5.3), at idle latency "
            + " / ".join(f"{l0 * 1e9:.0f}" for l0 in L0_BAND) + " ns:", "",
            "| kernel | " + " | ".join(f"b{b} s{s // 1024}k" for b, s in ROWS) + " |",
            "|---|" + "---|" * len(ROWS)]
    for name, km in models.items():
        cells = []
        for b, s_k in ROWS:
            vals = [kv_bytes(b, s_k, km["d"]) / call_time(b, s_k, km, hw, l0, n)[0] / 1e12 for l0 in L0_BAND]
            cells.append(" / ".join(f"{v:.2f}" for v in vals))
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def calibration_lines():
    err, l0, n = fit_probe()
    out = [f"Memory curve fitted on the H200 read probe [H200-PROBE]: L0 {l0 * 1e9:.0f} ns, n {n:.1f}, "
           f"plateau {H200['plateau']} TB/s; worst error {100 * err:.1f}% (inside a measured range counts 0).", "",
           "| KiB in flight per SM | measured TB/s | curve |", "|---|---|---|"]
    for kib, lo, hi in H200_PROBE:
        bw = curve(kib * 1024, H200["units"], H200["plateau"], l0, n)
        out.append(f"| {kib} | {lo:.2f}" + (f"-{hi:.2f}" if hi != lo else "") + f" | {bw:.2f} |")
    out += ["", "The whole model against our H200 decode measurements [H200-DEC3] (bf16 h 32/8 d 128):", "",
            "| b x s_k | splits (dispatcher's rule) | measured TB/s | model | error |", "|---|---|---|---|---|"]
    for b, s_k, splits, measured, model in calibration((err, l0, n)):
        out.append(f"| {b} x {s_k} | {splits} | {measured:.2f} | {model:.2f} | {100 * (model / measured - 1):+.1f}% |")
    return out


def markdown(build, llvm_bin, sfx):
    """The decode section of bench/AMD_RESOURCES.md (amd_resources.py --markdown)."""
    return (["### Predicted MI300X (gfx942) decode at d128 and d64", "",
             "By bench/amd_decode_model.py (run it for its sources): the bytes a CU keeps in flight,",
             "read from the code objects (16-byte loads one lane issues before its first wait, blocks",
             "per CU from LDS and VGPRs), against a memory curve fitted on our H200 read probe; the",
             "MI300X's idle HBM latency is not known here, so each row is given at three. Predictions,",
             "not measurements: no AMD GPU has run these kernels. The calibration:", ""]
            + calibration_lines() + ["", "Our d128 and d64 bf16 decode instances (issue 19's rows: h 32/8, "
                                     "s_q 1, contiguous K/V, at the instance's head dim):", ""]
            + predictions(read_objects(build, None, llvm_bin, sfx)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="HIP build directory (build/hip/manifest.txt): predict its gfx942 "
                                    "d128 and d64 bf16 decode instances")
    ap.add_argument("--kernels", nargs="*", help="only these kernels of the build")
    ap.add_argument("--llvm-bin", default="/usr/lib/llvm-19/bin")
    ap.add_argument("--tool-suffix", default="-19")
    args = ap.parse_args()
    print("\n".join(calibration_lines()))
    if args.build:
        objects = read_objects(args.build, args.kernels, os.path.realpath(args.llvm_bin), args.tool_suffix)
        print("\n" + "\n".join(predictions(objects)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
