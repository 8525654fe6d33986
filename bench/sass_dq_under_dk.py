#!/usr/bin/env python3
"""sass_dq_under_dk.py SASS... - checks, in a d128 warpgroup backward kernel's machine code
(bench/sass_local.sh with FA_SASS_SM90A=1), that each consumer loop stages its dQ share while dK runs:
the last wgmma wait before every run of 8 or more `STS.128` of registers (the staging; the zeroing
stores of RZ do not count) is `WARPGROUP.DEPBAR.LE gsb0, 0x1` (dQ done, dK running) and the first
after it `WARPGROUP.DEPBAR.LE gsb0, 0x0`. ptxas may hoist a plain wait above straight-line code that
leaves the accumulators alone (bench/NOTES.md, issue 13 ws16), which would put dK's wait before the
stores: still correct, so no test can see it; exits 1 if that happened."""
import re
import sys

WAIT = re.compile(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)")
STAGE = re.compile(r"STS\.128 \[[^]]*\], R(?!Z)")


def check(path):
    ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", open(path).read())]
    waits = [(i, WAIT.search(op).group(1)) for i, op in enumerate(ops) if WAIT.search(op)]
    stores = [i for i, op in enumerate(ops) if STAGE.search(op)]
    runs, start = [], stores[0] if stores else None
    for a, b in zip(stores, stores[1:] + [None]):
        if b is None or b - a > 40:  # a gap of more than 40 instructions ends a run
            runs.append((start, a, sum(1 for s in stores if start <= s <= a)))
            start = b
    runs = [(lo, hi) for lo, hi, n in runs if n >= 8]
    if not runs:
        return f"{path}: no run of 8 or more STS.128 of registers (the dQ staging)"
    bad = []
    for lo, hi in runs:
        before = ([kind for i, kind in waits if i < lo] or [None])[-1]
        after = next((kind for i, kind in waits if i > hi), None)
        if before != "0x1" or after != "0x0":
            bad.append(f"stores at {lo}-{hi}: wait before {before}, after {after}")
    if bad:
        return f"{path}: dQ is not staged under dK: " + "; ".join(bad)
    print(f"{path}: dQ staged under dK in each of {len(runs)} loop copies")
    return None


failures = [f for f in map(check, sys.argv[1:]) if f]
for f in failures:
    print(f)
sys.exit(1 if failures or len(sys.argv) < 2 else 0)
