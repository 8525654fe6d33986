#!/usr/bin/env python3
"""mutation_check.py - issue 15's mutation check of the emulated AMD tests.

Each mutation changes one lane map (src/hip/fa_amd_layouts.h), cross-lane reduction
(src/hip/fa_device.h, src/common/gpu_kernels/attn_combine.h) or LDS address
(fa_device.h's loaders, attn_combine.h, src/common/gpu_kernels/tile_layout.h,
smem_bytes.h) by one exact text edit, rebuilds the emulated tests of the targets it
affects, runs their ctest entries amd_emu_gfx<target>_*, and restores the file (also on
an error or ^C). A mutant is killed when a test that passed unmutated fails. The result is a Markdown table on
stdout (docs/research/issue15_emulator.md keeps the last one).

The build is its own (default build-mutation in the repository root) with a reduced
instance list, FA_EMU_INSTANCES below, so one mutant rebuilds in about a minute; tests
that need other instances fail unmutated and are left out of the verdicts. Nothing is
ever committed: the working tree is restored after every mutant.

usage: tests/emu/mutation_check.py [--build DIR] [--only SUBSTRING ...] [--jobs N]
needs: clang-19, ninja, cmake, Catch2 (as FA_BUILD_AMD_EMU does).
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The step-3 list plus the bf16 backward: the d64 forward and decode, the d32 and d64
# backward, in both dtypes where the tests mix them; every target compiles the rows of
# these its wave size lists.
FA_EMU_INSTANCES = [
    "fa_hip_fwd_d64_f16_128x64x1", "fa_hip_fwd_d64_f16_64x64x1", "fa_hip_fwd_d64_bf16_128x64x1",
    "fa_hip_fwd_d64_bf16_64x64x1", "fa_hip_dec_d64_f16_16x64x1", "fa_hip_dec_d64_f16_16x32x1",
    "fa_hip_bwd_d32_f16_64x64x1", "fa_hip_bwd_d32_f16_32x32x1", "fa_hip_bwd_d32_bf16_64x64x1",
    "fa_hip_bwd_d32_bf16_32x32x1", "fa_hip_bwd_d64_f16_64x64x1", "fa_hip_bwd_d64_bf16_64x64x1",
]

ALL = ("942", "1100", "1201")
LAYOUTS = "src/hip/fa_amd_layouts.h"
DEVICE = "src/hip/fa_device.h"
COMBINE = "src/common/gpu_kernels/attn_combine.h"
TILE = "src/common/gpu_kernels/tile_layout.h"
SMEM = "src/common/gpu_kernels/smem_bytes.h"


class Mutation:
    """One exact edit: `old` must occur exactly once in `path`. `survives` is the reason
    it is expected to change no result (None: it must be killed)."""

    def __init__(self, name, path, old, new, targets, survives=None):
        self.name, self.path, self.old, self.new = name, path, old, new
        self.targets, self.survives = targets, survives


MUTATIONS = [
    # ---- lane maps (fa_amd_layouts.h) ----
    Mutation("fa_amd_a_row: lane % 16 -> (lane + 1) % 16", LAYOUTS,
             "fa_amd_a_row(int lane) { return lane % 16; }", "fa_amd_a_row(int lane) { return (lane + 1) % 16; }", ALL),
    Mutation("fa_amd_b_col: lane % 16 -> (lane + 1) % 16", LAYOUTS,
             "fa_amd_b_col(int lane) { return lane % 16; }", "fa_amd_b_col(int lane) { return (lane + 1) % 16; }", ALL),
    Mutation("fa_amd_frag_k (MFMA16, GFX12): lane group l/16 -> (l/16) ^ 1", LAYOUTS,
             "return fa_amd_frag_elems(prim) * (lane / 16) + i;",
             "return fa_amd_frag_elems(prim) * ((lane / 16) ^ 1) + i;", ("942", "1201")),
    Mutation("fa_amd_frag_k (MFMA16, GFX12): lane-group term dropped", LAYOUTS,
             "return fa_amd_frag_elems(prim) * (lane / 16) + i;", "return i;", ("942", "1201")),
    Mutation("fa_amd_frag_k (GFX11): e -> e ^ 1", LAYOUTS,
             "if (prim == FA_AMD_WMMA_GFX11) return i;", "if (prim == FA_AMD_WMMA_GFX11) return i ^ 1;", ("1100",)),
    Mutation("fa_amd_acc_row: lane % 16 -> (lane + 1) % 16", LAYOUTS,
             "fa_amd_acc_row(int lane) { return lane % 16; }", "fa_amd_acc_row(int lane) { return (lane + 1) % 16; }",
             ALL),
    Mutation("fa_amd_acc_col (MFMA16): 4*(l/16) + r -> 4*r + l/16", LAYOUTS,
             "if (prim == FA_AMD_MFMA16) return 4 * (lane / 16) + r;",
             "if (prim == FA_AMD_MFMA16) return 4 * r + lane / 16;", ("942",)),
    Mutation("fa_amd_acc_col (GFX11): 2*r + l/16 -> 2*r", LAYOUTS,
             "if (prim == FA_AMD_WMMA_GFX11) return 2 * r + lane / 16;",
             "if (prim == FA_AMD_WMMA_GFX11) return 2 * r;", ("1100",)),
    Mutation("fa_amd_acc_col (GFX12): 8*(l/16) + r -> r", LAYOUTS,
             "    return 8 * (lane / 16) + r;\n}", "    return r;\n}", ("1201",)),
    Mutation("fa_amd_acc_pair_stride (GFX11): 2 -> 1", LAYOUTS,
             "return prim == FA_AMD_WMMA_GFX11 ? 2 : 1;", "return prim == FA_AMD_WMMA_GFX11 ? 1 : 1;", ("1100",),
             survives="no device code calls it: fa_device.h uses the compile-time FA_ACC_PAIR_STRIDE, which "
                      "tests/test_amd_layouts.cpp checks against it (the FA_ACC_PAIR_STRIDE mutation below)"),
    Mutation("FA_ACC_PAIR_STRIDE (GFX11): 2 -> 1", DEVICE,
             "#define FA_ACC_PAIR_STRIDE 2", "#define FA_ACC_PAIR_STRIDE 1", ("1100",)),
    Mutation("fa_amd_p_src_reg (GFX11): i / 2 -> i % 8", LAYOUTS,
             "return prim == FA_AMD_WMMA_GFX11 ? i / 2 : i;", "return prim == FA_AMD_WMMA_GFX11 ? i % 8 : i;", ("1100",)),
    Mutation("fa_amd_p_src_lane (GFX11): + 16 * (i % 2) dropped", LAYOUTS,
             "lane % 16 + 16 * (i % 2) : lane;", "lane % 16 : lane;", ("1100",)),
    Mutation("fa_row_leader: lane < 16 -> lane < 8", DEVICE,
             "fa_row_leader(int lane) { return lane < 16; }", "fa_row_leader(int lane) { return lane < 8; }", ALL),
    Mutation("fa_acc_tile_to_a: mine where theirs is due", DEVICE,
             "== lane ? mine : theirs;", "== lane ? mine : mine;", ("1100",)),
    Mutation("fa_store_pair (GFX11): second half at + 1 instead of + FA_ACC_PAIR_STRIDE", DEVICE,
             "((unsigned short *)dst)[FA_ACC_PAIR_STRIDE] =", "((unsigned short *)dst)[1] =", ("1100",)),
    Mutation("fa_atomic_add_acc: register r added at r ^ 1", DEVICE,
             "fa_isa_global_atomic_add_f32(dst + r, acc[r]);", "fa_isa_global_atomic_add_f32(dst + (r ^ 1), acc[r]);",
             ("942",)),
    # ---- cross-lane reductions ----
    Mutation("fa_lane_xor: lane index instead of byte address (<< 2 dropped)", DEVICE,
             "fa_isa_bpermute((fa_lane() ^ mask) << 2,", "fa_isa_bpermute((fa_lane() ^ mask),", ALL),
    Mutation("fa_lane_xor: mask -> mask >> 1", DEVICE,
             "fa_isa_bpermute((fa_lane() ^ mask) << 2,", "fa_isa_bpermute((fa_lane() ^ (mask >> 1)) << 2,", ALL),
    Mutation("fa_warp_any: the lane's own predicate instead of the ballot", DEVICE,
             "return fa_isa_ballot(predicate != 0) != 0;", "return predicate != 0;", ALL,
             survives="a lane whose own rescale is not due may skip it exactly (attn_fwd.h's only use); "
                      "killed only where a skipped block holds a wave op"),
    Mutation("fa_warp_any: only lane 0's vote", DEVICE,
             "return fa_isa_ballot(predicate != 0) != 0;", "return (fa_isa_ballot(predicate != 0) & 1) != 0;", ALL),
    Mutation("fa_row_max: the ^ 16 step dropped", DEVICE,
             "    x = fmaxf(x, fa_lane_xor(x, 16));\n", "", ALL),
    Mutation("fa_row_max: the ^ 32 step dropped", DEVICE,
             "    x = fmaxf(x, fa_lane_xor(x, 32));\n", "", ("942",)),
    Mutation("fa_row_max: ^ 16 -> ^ 8", DEVICE,
             "x = fmaxf(x, fa_lane_xor(x, 16));", "x = fmaxf(x, fa_lane_xor(x, 8));", ALL),
    Mutation("fa_row_sum: the ^ 16 step dropped", DEVICE,
             "    x += fa_lane_xor(x, 16);\n", "", ALL),
    Mutation("fa_row_sum: the ^ 32 step dropped", DEVICE,
             "    x += fa_lane_xor(x, 32);\n", "", ("942",)),
    Mutation("fa_row_sum: ^ 16 -> ^ 8", DEVICE,
             "x += fa_lane_xor(x, 16);", "x += fa_lane_xor(x, 8);", ALL),
    Mutation("fa_group_max: starts at lane distance 2", COMBINE,
             "for (int m = 1; m < lanes && m < FA_WARP_SIZE; m <<= 1)\n        x = fa_nan_max",
             "for (int m = 2; m < lanes && m < FA_WARP_SIZE; m <<= 1)\n        x = fa_nan_max", ALL),
    Mutation("fa_group_sum: stops one lane distance early", COMBINE,
             "for (int m = from; m < lanes && m < FA_WARP_SIZE; m <<= 1)",
             "for (int m = from; 2 * m < lanes && m < FA_WARP_SIZE; m <<= 1)", ALL),
    # ---- LDS addresses and pitch ----
    Mutation("fragment loads (A, Kt): row pitch + 8 in the reader only", DEVICE,
             "(tile) + fa_tile_offset((pitch), (row), ((k) + p_) >> 3)",
             "(tile) + fa_tile_offset((pitch) + 8, (row), ((k) + p_) >> 3)", ALL),
    Mutation("element loads (V, the transposed operands): row pitch + 8 in the reader only", DEVICE,
             "(tile)[fa_tile_offset((pitch), (k), (n) >> 3) + ((n) & 7)]",
             "(tile)[fa_tile_offset((pitch) + 8, (k), (n) >> 3) + ((n) & 7)]", ALL),
    Mutation("fragment loads: 16-byte chunk c read from c ^ 1 (reader only)", DEVICE,
             "(tile) + fa_tile_offset((pitch), (row), ((k) + p_) >> 3)",
             "(tile) + fa_tile_offset((pitch), (row), (((k) + p_) >> 3) ^ 1)", ALL),
    Mutation("FA_FWD_SMEM_PITCH: padding 8 -> 0 (writers and readers)", SMEM,
             "(head_dim) : (head_dim) + 8)", "(head_dim) : (head_dim) + 0)", ALL,
             survives="writers and readers move together: the tile is permuted in LDS, no value changes "
                      "(the bank conflicts it causes are not modelled)"),
    Mutation("FA_FWD_SMEM_PITCH: padding 8 -> 16 (writers and readers)", SMEM,
             "(head_dim) : (head_dim) + 8)", "(head_dim) : (head_dim) + 16)", ALL,
             survives="as padding 0: consistent on both sides, and the larger tiles still fit the LDS limit"),
    Mutation("fa_combine_accumulate: reads weight n, one past the last partial (LDS nobody wrote)", COMBINE,
             "wu[u] = i < a->n ? w[i] : 0.f;", "wu[u] = i <= a->n ? w[i] : 0.f;", ALL),
    Mutation("fa_tile_offset swizzle: row & 7 -> row & 3 (writers and readers)", TILE,
             "(chunk ^ (row & 7))", "(chunk ^ (row & 3))", ALL,
             survives="consistent on both sides: a permutation of chunks within a row"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


TEST_LINE = re.compile(r"Test\s+#\d+: (\S+) \.*\s*(\S.*?)\s+[0-9.]+ sec")


def ctest(build, targets, jobs):
    """{test name: passed} for the ctest entries of the targets."""
    regex = "^amd_emu_gfx(" + "|".join(targets) + ")_"
    out = run(["ctest", "--test-dir", build, "-R", regex, "-j", str(jobs), "--timeout", "120"]).stdout
    results = {m.group(1): m.group(2) == "Passed" for m in TEST_LINE.finditer(out)}
    if not results:
        sys.exit("mutation_check: no test ran:\n" + out[-3000:])
    return results


def build(build_dir, targets, jobs):
    names = ["flashattn_amd_emu_gfx%s_tests" % t for t in targets]
    return run(["ninja", "-C", build_dir, "-j", str(jobs)] + names)


def configure(build_dir):
    if os.path.exists(os.path.join(build_dir, "build.ninja")):
        return
    out = run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DFA_BUILD_TESTS=OFF", "-DFA_BUILD_AMD_EMU=ON",
               "-DFA_USE_BLAS=OFF", "-DFA_BUILD_BENCH=OFF", "-DCMAKE_C_COMPILER=clang-19",
               "-DCMAKE_CXX_COMPILER=clang++-19", "-DFA_EMU_INSTANCES=" + ";".join(FA_EMU_INSTANCES)])
    if out.returncode != 0:
        sys.exit("mutation_check: configure failed:\n" + out.stdout[-3000:])


def apply(m):
    """The file's original text, after writing the mutant."""
    path = os.path.join(ROOT, m.path)
    with open(path) as f:
        text = f.read()
    if text.count(m.old) != 1:
        sys.exit("mutation_check: %r occurs %d times in %s (must be once): %s" % (m.old, text.count(m.old), m.path,
                                                                               m.name))
    with open(path, "w") as f:
        f.write(text.replace(m.old, m.new))
    return text


def restore(m, text):
    with open(os.path.join(ROOT, m.path), "w") as f:
        f.write(text)


def check(m, build_dir, baseline, jobs):
    """(verdict, detail) of one mutant."""
    text = apply(m)
    try:
        made = build(build_dir, m.targets, jobs)
        if made.returncode != 0:
            return "does not compile", made.stdout.strip().splitlines()[-1][:120]
        now = ctest(build_dir, m.targets, jobs)
    finally:
        restore(m, text)
    killed = sorted(t for t, ok in now.items() if baseline.get(t) and not ok)
    if not killed:
        return ("survived (expected)" if m.survives else "SURVIVED"), m.survives or ""
    return ("killed (expected to survive)" if m.survives else "killed"), describe_kills(killed)


def describe_kills(killed):
    """'gfx942 12, gfx1201 9 of the tests, e.g. forward_d64_every_tile_both_dtypes,
    backward_d32_every_tile_both_dtypes': per target, and the first forward-side and the
    first backward test by name."""
    per_target = {}
    for t in killed:
        target = re.match(r"amd_emu_(gfx\d+)_", t).group(1)
        per_target[target] = per_target.get(target, 0) + 1
    names = [re.sub(r"^amd_emu_gfx\d+_", "", t) for t in killed]
    examples = []
    for wanted in (lambda n: not n.startswith("backward"), lambda n: n.startswith("backward")):
        first = next((n for n in sorted(set(names)) if wanted(n)), None)
        if first:
            examples.append(first)
    counts = ", ".join("%s %d" % kv for kv in sorted(per_target.items(), key=lambda kv: int(kv[0][3:])))
    return "%s (of %d); e.g. %s" % (counts, len(killed), ", ".join(examples))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-mutation"))
    ap.add_argument("--only", nargs="*", default=[], help="run the mutations whose name contains one of these")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or any(s in m.name for s in args.only)]
    configure(args.build)
    made = build(args.build, ALL, args.jobs)
    if made.returncode != 0:
        sys.exit("mutation_check: the unmutated build failed:\n" + made.stdout[-3000:])
    baseline = ctest(args.build, ALL, args.jobs)
    passing = sum(baseline.values())
    print("Unmutated: %d of %d amd_emu_gfx* tests pass with the reduced instance list (the others need "
          "instances it leaves out)\n" % (passing, len(baseline)), flush=True)
    print("| mutation | file | targets | result | caught by |")
    print("|---|---|---|---|---|")
    unexpected = 0
    for m in chosen:
        start = time.time()
        verdict, detail = check(m, args.build, baseline, args.jobs)
        unexpected += verdict in ("SURVIVED", "killed (expected to survive)", "does not compile")
        print("| %s | %s | %s | %s | %s |" % (m.name, os.path.basename(m.path), ", ".join("gfx" + t for t in m.targets),
                                           verdict, detail), flush=True)
        print("mutation_check: %s: %.0f s" % (m.name, time.time() - start), file=sys.stderr, flush=True)
    # Leave the build as the unmutated tree makes it.
    build(args.build, ALL, args.jobs)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
