#!/usr/bin/env python3
"""det_chain_model.py - a timing model of the d128 warpgroup backward's deterministic dQ
chain on varlen calls (bench/NOTES.md, issue 14 session 10, b15): why unequal sequence
lengths made deterministic calls without a mask run at 0.67-0.72x the default (session 9,
bench/results/h100_session9_b14_varlen.txt), and what b15 should change.

A model, not a measurement. bench/varlen_bwd.py's packings (16384 tokens, lengths uniform in
[s/2, 3s/2] or all s; 16 heads; key blocks of 128, query tiles of 64) go to 132 SMs one
block each, in the launch order of launch_grid.h fa_bws_block_order (deterministic calls:
sections of 256 / key-blocks pairs, key blocks top down). A block loads K/V, then per query
tile stages Q/dO, computes, and adds its dQ; in a deterministic call that add waits for the
block above's add of the same tile (a poll's delay later) and then takes the bulk add's
round trip. Step costs are in units of a plain step; a step taken element by element
costs `--slow` of them (2.4: b12 measured +16% for 2 such steps in 17). Before b15 every
step of a sequence's partial top key block, and every key block's step on the sequence's
partial last query tile, is slow; with b15 (`lean`) neither is.

    python3 bench/det_chain_model.py [--slow 2.4]
"""
import argparse
import heapq

from varlen_packing import lengths_for

SMS, HEADS, KEYS, QUERIES = 132, 16, 128, 64
LOAD, STORE, POLL, RELEASE, ADD = 0.5, 0.5, 0.15, 0.1, 0.25


def launch_order(key_blocks, pairs, deterministic):
    """(key block, pair) in launch order: fa_bws_block_order's sections."""
    per = 1 if not deterministic or key_blocks >= 256 else 256 // key_blocks
    for first in range(0, pairs, per):
        size = min(pairs - first, per)
        for k in range(key_blocks):
            for p in range(first, first + size):
                yield (key_blocks - 1 - k if deterministic else k), p


def makespan(lengths, deterministic, slow):
    key_blocks = -(-max(lengths) // KEYS)
    sms, end, adds = [0.0] * SMS, 0.0, {}
    for kb, pair in launch_order(key_blocks, HEADS * len(lengths), deterministic):
        length = lengths[pair // HEADS]
        start = heapq.heappop(sms)
        if kb >= -(-length // KEYS):  # past the sequence: returns at once
            heapq.heappush(sms, start + 0.3)
            continue
        partial_block = length % KEYS != 0 and kb == -(-length // KEYS) - 1
        above = adds.get((pair, kb + 1)) if deterministic else None
        staged = added = start + LOAD
        times = []
        tiles = -(-length // QUERIES)
        for i in range(tiles):
            partial_tile = length % QUERIES != 0 and i == tiles - 1
            cost = slow if partial_block or partial_tile else 1.0
            staged = max(staged + 0.8 * cost, added) + 0.2 * cost
            ready = max(added, staged, above[i] + POLL if above else 0.0)
            added = ready + RELEASE + (ADD if deterministic else 0.0)
            times.append(added)
        adds[(pair, kb)] = times
        finish = max(added, staged) + STORE
        heapq.heappush(sms, finish)
        end = max(end, finish)
    return end


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slow", type=float, default=2.4, help="cost of an element-by-element step, in plain steps")
    args = ap.parse_args()
    print("lengths  mean s  det/default before b15  det/default b15  default b15/before  det b15/before")
    for equal in (False, True):
        for mean in (1024, 2048, 4096):
            lengths = lengths_for(mean, equal)
            default, det = makespan(lengths, False, args.slow), makespan(lengths, True, args.slow)
            lean_default, lean_det = makespan(lengths, False, 1.0), makespan(lengths, True, 1.0)
            print(f"{'equal' if equal else 'unequal':8} {mean:6}  {default / det:22.2f}  {lean_default / lean_det:15.2f}"
                  f"  {default / lean_default:18.2f}  {det / lean_det:14.2f}")


if __name__ == "__main__":
    main()
