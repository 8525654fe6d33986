#!/usr/bin/env bash
# prepare_device.sh - builds the CUDA library and GPU tests here (nvcc 13) without
# OpenBLAS (the GPU machine lacks it) and copies what a device call needs into .carry/
# (git-ignored) as one xz archive: the binaries link the kernels statically (about 30 MiB
# of fatbin each), and a call carries at most 64 MiB. With a dictionary larger than one
# binary, xz stores what the library and the tests share once: a library, the tests and
# two more libraries of other builds (bench/NOTES.md's A/B calls) come to about 7 MiB,
# where gzip's 32 KiB window gave 38 MiB for three. device_run.sh unpacks it with Python's
# tarfile (the GPU machine's xz is not assumed).
set -euo pipefail
cd "$(dirname "$0")/.."
archs=${FA_CUDA_ARCHS:-90}
cmake -S . -B build-device -G Ninja -DFA_ENABLE_CUDA=ON -DFA_CUDA_ARCHS="$archs" -DFA_USE_BLAS=OFF \
      -DFA_BUILD_TESTS=ON -DFA_BUILD_BENCH=ON -DFA_BUILD_RING=ON > /dev/null
cmake --build build-device
stage=build-device/carry-stage
rm -rf .carry "$stage" && mkdir -p .carry "$stage"
cp -P build-device/libflashattn.so* build-device/tests/flashattn_gpu_tests build-device/tests/flashattn_tests "$stage"/
cp build-device/bench/flashattn_bench "$stage"/ 2>/dev/null || true
# The ring over NCCL (issue 18), when NCCL was found: its tests and timing case.
cp build-device/tests/ring/flashattn_ring_nccl_tests "$stage"/ 2>/dev/null || true
tar -cf - -C "$stage" . | xz -T2 --lzma2=preset=6,dict=256MiB > .carry/carry.txz
du -sh .carry/carry.txz
