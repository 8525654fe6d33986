#!/usr/bin/env python3
"""sass_pv_wait.py SASS... - checks, in a warpgroup forward kernel's machine code (bench/sass_local.sh
with FA_SASS_SM90A=1), that the consumer loop waits for P·V(t-1) after the softmax's exponentials of
tile t, so that the product runs under them. The loop's exponentials are the first run of 32 or more
MUFU.EX2 after its `WARPGROUP.DEPBAR.LE gsb0, 0x1` (S(t) waited, P·V(t-1) still running); the check
wants that wait as the last one before the run and a `WARPGROUP.DEPBAR.LE gsb0, 0x0` as the first
wait after it. ptxas hoists a plain wait above straight-line code that leaves the accumulators alone
(bench/NOTES.md, issue 13 ws7 and ws16), which costs 1-3% at d128 and d256 and which no test can see;
exits 1 if that happened."""
import re
import sys

WAIT = re.compile(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)")


def check(path):
    ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", open(path).read())]
    waits = [(i, WAIT.search(op).group(1)) for i, op in enumerate(ops) if WAIT.search(op)]
    s_wait = next((i for i, kind in waits if kind == "0x1"), None)
    if s_wait is None:
        return f"{path}: no wait that leaves P·V running (WARPGROUP.DEPBAR.LE gsb0, 0x1)"
    exps = [i for i, op in enumerate(ops) if "MUFU.EX2" in op and i > s_wait]
    runs, start = [], exps[0] if exps else None
    for a, b in zip(exps, exps[1:] + [None]):
        if b is None or b - a > 40:  # a gap of more than 40 instructions ends a run
            runs.append((start, a, sum(1 for e in exps if start <= e <= a)))
            start = b
    run = next(((lo, hi) for lo, hi, n in runs if n >= 32), None)
    if run is None:
        return f"{path}: no run of 32 or more MUFU.EX2 after S's wait"
    lo, hi = run
    before = [kind for i, kind in waits if i < lo][-1]
    after = next(((i, kind) for i, kind in waits if i > hi), (hi, None))
    where = (f"S waited at {s_wait}, exponentials at {lo}-{hi}, last wait before them {before}, "
             f"first after {after[1]} at +{after[0] - hi}")
    if before != "0x1" or after[1] != "0x0":
        return f"{path}: P·V's wait is not after the exponentials: {where}"
    print(f"{path}: P·V's wait follows the exponentials: {where}")
    return None


failures = [f for f in map(check, sys.argv[1:]) if f]
for f in failures:
    print(f)
sys.exit(1 if failures or len(sys.argv) < 2 else 0)
