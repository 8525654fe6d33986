#!/usr/bin/env python3
"""sass_waits.py pv|dq SASS... - checks where a warpgroup kernel's consumer loop waits for a product,
in its machine code (bench/sass_local.sh with FA_SASS_SM90A=1). ptxas may hoist a plain
`wgmma.wait_group` above straight-line code that leaves the accumulators alone (bench/NOTES.md,
issue 13 ws7 and ws16), which moves the wait before the work the product was meant to run under:
still correct, so no test can see it, but slower. Exits 1 if that happened.

pv: a d128 or d256 forward kernel waits for P·V(t-1) after the softmax's exponentials of tile t:
    the first run of 32 or more MUFU.EX2 after its `WARPGROUP.DEPBAR.LE gsb0, 0x1` (S(t) waited,
    P·V(t-1) still running) has that wait as the last before it and `gsb0, 0x0` as the first after.
dq: a d128 backward kernel stages its dQ share while dK runs (attn_bwd_ws.h, FA_BWS_DQ_BEFORE_DK):
    the last wait before every run of 8 or more `STS.128` of registers (the staging; the zeroing
    stores of RZ do not count) is `gsb0, 0x1` (dQ done, dK running) and the first after it `0x0`."""
import re
import sys

WAIT = re.compile(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)")


def instructions(path):
    return [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", open(path).read())]


def runs(indices, least):
    """(first, last) of each run of `least` or more indices, a gap of over 40 ending a run."""
    found, start = [], indices[0] if indices else None
    for a, b in zip(indices, indices[1:] + [None]):
        if b is None or b - a > 40:
            if sum(1 for i in indices if start <= i <= a) >= least:
                found.append((start, a))
            start = b
    return found


def around(waits, lo, hi):
    """The kinds of the last wait before instruction lo and of the first after hi."""
    before = ([kind for i, kind in waits if i < lo] or [None])[-1]
    return before, next((kind for i, kind in waits if i > hi), None)


def check_pv(path, ops, waits):
    s_wait = next((i for i, kind in waits if kind == "0x1"), None)
    if s_wait is None:
        return f"{path}: no wait that leaves P·V running (WARPGROUP.DEPBAR.LE gsb0, 0x1)"
    found = runs([i for i, op in enumerate(ops) if "MUFU.EX2" in op and i > s_wait], 32)
    if not found:
        return f"{path}: no run of 32 or more MUFU.EX2 after S's wait"
    lo, hi = found[0]
    before, after = around(waits, lo, hi)
    where = f"S waited at {s_wait}, exponentials at {lo}-{hi}, last wait before them {before}, first after {after}"
    if before != "0x1" or after != "0x0":
        return f"{path}: P·V's wait is not after the exponentials: {where}"
    print(f"{path}: P·V's wait follows the exponentials: {where}")
    return None


def check_dq(path, ops, waits):
    found = runs([i for i, op in enumerate(ops) if re.search(r"STS\.128 \[[^]]*\], R(?!Z)", op)], 8)
    if not found:
        return f"{path}: no run of 8 or more STS.128 of registers (the dQ staging)"
    bad = [f"stores at {lo}-{hi}: wait before {b}, after {a}"
           for lo, hi in found for b, a in [around(waits, lo, hi)] if (b, a) != ("0x1", "0x0")]
    if bad:
        return f"{path}: dQ is not staged under dK: " + "; ".join(bad)
    print(f"{path}: dQ staged under dK in each of {len(found)} loop copies")
    return None


def main():
    checks = {"pv": check_pv, "dq": check_dq}
    if len(sys.argv) < 3 or sys.argv[1] not in checks:
        sys.exit("usage: sass_waits.py pv|dq SASS...")
    failures = []
    for path in sys.argv[2:]:
        ops = instructions(path)
        waits = [(i, WAIT.search(op).group(1)) for i, op in enumerate(ops) if WAIT.search(op)]
        failures += [f for f in [checks[sys.argv[1]](path, ops, waits)] if f]
    for f in failures:
        print(f)
    sys.exit(1 if failures else 0)


main()
