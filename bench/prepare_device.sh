#!/usr/bin/env bash
# prepare_device.sh - builds the CUDA library and GPU tests here (nvcc 13) without
# OpenBLAS (the GPU machine lacks it) and copies what a device call needs into .carry/
# (git-ignored), small enough to travel with the call.
set -euo pipefail
cd "$(dirname "$0")/.."
archs=${FA_CUDA_ARCHS:-90}
cmake -S . -B build-device -G Ninja -DFA_ENABLE_CUDA=ON -DFA_CUDA_ARCHS="$archs" -DFA_USE_BLAS=OFF \
      -DFA_BUILD_TESTS=ON -DFA_BUILD_BENCH=ON > /dev/null
cmake --build build-device
rm -rf .carry && mkdir -p .carry
cp -P build-device/libflashattn.so* build-device/tests/flashattn_gpu_tests build-device/tests/flashattn_tests .carry/
cp build-device/bench/flashattn_bench .carry/ 2>/dev/null || true
du -sh .carry
