#!/usr/bin/env python3
"""sass_dump.py BUILD_DIR OUT_DIR - the sm_90 machine code of every CUDA kernel a configured
build compiles, one file per kernel, for comparing two trees instruction by instruction.

Reads BUILD_DIR/compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON),
recompiles each .cu source with its own -I/-D flags to an sm_90 cubin, disassembles it
with bench/sass_local.sh's nvdisasm (run that script once first) and writes
OUT_DIR/<kernel>.sass: the instructions without addresses or encodings, the kernel's own
name written <self> and its branch labels numbered from 0 within it (a cubin numbers
them across its kernels), and OUT_DIR/manifest.txt: kernel, instruction count, sha256 of
the listing. A refactor that keeps the machine code gives equal hashes under the
kernels' (possibly new) names: `sass_dump.py --compare OLD_DIR NEW_DIR [SED...]` pairs
them, renaming OLD's kernels by each s/regex/replacement/ (Python re) in turn."""
import hashlib, json, os, re, shlex, struct, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

def canonical(name, lines):
    labels = {}
    def label(m):
        return labels.setdefault(m.group(0), f".L_{len(labels)}")
    return [re.sub(r"\.L_x_\d+", label, l.replace(f"`({name})", "`(<self>)")) for l in lines]

def compare(old_dir, new_dir, seds):
    def manifest(d):
        return {f[0]: f[2] for f in (l.split() for l in open(os.path.join(d, "manifest.txt")))}
    old, new = manifest(old_dir), manifest(new_dir)
    renamed = {}
    for name in old:
        to = name
        for sed in seds:
            _, pattern, repl, _ = sed.split("/")
            to = re.sub(pattern, repl, to)
        renamed[name] = to
    same = [n for n in old if new.get(renamed[n]) == old[n]]
    differ = [n for n in old if renamed[n] in new and new[renamed[n]] != old[n]]
    missing = [n for n in old if renamed[n] not in new]
    extra = sorted(set(new) - set(renamed.values()))
    print(f"{len(same)} of {len(old)} kernels identical; differ: {differ or 'none'}; "
          f"missing: {missing or 'none'}; new only: {extra or 'none'}")
    return 0 if len(same) == len(old) and not extra else 1

if sys.argv[1] == "--compare":
    sys.exit(compare(sys.argv[2], sys.argv[3], sys.argv[4:]))
build, out = sys.argv[1], sys.argv[2]
nvdisasm = os.environ.get("FA_SASS_TOOLS", "/tmp/fa_nvdisasm") + "/usr/bin/nvdisasm"
os.makedirs(out, exist_ok=True)
units = [u for u in json.load(open(os.path.join(build, "compile_commands.json")))
         if u["file"].endswith(".cu")]

def flags(unit):
    args = shlex.split(unit["command"])
    keep, it = [], iter(args)
    for a in it:
        if a in ("-I", "-D", "-isystem"):
            keep += [a, next(it)]
        elif a.startswith(("-I", "-D", "-std", "-isystem")):
            keep.append(a)
    return keep

def listing(unit):
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        subprocess.run(["nvcc", *flags(unit), "-O3", "-arch=sm_90", "-cubin", "-o", cubin,
                        "-x", "cu", unit["file"]], check=True, cwd=unit["directory"])
        b = bytearray(open(cubin, "rb").read())
        b[8] = 7                                   # the old nvdisasm's ELF header (sass_local.sh)
        struct.pack_into("<I", b, 48, 0x005a055a)
        open(cubin, "wb").write(b)
        return subprocess.run([nvdisasm, "-c", cubin], check=True, capture_output=True,
                              text=True).stdout

kernels = {}
def split(text):
    name = None
    for line in text.splitlines():
        if line.startswith(".text."):
            name = line.strip()[6:].rstrip(":")
            kernels[name] = []
            continue
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if name and m:
            kernels[name].append(m.group(1))

with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
    for text in pool.map(listing, units):
        split(text)
with open(os.path.join(out, "manifest.txt"), "w") as man:
    for name in sorted(kernels):
        body = "\n".join(canonical(name, kernels[name])) + "\n"
        open(os.path.join(out, name + ".sass"), "w").write(body)
        man.write(f"{name} {len(kernels[name])} {hashlib.sha256(body.encode()).hexdigest()}\n")
print(f"{len(kernels)} kernels from {len(units)} CUDA sources -> {out}")
