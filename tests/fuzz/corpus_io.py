"""corpus_io.py - what both seed generators (make_corpus.py, make_corpus_paged.py) share:
the one-byte INT encoding of fuzz_common.h over a target's own table of special values,
and writing a seed set into a corpus directory (seed_* files replaced, nothing else
touched)."""
import os
import struct


def enc_int_in(v, special):
    """v as an INT: c - 16 for small values, the index into `special`, else raw int32/int64."""
    if -16 <= v < 112:
        return bytes([v + 16])
    if v in special:
        return bytes([0x80 + special.index(v)])
    if -(1 << 31) <= v < (1 << 31):
        return b"\xfe" + struct.pack("<i", v)
    return b"\xff" + struct.pack("<q", v)


def write_seeds(out_dir, seeds):
    """seeds: name -> bytes. Replaces OUT_DIR's seed_* files with them; prints a summary."""
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.startswith("seed_"):
            os.remove(os.path.join(out_dir, name))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out_dir, "seed_" + name), "wb") as f:
            f.write(data)
    print("%d seeds, %d bytes, in %s" % (len(seeds), sum(map(len, seeds.values())), out_dir))
