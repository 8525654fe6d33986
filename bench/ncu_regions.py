#!/usr/bin/env python3
"""Where a warpgroup kernel's warps spend their time, instruction by instruction, from ncu's
source page (bench/ncu_source.sh writes it: per SASS instruction the warp-state samples and
their stall reasons, and how often it ran).

The instructions are sorted by how often they ran, against the kernel's own wgmma counts:
the loop's products run once per turn (the most-run HGMMA), a tile's first and last
products once per work tile (the least-run one). So each instruction is "loop" (run about as
often as a turn), "tile" (about once per work tile: the boundary), "rare" or "never". Samples
are warp time, so a class's samples over the loop's samples per turn say how many loop turns
of warp time it takes per tile. Then the boundary's stretches of code in address order, each
with its samples and stall reasons, and its most sampled instructions. The source page
does not say which warp ran an instruction: the producer's spin on the ring's barriers
(long_sb at its try-wait branch) lands in whichever class its run count falls in.

    python3 bench/ncu_regions.py SOURCE.csv[.xz] [--top 12] [--per-tile RUNS]

--per-tile sets the run count of once-per-tile code where the least-run HGMMA is not it (the
backward: every product runs per step, and a rare masked path's products run least); the
HGMMA run counts are printed to choose it from.
"""
import argparse
import collections
import csv
import lzma


def read_rows(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    names = rows[head]
    col = {n: i for i, n in enumerate(names)}
    reasons = [n for n in names if n.startswith("stall_") and "(Not Issued)" not in n]

    def number(text):
        try:
            return float(text.replace(",", ""))
        except ValueError:
            return 0.0

    out = []
    for r in rows[head + 1:]:
        if len(r) < len(names):
            continue
        out.append({"source": r[col["Source"]].strip(),
                    "samples": number(r[col["Warp Stall Sampling (All Samples)"]]),
                    "runs": number(r[col["Instructions Executed"]]),
                    "stalls": {n[len("stall_"):]: number(r[col[n]]) for n in reasons}})
    return out


def reasons_of(instructions, count=6):
    total = collections.Counter()
    for i in instructions:
        total.update(i["stalls"])
    samples = sum(i["samples"] for i in instructions) or 1.0
    return ", ".join(f"{k} {v / samples:.2f}" for k, v in total.most_common(count) if v > 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--per-tile", type=float, default=0.0)
    a = ap.parse_args()
    ins = read_rows(a.source)
    products = [i["runs"] for i in ins if i["source"].startswith("HGMMA") and i["runs"] > 0]
    if not products:
        raise SystemExit("no HGMMA ran: not a warpgroup kernel's source page")
    per_turn, per_tile = max(products), a.per_tile or min(products)
    counts = collections.Counter(products)
    print("HGMMA run counts (runs: instructions): " + ", ".join(f"{r:.0f}: {n}" for r, n in sorted(counts.items())))

    def kind(runs):
        if runs >= per_turn / 2:
            return "loop"
        if runs >= per_tile / 2:
            return "tile"
        return "rare" if runs > 0 else "never"

    for i in ins:
        i["kind"] = kind(i["runs"])
    total = sum(i["samples"] for i in ins)
    turns = per_turn / per_tile
    loop = sum(i["samples"] for i in ins if i["kind"] == "loop")
    print(f"{len(ins)} instructions, {total:.0f} samples; loop products run {per_turn:.0f} times, a tile's "
          f"{per_tile:.0f}: {turns:.1f} loop turns per work tile")
    print(f"kernel: {reasons_of(ins, 10)}")
    for k in ("loop", "tile", "rare", "never"):
        part = [i for i in ins if i["kind"] == k]
        s = sum(i["samples"] for i in part)
        per = f", {s / (loop / turns):.2f} loop turns of warp time per tile" if loop and k != "loop" else ""
        print(f"{k:5} {s:8.0f} samples ({s / total:5.1%}){per}: {reasons_of(part)}")

    print("\nthe tile's stretches of code (address order; >= 1% of the tile class's samples):")
    tile = sum(i["samples"] for i in ins if i["kind"] == "tile") or 1.0
    start = None
    for n in range(len(ins) + 1):
        inside = n < len(ins) and ins[n]["kind"] == "tile"
        if inside and start is None:
            start = n
        if not inside and start is not None:
            part = ins[start:n]
            s = sum(i["samples"] for i in part)
            if s >= tile / 100:
                print(f"  [{start:5d}, {n:5d}) {s:6.0f} ({s / (loop / turns):.2f} turns) from "
                      f"{part[0]['source'][:40]:40} {reasons_of(part, 4)}")
            start = None

    print(f"\nthe tile class's {a.top} most sampled instructions:")
    ranked = sorted((n for n, i in enumerate(ins) if i["kind"] == "tile"), key=lambda n: -ins[n]["samples"])
    for n in ranked[:a.top]:
        i = ins[n]
        top = sorted(i["stalls"].items(), key=lambda kv: -kv[1])[:3]
        print(f"  {n:5d} {i['samples']:6.0f}  {i['source'][:56]:56} " + " ".join(f"{k} {v:.0f}" for k, v in top if v))


if __name__ == "__main__":
    main()
