#!/usr/bin/env bash
# sass_local.sh GENERATED.cu|CUBIN [OUT.sass] - machine code of one CUDA kernel instance without
# a GPU machine: compiles the generated translation unit (build*/generated/cuda/*.cu) for
# sm_90 with this machine's nvcc, disassembles it and prints each kernel's opcode
# histogram (the full listing goes to OUT.sass, default /tmp/<name>.sass).
#
# nvcc 13 ships no disassembler here, so the first run fetches Debian's non-free
# nvidia-cuda-toolkit 11.8 package (apt-get download, no install) and uses its nvdisasm.
# That nvdisasm predates CUDA 13's ELF header (ABI version 8, new e_flags layout), so a
# copy of the cubin gets the old header for sm_90 (ABI 7, flags 0x5a055a); the sm_90
# instruction encoding inside is unchanged. A fact-finding tool: counts are static, so
# read branches (masked paths, tails) with care.
#
# FA_SASS_SM90A=1 compiles for sm_90a instead (-gencode=arch=compute_90a,code=sm_90a: the
# wgmma/TMA/setmaxnreg code of src/cuda/fa_hopper.h); the same header patch serves, since
# the old nvdisasm decodes sm_90a's instructions (HGMMA, UTMALDG, SYNCS, USETMAXREG) once
# the file says sm_90.
#
# GENERATED may also be a cubin already compiled (bench/ptxas_check.sh passes its own): it is
# disassembled as it is.
set -euo pipefail
src=$1
out=${2:-/tmp/$(basename "$src" .cu).sass}
root="$(cd "$(dirname "$0")/.." && pwd)"
tools=${FA_SASS_TOOLS:-/tmp/fa_nvdisasm}
nvdisasm=$tools/usr/bin/nvdisasm
if [[ ! -x $nvdisasm ]]; then
  mkdir -p "$tools"
  echo 'Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > "$tools/nonfree.sources"
  apt-get update -o Dir::Etc::sourcelist="$tools/nonfree.sources" -o Dir::Etc::sourceparts=- > /dev/null
  (cd "$tools" && apt-get download -o Dir::Etc::sourcelist="$tools/nonfree.sources" \
     -o Dir::Etc::sourceparts=- nvidia-cuda-toolkit > /dev/null 2>&1 && dpkg -x nvidia-cuda-toolkit_*.deb .)
fi
target=-arch=sm_90
[[ ${FA_SASS_SM90A:-0} == 1 ]] && target=-gencode=arch=compute_90a,code=sm_90a
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
if [[ $src == *.cubin ]]; then
  cp "$src" "$cubin"
else
  nvcc -DFA_HAVE_CUDA=1 -I"$root/include" -I"$root/src/common" -I"$root/src/cuda" -O3 -DNDEBUG \
       $target -std=c++14 -cubin -o "$cubin" -x cu "$src"
fi
python3 - "$cubin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8] = 7                                  # EI_ABIVERSION
struct.pack_into("<I", b, 48, 0x005a055a) # e_flags: sm_90, virtual sm_90, 64-bit, unified texmode
open(sys.argv[1], "wb").write(b)
PY
"$nvdisasm" -c "$cubin" > "$out"
python3 - "$out" <<'PY'
import collections, re, sys
counts, name = {}, None
for line in open(sys.argv[1]):
    if line.startswith(".text."):
        name = line.strip()[6:].rstrip(":")
        counts.setdefault(name, collections.Counter())
    m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9_]+)", line)
    if name and m:
        counts[name][m.group(1)] += 1
for name, c in counts.items():
    top = " ".join(f"{op}:{n}" for op, n in c.most_common(16))
    print(f"{name} ({sum(c.values())} instructions): {top}")
PY
echo "full listing: $out"
