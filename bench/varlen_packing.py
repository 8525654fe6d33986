"""varlen_packing.py - the packed batches of bench/varlen_bwd.py, shared with its timing
model (bench/det_chain_model.py): TOKENS tokens in sequences whose lengths are drawn
uniformly from [s/2, 3s/2] (seeded, the last one cut to fill the tokens), or all s long."""
import random

TOKENS = 16384


def lengths_for(mean, equal, seed=0):
    if equal:
        return [mean] * (TOKENS // mean)
    rng, out = random.Random(seed), []
    while sum(out) < TOKENS:
        out.append(min(rng.randint(mean // 2, 3 * mean // 2), TOKENS - sum(out)))
    return out
