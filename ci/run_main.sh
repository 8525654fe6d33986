#!/usr/bin/env bash
# run_main.sh - the main job: install the dependencies, build flashattn with every backend
# this machine can use, and benchmark one forward attention shape on the best backend
# present (CUDA, then HIP, then the CPU) with --check against the fp64 reference.
# On the CPU it also times OpenBLAS SGEMM for an attention/GEMM efficiency ratio.
# Extra arguments go to flashattn_bench (e.g. --seqlen 4096 --dtype bf16 --json).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${FA_BUILD_DIR:-$ROOT/build-main}"

echo "==== Install dependencies ===="
bash "$ROOT/ci/install_deps.sh"

GPU_FLAGS=()
BENCH_FLAGS=(--sgemm)
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  GPU_FLAGS+=(-DFA_ENABLE_CUDA=ON)
  BENCH_FLAGS=()
elif command -v hipcc >/dev/null 2>&1 && [ -e /dev/kfd ]; then
  GPU_FLAGS+=(-DFA_ENABLE_HIP=ON)
  BENCH_FLAGS=()
fi

echo "==== Build (${GPU_FLAGS[*]:-CPU only}) ===="
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_BUILD_TESTS=OFF \
  -DFA_BUILD_BENCH=ON "${GPU_FLAGS[@]}"
cmake --build "$BUILD" --parallel "$(nproc)"

echo "==== Benchmark: causal forward, b=1 s=2048 h=16 d=128 ===="
"$BUILD/bench/flashattn_bench" --backend auto --batch 1 --seqlen 2048 --heads 16 \
  --head-dim 128 --causal --iters 10 --check "${BENCH_FLAGS[@]}" "$@"
