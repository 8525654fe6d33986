#!/usr/bin/env python3
"""bwd_order_sim.py - the greedy simulation behind the warpgroup backward's block order
(launch_grid.h fa_bws_block_order / fa_bws_section_pairs; bench/NOTES.md, issue 14 b7).

A causal d128 backward at b*s = 16k tokens, 16 heads: key block k of 128 keys visits
s/64 - 2k query tiles of 64 rows (one step each) plus a fixed cost per block (K/V load,
dK/dV write) in steps. Blocks go to 132 SMs, one at a time each, in launch order, each
SM taking the next block when it frees (the hardware's greedy dispatch). Prints the
makespan over the ideal (total work / SMs) for pair-by-pair order and for sections of
`per` pairs, key block by key block. A model of the tail only: no L2, no per-step cost
differences between masked and full tiles.

Run: python3 bench/bwd_order_sim.py
"""
import heapq

SMS = 132


def makespan(durations):
    free = [0.0] * SMS
    end = 0.0
    for d in durations:
        t = heapq.heappop(free) + d
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def main():
    print("seqlen fixed  pair-by-pair  sections(256 blocks)   (makespan / ideal)")
    for s in (1024, 2048, 4096, 8192):
        key_blocks, pairs = s // 128, 16 * (16384 // s)
        steps = [s // 64 - 2 * k for k in range(key_blocks)]
        per = max(1, 256 // key_blocks)
        for fixed in (1.0, 2.0):
            work = [steps[k] + fixed for k in range(key_blocks)]
            ideal = sum(work) * pairs / SMS
            by_pair = [work[k] for p in range(pairs) for k in range(key_blocks)]
            sectioned = [work[k] for first in range(0, pairs, per) for k in range(key_blocks)
                         for p in range(first, min(first + per, pairs))]
            print("%6d %5.1f  %12.3f  %20.3f" % (s, fixed, makespan(by_pair) / ideal, makespan(sectioned) / ideal))


if __name__ == "__main__":
    main()
