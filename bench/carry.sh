# shellcheck shell=bash
# carry.sh - sourced by the scripts that take builds to the GPU machine (prepare_device.sh and
# variant_carry.sh here, device_run.sh and ab_call.sh there), run from the repository root.
# The binaries link the kernels statically (about 30 MiB of fatbin each) and a call carries
# at most 64 MiB, so they travel as one xz archive, .carry/carry.txz (git-ignored), whose
# dictionary is larger than one binary: what builds share is stored once (a library, the
# tests and two more libraries come to about 7 MiB, where gzip's 32 KiB window gave 38 MiB
# for three). The GPU machine unpacks it with Python's tarfile (its xz is not assumed).

# The CUDA build of this machine's nvcc 13, without OpenBLAS (the GPU machine lacks it).
carry_configure() {
    cmake -S . -B build-device -G Ninja -DFA_ENABLE_CUDA=ON -DFA_CUDA_ARCHS="${FA_CUDA_ARCHS:-90}" \
          -DFA_USE_BLAS=OFF -DFA_BUILD_TESTS=ON -DFA_BUILD_BENCH=ON -DFA_BUILD_RING=ON > /dev/null
}

# carry_pack STAGE: every file in STAGE into .carry/carry.txz.
carry_pack() {
    mkdir -p .carry
    tar -cf - -C "$1" . | xz -T2 --lzma2=preset=6,dict=256MiB > .carry/carry.txz
    du -h .carry/carry.txz
}

# On the GPU machine: the archive's files into .carry/, once.
carry_unpack() {
    [[ -f .carry/carry.txz ]] || return 0
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('.carry')" .carry/carry.txz &&
        rm .carry/carry.txz
}
