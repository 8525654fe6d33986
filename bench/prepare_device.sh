#!/usr/bin/env bash
# prepare_device.sh - builds the CUDA library and GPU tests here (nvcc 13) and packs what
# bench/device_run.sh needs into .carry/carry.txz (bench/carry.sh says how and why).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/carry.sh
carry_configure
cmake --build build-device
stage=build-device/carry-stage
rm -rf .carry "$stage" && mkdir -p .carry "$stage"
cp -P build-device/libflashattn.so* build-device/tests/flashattn_gpu_tests build-device/tests/flashattn_tests "$stage"/
cp build-device/bench/flashattn_bench "$stage"/ 2>/dev/null || true
# The ring over NCCL (issue 18), when NCCL was found: its tests and timing case.
cp build-device/tests/ring/flashattn_ring_nccl_tests "$stage"/ 2>/dev/null || true
carry_pack "$stage"
