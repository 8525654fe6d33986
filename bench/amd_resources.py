#!/usr/bin/env python3
"""amd_resources.py - reads the AMD code objects of a HIP build and checks or reports them.

For every target and kernel of build/hip/manifest.txt (forward instances, the dK/dV and dQ
kernels of backward instances, the backward preprocess) it extracts the code object
(llvm-objcopy .hip_fatbin, clang-offload-bundler --unbundle), reads its metadata
(llvm-readelf --notes: LDS, VGPRs, AGPRs, scratch, wave size) and its ISA (llvm-objdump -d:
matrix instructions, and the instruction mix of the main loop, found as the backward
branch whose body holds the most matrix instructions). The limits come from the library
itself (the amd_facts helper prints the arch table rows, the HIP registry and the
dispatcher's selections), so nothing here is transcribed by hand.

  --check    fail (exit 1) unless, per target and kernel built for it (wave32 targets
             build the rows listing wave 32 in src/common/select/*_instances.txt): LDS <= the row's
             smem_per_block, scratch = 0, wave size = the row's, v_mfma_* (CDNA) / v_wmma_*
             (RDNA) present (not asked of the shared kernels, which have no product), no
             compare-and-swap atomics (the backward's dQ adds must be hardware fp32 adds,
             not CAS loops; the device-check record is claimed by an exchange), dK/dV
             kernels with global atomics exactly at wave64 (the registry's atomic_dq); and every
             kernel the dispatcher selects for a built AMD row, forward and backward, is in
             that target's code object. Rows not built (gfx950 here) are reported, not
             checked.
  --markdown FILE  writes the resource tables (bench/AMD_RESOURCES.md).
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

import amd_model  # the calibrated MI300X throughput model (issue 19), beside this file

SIMDS_PER_CU = 4
MAX_WAVES_PER_SIMD = {"mfma": 8, "wmma": 16}
VGPRS_PER_SIMD_LANE = {"mfma": 512, "wmma": 1536}  # CDNA unified VGPR+AGPR; RDNA wave32
VGPR_GRANULE = {"mfma": 8, "wmma": 24}
# The manifest's forward passes: the prefill family, the decode family, and the
# Q-in-registers family (qreg_instances.txt, CDNA's 32 x 32 x 8).
FORWARD_PASSES = ("fwd", "dec", "qreg")


def run(cmd):
    """A tool's stdout. When it cannot start or fails: the command, its exit status and
    what it wrote to stderr (else the end of its stdout), then exit 1."""
    shown = " ".join(shlex.quote(str(c)) for c in cmd)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"amd_resources.py: cannot run: {shown}\n  {e}")
    if p.returncode != 0:
        status = f"signal {-p.returncode}" if p.returncode < 0 else f"exit code {p.returncode}"
        said = p.stderr.strip() or "(nothing on stderr) stdout ends:\n" + p.stdout.strip()[-2000:]
        sys.exit(f"amd_resources.py: command failed with {status}: {shown}\n{said}")
    return p.stdout


def tool(name, suffix, llvm_bin):
    """The tool of the HIP compiler's LLVM: in llvm_bin (its real directory, where the
    unversioned names are LLVM's own), else on PATH with the suffix (clang-offload-bundler-19),
    else unversioned on PATH. Returned with links resolved, so that a tool looking for its
    siblings (the bundler runs llvm-objcopy) looks in that LLVM's directory."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    for cand, where in ((name + suffix, [llvm_bin]), (name, [llvm_bin]),
                        (name + suffix, dirs), (name, dirs)):
        for d in where:
            if d and os.access(os.path.join(d, cand), os.X_OK):
                return os.path.realpath(os.path.join(d, cand))
    sys.exit(f"amd_resources.py: {name}{suffix} not found in {llvm_bin} or on PATH")


def read_manifest(path):
    archs, kernels = [], []
    for line in open(path):
        f = line.split()
        if f and f[0] == "archs":
            archs = f[1].split(";") if len(f) == 2 else f[1:]
        elif f and f[0] == "kernel":
            kernels.append({"name": f[1], "pass": f[2], "d": int(f[3]), "m": int(f[4]),
                            "n": int(f[5]), "waves": int(f[6]), "stages": int(f[7]),
                            "dtype": f[8], "wave32": f[9] == "1", "obj": f[10]})
    return archs, kernels


def read_facts(exe):
    rows, selects, unsupported, atomic_dq = {}, [], [], {}
    for line in run([exe]).splitlines():
        f = line.split()
        if f[0] == "config":  # name (the kernel symbol), wave, threads, smem, atomic dQ
            atomic_dq[(f[1], int(f[2]))] = f[5] == "1"
        elif f[0] == "row":
            rows[f[1]] = {"wave": int(f[2]), "smem_per_block": int(f[3]), "smem_per_cu": int(f[4]),
                          "cus": int(f[5]), "unit": f[6]}
        elif f[0] == "select":
            selects.append((f[1], f[2]))
        elif f[0] == "unsupported":
            unsupported.append((f[1], f[2], int(f[3]), " ".join(f[5:])))
    return rows, selects, unsupported, atomic_dq


def parse_notes(text):
    """Kernel name -> the kernel-level fields of the AMDGPU metadata note (a YAML list at
    indent 2 under amdhsa.kernels, fields at indent 4; arguments sit deeper)."""
    kernels, cur = {}, None
    for line in text.splitlines():
        start = re.match(r"^  - \.(\w+):\s*(\S*)\s*$", line)
        field = re.match(r"^    \.(\w+):\s+(\S+)\s*$", line)
        if start:
            cur = {start.group(1): start.group(2)}
        elif field and cur is not None:
            cur[field.group(1)] = field.group(2)
            if field.group(1) == "name":
                kernels[field.group(2)] = cur
    return kernels


def classify(mnemonic):
    if mnemonic.startswith(("v_mfma", "v_wmma")):
        return "mma"
    if mnemonic.startswith(("v_exp", "v_log", "v_rcp", "v_sqrt", "v_rsq")):
        return "trans"
    if mnemonic.startswith("v_"):
        return "valu"
    if mnemonic.startswith("ds_"):
        return "lds"
    if mnemonic.startswith(("global_", "buffer_", "flat_", "scratch_")):
        return "vmem"
    return "salu"


def lds_read_bytes(mnemonic, lanes=64):
    """Bytes a wave64 reads from LDS with one instruction: ds_read_b128 16 per lane,
    ds_read2_b64 two of 8, ds_read_u16 2, ...; 0 for anything else."""
    m = re.match(r"^ds_(?:read|load)(2)?(?:st64)?_[biu](\d+)", mnemonic)
    if not m:
        return 0
    return (2 if m.group(1) else 1) * int(m.group(2)) // 8 * lanes


def read_instructions(text, kernel):
    """The kernel's instructions in llvm-objdump -d output, as (offset from its start,
    mnemonic, branch target offset or None). Branch targets are printed as <kernel+0x..>
    after the encoding (compiled code) or as a label operand with the label's own heading
    line (hand-written code objects such as aiter's: label_XXXX)."""
    raw, labels, start, inside = [], {}, None, False
    for line in text.splitlines():
        head = re.match(r"^([0-9a-f]+) <(\S+)>:", line)
        if head:
            if inside and head.group(2).startswith("label_"):
                labels[head.group(2)] = int(head.group(1), 16) - start
                continue
            inside = head.group(2) == kernel
            start = int(head.group(1), 16)
            continue
        if not inside:
            continue
        m = re.match(r"^\s+(\S+)\s*(.*?)\s*// ([0-9A-F]+):.*?(?:<\S+\+0x([0-9a-f]+)>)?$", line)
        if m:
            raw.append((int(m.group(3), 16) - start, m.group(1), m.group(2), m.group(4)))
    insts = []
    for off, mn, operands, rel in raw:
        target = None
        if "branch" in mn:
            label = re.match(r"(label_\w+)", operands)
            target = int(rel, 16) if rel else labels.get(label.group(1)) if label else None
        insts.append((off, mn, target))
    return insts


def parse_isa(text, kernel):
    """Matrix instructions of the kernel, the instruction mix of its main loop (with its
    plain path under "plain"), its first matrix mnemonic, and its global atomic mnemonics."""
    insts = read_instructions(text, kernel)
    mma_total = sum(1 for _, mn, _ in insts if classify(mn) == "mma")
    body = main_loop(insts)
    mix = count_mix(body)
    plain = plain_path(body)
    kept = {i[0] for i in plain}
    mix["plain"] = count_mix(plain)
    mix["phases"] = [count_mix([i for i in p if i[0] in kept]) for p in loop_phases(insts)]
    mnemonic = next((mn for _, mn, _ in insts if classify(mn) == "mma"), "none")
    atomics = {mn for _, mn, _ in insts if "atomic" in mn}
    return mma_total, mix, mnemonic, atomics


def basic_blocks(insts):
    """The kernel's basic blocks as lists of instructions, in address order, and each
    block's successors (indices): a block ends at a branch or before a branch target; an
    s_branch does not fall through, nor does s_endpgm."""
    leaders = {insts[0][0]} if insts else set()
    for n, (off, mn, target) in enumerate(insts):
        if target is not None:
            leaders.add(target)
        if ("branch" in mn or mn == "s_endpgm") and n + 1 < len(insts):
            leaders.add(insts[n + 1][0])
    blocks = []
    for inst in insts:
        if inst[0] in leaders or not blocks:
            blocks.append([])
        blocks[-1].append(inst)
    index = {b[0][0]: n for n, b in enumerate(blocks)}
    succs = []
    for n, b in enumerate(blocks):
        _, mn, target = b[-1]
        out = set()
        if target is not None and target in index:
            out.add(index[target])
        if mn not in ("s_branch", "s_endpgm") and n + 1 < len(blocks) and blocks[n + 1][0][0] - b[-1][0] <= 12:
            out.add(n + 1)  # falls through (12: the longest encoding; a list with gaps has none)
        succs.append(out)
    return blocks, succs


def loops_of(blocks, succs):
    """The CFG's loops as sets of blocks: its strongly connected components with a cycle
    (Tarjan's algorithm, iterative). Each is an outermost loop with what it nests; the
    layout does not matter (a loop whose header the compiler placed mid-body, entered
    there, is still one component)."""
    index, low, on_stack, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in range(len(blocks)):
        if root in index:
            continue
        work = [(root, iter(sorted(succs[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succs[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succs[v]:
                    comps.append(comp)
    return comps


def main_loop_blocks(insts):
    """The main loop as (the blocks, their successors, the loop's blocks, its first block):
    of the CFG's loops (loops_of) the one holding the most matrix instructions, the
    smallest on a tie; None when no loop holds one."""
    blocks, succs = basic_blocks(insts)
    best = None
    for comp in loops_of(blocks, succs):
        mma = sum(1 for n in comp for i in blocks[n] if classify(i[1]) == "mma")
        key = (mma, -sum(len(blocks[n]) for n in comp))
        if mma and (best is None or key > best[0]):
            best = (key, comp)
    if best is None:
        return None
    return blocks, succs, best[1], min(best[1])


def main_loop(insts):
    """The main loop's instructions in address order (main_loop_blocks); [] when none."""
    found = main_loop_blocks(insts)
    if found is None:
        return []
    blocks, _, body, _ = found
    return [i for n in sorted(body) for i in blocks[n]]


def count_mix(body):
    """Instructions by class, and LDS bytes read, of a list of (offset, mnemonic, target)."""
    mix = {}
    for _, mn, _ in body:
        c = classify(mn)
        mix[c] = mix.get(c, 0) + 1
        mix["lds_bytes"] = mix.get("lds_bytes", 0) + lds_read_bytes(mn)
    return mix


def plain_path(body):
    """The loop body without the regions plain attention skips: every forward branch inside
    the body whose skipped instructions are vector or scalar arithmetic only (no matrix
    instruction, no memory access) jumps over an optional step (softcap, ALiBi, the mask of
    a diagonal tile, the lazy O rescale), which a call without them leaves out on every
    iteration but the few that move a row's maximum. Regions with loads or stores (the
    next tile's copy) stay: plain attention runs them. A branch's region is the blocks
    before its target that its fall-through reaches, not every instruction laid out in
    between (the compiler places other steps' blocks there: the ping-pong forward's copies
    sit inside its softcap's span). An approximation of the executed path, named as such
    where it is reported."""
    blocks, succs = basic_blocks(body)
    skip = set()
    for n, b in enumerate(blocks):
        off, mn, target = b[-1]
        if target is None or target <= off or mn == "s_branch" or n + 1 not in succs[n]:
            continue
        region, stack = set(), [n + 1]
        while stack:
            m = stack.pop()
            if m in region or blocks[m][0][0] >= target or m <= n:
                continue
            region.add(m)
            stack.extend(succs[m])
        insts = [i for m in region for i in blocks[m]]
        if insts and all(classify(i[1]) in ("valu", "trans", "salu") for i in insts):
            skip.update(i[0] for i in insts)
    return [i for i in body if i[0] not in skip]


def loop_phases(insts):
    """The main loop's instructions by barrier phase, counted from its header along its
    own edges: a block ending a phase (holding an s_barrier) passes the next phase to its
    successors. The ping-pong forward's matrix and softmax phases (attn_fwd.h
    FA_PING_PONG), wherever the compiler laid their blocks out; [] when there is no loop."""
    found = main_loop_blocks(insts)
    if found is None:
        return []
    blocks, succs, body, header = found
    phase, stack = {header: 0}, [header]
    while stack:
        n = stack.pop()
        nxt = phase[n] + any(i[1] == "s_barrier" for i in blocks[n])
        for m in succs[n]:
            if m in body and m != header and (m not in phase or phase[m] > nxt):
                phase[m] = nxt
                stack.append(m)
    out = [[] for _ in range(max(phase.values()) + 1)]
    for n in sorted(phase):
        out[phase[n]].extend(blocks[n])
    if len(out) > 1 and not any(i[1] == "s_barrier" for i in out[-1]):
        out[0] = out.pop() + out[0]  # after the last barrier: the loop wraps to phase 0
    return out


def vector_registers(meta):
    """A lane's share of the vector register file. The code object's .vgpr_count is that
    already on CDNA2/3, AGPRs included: LLVM writes it from NumVGPRsForWavesPerEU,
    alignTo(arch VGPRs, 4) + AGPRs on gfx90a and later (AMDGPUAsmPrinter,
    AMDGPUBaseInfo getTotalNumVGPRs). Seen on fa_hip_dec_d256_f16_16x32x1 for gfx942:
    -Rpass-analysis=kernel-resource-usage says VGPRs 256, AGPRs 131, occupancy 1, and the
    code object says .vgpr_count 387, .agpr_count 131."""
    return int(meta["vgpr_count"])


def waves_per_simd(meta, row, k):
    unit = row["unit"]
    regs = vector_registers(meta)
    g = VGPR_GRANULE[unit]
    by_regs = VGPRS_PER_SIMD_LANE[unit] // max(g, -(-regs // g) * g)
    lds = int(meta["group_segment_fixed_size"])
    wgs = row["smem_per_cu"] // lds if lds else 1 << 30
    waves_per_wg_per_simd = -(-k["waves"] // SIMDS_PER_CU)
    by_lds = wgs * waves_per_wg_per_simd
    return min(MAX_WAVES_PER_SIMD[unit], by_regs, by_lds)


def waves_per_cu(meta, row, k):
    """Waves one CU holds of this kernel: whole workgroups, as LDS and registers allow
    (a two-wave workgroup leaves half the SIMDs to other workgroups)."""
    unit = row["unit"]
    regs = vector_registers(meta)
    g = VGPR_GRANULE[unit]
    per_simd = min(MAX_WAVES_PER_SIMD[unit], VGPRS_PER_SIMD_LANE[unit] // max(g, -(-regs // g) * g))
    lds = int(meta["group_segment_fixed_size"])
    wgs = min(row["smem_per_cu"] // lds if lds else 1 << 30, per_simd * SIMDS_PER_CU // k["waves"])
    return wgs * k["waves"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", help="HIP build directory")
    ap.add_argument("--facts", help="the amd_facts helper")
    ap.add_argument("--llvm-bin", default="/usr/lib/llvm-19/bin", help="LLVM tools of the HIP compiler")
    ap.add_argument("--tool-suffix", default="-19", help="their name suffix, as in clang++-19")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--markdown")
    ap.add_argument("--count", nargs="+", metavar="CODE_OBJECT",
                    help="only print the main-loop instruction mix of each kernel of these gfx942 "
                         "code objects (e.g. published kernels: bench/amd_model.py COUNTED)")
    args = ap.parse_args()
    sfx, bin_dir = args.tool_suffix, os.path.realpath(args.llvm_bin)
    if args.count:
        count_code_objects(args.count, tool("llvm-readelf", sfx, bin_dir), tool("llvm-objdump", sfx, bin_dir))
        return 0
    if not args.build or not args.facts:
        ap.error("--build and --facts are required (unless --count)")

    archs, kernels = read_manifest(os.path.join(args.build, "hip", "manifest.txt"))
    rows, selects, unsupported, atomic_dq = read_facts(args.facts)
    objcopy, bundler = tool("llvm-objcopy", sfx, bin_dir), tool("clang-offload-bundler", sfx, bin_dir)
    readelf, objdump = tool("llvm-readelf", sfx, bin_dir), tool("llvm-objdump", sfx, bin_dir)
    # clang-offload-bundler --unbundle runs an unversioned llvm-objcopy, looked up next to
    # itself, then on PATH: that of its own LLVM, not another (Debian's llvm is LLVM 14).
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(bundler), bin_dir, os.environ.get("PATH", "")])
    failures, table, built, objects = [], [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in kernels:
            for arch in archs:
                # An object holds one or two kernels (a backward instance): read it once.
                if (k["obj"], arch) not in objects:
                    base = os.path.join(tmp, f"{len(objects)}")
                    run([objcopy, "--dump-section", ".hip_fatbin=" + base + ".fatbin", k["obj"], base + ".x"])
                    run([bundler, "--unbundle", "--type=o", "--input=" + base + ".fatbin",
                         "--targets=hipv4-amdgcn-amd-amdhsa--" + arch, "--output=" + base + ".co"])
                    objects[(k["obj"], arch)] = (parse_notes(run([readelf, "--notes", base + ".co"])),
                                                 run([objdump, "-d", base + ".co"]))
                notes, isa = objects[(k["obj"], arch)]
                built.setdefault(arch, set()).update(notes)
                where = f"{arch} {k['name']}"
                row = rows.get(arch)
                if row is None:
                    failures.append(f"{where}: no arch-table row")
                    continue
                if row["wave"] == 32 and not k["wave32"]:
                    if k["name"] in notes:
                        failures.append(f"{where}: built for wave32 though its row does not list wave 32")
                    continue
                if k["name"] not in notes:
                    failures.append(f"{where}: kernel missing from the code object")
                    continue
                meta = notes[k["name"]]
                mma, mix, mnemonic, atomics = parse_isa(isa, k["name"])
                lds = int(meta["group_segment_fixed_size"])
                scratch = int(meta["private_segment_fixed_size"])
                wave = int(meta["wavefront_size"])
                want = "v_mfma" if row["unit"] == "mfma" else "v_wmma"
                if lds > row["smem_per_block"]:
                    failures.append(f"{where}: LDS {lds} > {row['smem_per_block']}")
                if scratch != 0:
                    failures.append(f"{where}: scratch {scratch} bytes (spills)")
                if wave != row["wave"]:
                    failures.append(f"{where}: wave {wave}, table says {row['wave']}")
                if k["pass"] != "shared" and not mnemonic.startswith(want):
                    failures.append(f"{where}: no {want}_* instruction")
                # dQ adds: hardware fp32, no CAS loop. The device-check record is claimed
                # by an exchange (device_common.h fa_claim_once), so no kernel has a CAS.
                if any("cmpswap" in a for a in atomics):
                    failures.append(f"{where}: compare-and-swap atomics (a CAS loop)")
                # The registry's atomic_dq must match the dK/dV code object: the host sizes
                # and passes the dQ accumulator by it.
                if k["name"].endswith("_dkdv"):
                    want_atomics = atomic_dq.get((k["name"][:-len("_dkdv")], wave))
                    if want_atomics is None:
                        failures.append(f"{where}: no registry config for this kernel")
                    elif bool(atomics) != want_atomics:
                        failures.append(f"{where}: atomics {sorted(atomics) or 'none'} but the "
                                        f"registry says atomic dQ {'on' if want_atomics else 'off'}")
                occ = waves_per_simd(meta, row, k) if k["waves"] else None
                table.append((arch, k, meta, mma, mix, mnemonic, occ))
        for arch, kernel in selects:
            if arch not in archs:
                continue
            if kernel not in built.get(arch, set()):
                failures.append(f"{arch}: dispatcher selects {kernel}, not in its code object")
    not_built = [r for r in rows if r not in archs]
    model, counted = amd_model.calibrated(), amd_model.fit_counted(amd_model.COUNTED)
    if max(model[0], counted[0]) > amd_model.TOLERANCE:
        failures.append(f"amd_model.py misses a published MI300X point by {100 * max(model[0], counted[0]):.1f}% "
                        f"(> {100 * amd_model.TOLERANCE:.0f}%): recalibrate before predicting")

    if args.markdown:
        decode = None
        if "gfx942" in archs:
            import amd_decode_model  # beside this file; it imports this module
            decode = amd_decode_model.markdown(args.build, bin_dir, sfx)
        write_markdown(args.markdown, archs, table, rows, not_built, model, counted, decode)
    for row, pas in sorted({u[:2] for u in unsupported}):
        these = [u for u in unsupported if u[:2] == (row, pas)]
        dims = sorted({u[2] for u in these})
        print(f"note: no AMD {pas} config on {row} for head dims {dims[0]}-{dims[-1]} "
              f"(e.g. {these[0][3]})")
    print(f"{len(table)} (target, kernel) code objects read for {', '.join(archs)}; "
          f"{len(selects)} dispatcher selections; rows not built here: {', '.join(not_built) or 'none'}")
    if args.check and failures:
        print("\n".join("FAIL " + f for f in failures))
        return 1
    return 0


def count_code_objects(paths, readelf, objdump):
    """The main loop's instruction mix (parse_isa) of every kernel of each code object, one
    line each: how bench/amd_model.py's COUNTED rows were read from published kernels."""
    for path in paths:
        notes = parse_notes(run([readelf, "--notes", path]))
        isa = run([objdump, "-d", "--mcpu=gfx942", path])
        for name in notes:
            mma, mix, mnemonic, _ = parse_isa(isa, name)
            mix.pop("plain")
            mix.pop("phases")
            print(f"{os.path.basename(path)} {name}: {mma} {mnemonic} in the kernel; main loop "
                  + " ".join(f"{k} {v}" for k, v in sorted(mix.items())))


def write_markdown(path, archs, table, rows, not_built, model, counted, decode=None):
    out = ["# AMD kernels: resources and predictions", "",
           "Generated by `bench/amd_resources.py` from a HIP build (rerun it after changing the",
           "kernels or the instance lists; the CI runs it with `--check`). Every number below is",
           "read from the compiled code objects, except the forward's last two columns, which",
           "are **predictions, not measurements**: no AMD GPU has run these kernels.", "",
           "## Forward", "",
           "Columns: LDS bytes; VGPRs / AGPRs per lane (on CDNA the VGPRs are all of a lane's,",
           "AGPRs included: the code object's .vgpr_count); scratch bytes (0: no spills); waves per",
           "SIMD (occupancy, from registers and LDS); matrix instructions per wave per main-loop",
           "iteration (the loop body as compiled) and in the whole kernel; the loop's other",
           "instructions (VALU incl. transcendental / LDS).", "",
           "| target | kernel | LDS | VGPR/AGPR | scratch | waves/SIMD | instruction | MMA/iter (kernel) | VALU / LDS per iter |",
           "|---|---|---|---|---|---|---|---|---|"]
    for arch, k, meta, mma, mix, mnemonic, occ in table:
        if k["pass"] not in FORWARD_PASSES:
            continue
        out.append(f"| {arch} | {k['name']} | {meta['group_segment_fixed_size']} | "
                   f"{meta['vgpr_count']}/{meta.get('agpr_count', '0')} | "
                   f"{meta['private_segment_fixed_size']} | {occ} | {mnemonic} | "
                   f"{mix.get('mma', 0)} ({mma}) | {mix.get('valu', 0) + mix.get('trans', 0)} / {mix.get('lds', 0)} |")
    out += ["", "### Predicted MI300X (gfx942) forward at d128", "",
            "By bench/amd_model.py (run it for its sources and fit): per wave and main-loop iteration,",
            "matrix time (4 x rows x keys x d FLOP at 512 FLOP per clock per SIMD), vector time (the",
            "loop's VALU instructions at 4 cycles, transcendentals at 16) and LDS time (the bytes its",
            "ds_read instructions move, at 32 bytes per clock per SIMD), the smaller parts hidden",
            "behind the largest by the overlap fitted on published kernels, at "
            f"{amd_model.CUS} CUs x 4 SIMDs x {amd_model.CLOCK_GHZ} GHz. The calibration:", ""]
    out += amd_model.markdown(model) + [""] + amd_model.markdown_counted(counted)
    out += ["", "Our instances, counted the same way, at the overlap fitted on aiter's counted loop and at",
            "none (each part in turn). For the lockstep fwd kernels the fitted figure is a bound (had",
            "their schedule hidden as much as aiter's does); the qreg kernels run the ping-pong, the",
            "schedule class the overlap was fitted on, so for them it is the prediction and the",
            "no-overlap figure a floor (amd_model.py). Not modelled: HBM and LDS latency, LDS bank",
            "conflicts, barrier waits, the prologue and epilogue.", "",
            "Each kernel twice: the loop body as compiled (every optional step counted), and its",
            "plain path (amd_resources.py plain_path: the forward branches over arithmetic-only",
            "regions taken, as a call without softcap, ALiBi or a mask takes them on almost every",
            "iteration; an approximation read from the code, not a trace).", "",
            "| kernel | count | waves/SIMD | MMA/iter | VALU / transcendental / LDS KiB per iter | cycles matrix / vector / LDS | predicted TFLOP/s (fitted overlap) | (no overlap) | aiter published |",
            "|---|---|---|---|---|---|---|---|---|"]
    for arch, k, meta, mma, mix, mnemonic, occ in table:
        if arch != "gfx942" or k["d"] != 128 or k["pass"] not in ("fwd", "qreg"):
            continue
        for label, m in (("loop body", mix), ("plain path", mix["plain"])):
            hidden, serial = amd_model.predict_ours(k, m, counted)
            parts = amd_model.parts_from_mix(k, m)
            out.append(f"| {k['name']} | {label} | {occ} | {m.get('mma', 0)} | {m.get('valu', 0)} / "
                       f"{m.get('trans', 0)} / {m.get('lds_bytes', 0) / 1024:.0f} | "
                       f"{parts[0]:.0f} / {parts[1]:.0f} / {parts[2]:.0f} | {hidden:.0f} | {serial:.0f} | "
                       f"577-592 (d128, s 8k) |")
    out += ["", "The ping-pong's phases (qreg, gfx942 d128, plain path; amd_resources.py loop_phases: the",
            "loop's blocks by barrier phase along its own edges). Per wave and tile, cycles matrix /",
            "vector / LDS of each phase: on a SIMD one group's matrix phase runs beside the other",
            "group's softmax phase, so the softmax phase's vector cycles must stay under the matrix",
            "phase's MFMA cycles for the matrix unit not to wait at the barriers.", "",
            "| kernel | matrix phase | softmax phase | softmax vector / matrix-phase MFMA |",
            "|---|---|---|---|"]
    for arch, k, meta, mma, mix, mnemonic, occ in table:
        if arch != "gfx942" or k["d"] != 128 or k["pass"] != "qreg" or len(mix["phases"]) != 2:
            continue
        by_mma = sorted(mix["phases"], key=lambda p: -p.get("mma", 0))  # the matrix phase first
        m_phase, s_phase = (amd_model.phase_parts(k, p, mix["plain"].get("mma", 0)) for p in by_mma)
        out.append(f"| {k['name']} | {' / '.join(f'{x:.0f}' for x in m_phase)} | "
                   f"{' / '.join(f'{x:.0f}' for x in s_phase)} | {s_phase[1] / m_phase[0]:.2f} |")
    if decode:
        out += [""] + decode
    out += ["", "## Backward", "",
            "The dK/dV and dQ kernels of each backward instance (src/common/gpu_kernels/attn_bwd.h;",
            "tile in the name, waves in src/common/select/bwd_instances.txt) and the shared kernels",
            "(split-KV combine, backward preprocess and dQ conversion). Columns as above,",
            "except occupancy, given as waves per CU (whole workgroups, as LDS and registers",
            "allow: the two-wave instances fill at most half of a CU's four SIMDs per",
            "workgroup), and matrix instructions per wave per pipeline step (the main loop as",
            "compiled) and in the whole kernel. RDNA builds only the rows listing wave 32 (bwd_instances.txt): d32, whose dK/dV kernel has no atomic dQ phase there.",
            "No performance prediction.", "",
            "| target | kernel | LDS | VGPR/AGPR | scratch | waves/CU | instruction | MMA/step (kernel) |",
            "|---|---|---|---|---|---|---|---|"]
    for arch, k, meta, mma, mix, mnemonic, occ in table:
        if k["pass"] in FORWARD_PASSES:
            continue
        prep = k["pass"] == "shared"
        cu = "-" if prep else waves_per_cu(meta, rows[arch], k)
        out.append(f"| {arch} | {k['name']} | {meta['group_segment_fixed_size']} | "
                   f"{meta['vgpr_count']}/{meta.get('agpr_count', '0')} | "
                   f"{meta['private_segment_fixed_size']} | {cu} | {'-' if prep else mnemonic} | "
                   f"{'-' if prep else str(mix.get('mma', 0)) + ' (' + str(mma) + ')'} |")
    if not_built:
        out += ["", f"Table rows with no code object in this build: {', '.join(not_built)} "
                "(gfx950 needs LLVM 20+; its row and dispatcher tests remain)."]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
