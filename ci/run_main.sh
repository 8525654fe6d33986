#!/usr/bin/env bash
# run_main.sh - the main job: install the dependencies, build flashattn with every backend
# this machine can use, and benchmark one forward attention shape on the best backend
# present with --check against the fp64 reference: the GPU when nvcc and an NVIDIA GPU
# are here (built for that GPU's architecture), else the CPU, where it also times
# OpenBLAS SGEMM for an attention/GEMM efficiency ratio. HIP joins once its backend
# exists. Extra arguments go to flashattn_bench (e.g. --seqlen 4096 --dtype bf16 --json).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${FA_BUILD_DIR:-$ROOT/build-main}"

# nvcc on PATH, or where the CUDA toolkit installs it by default.
find_nvcc() {
  command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; }
}

# The compute capabilities of the GPUs here as FA_CUDA_ARCHS ("90", "80;90"), building
# only those to keep the build short; empty when nvidia-smi sees no GPU the kernels can
# run on (they need sm_80 or newer).
gpu_archs() {
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
    tr -d ' .' | awk '/^[0-9]+$/ && $1 >= 80' | sort -un | paste -sd ';' || true
}

echo "==== Install dependencies ===="
bash "$ROOT/ci/install_deps.sh"

NVCC="$(find_nvcc || true)"
ARCHS=""
if [ -n "$NVCC" ] && command -v nvidia-smi >/dev/null 2>&1; then
  ARCHS="$(gpu_archs)"
fi

BACKEND_FLAGS=()
BENCH_FLAGS=(--backend cpu --sgemm)
if [ -n "$ARCHS" ]; then
  BACKEND_FLAGS=(-DFA_ENABLE_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" -DFA_CUDA_ARCHS="$ARCHS")
  BENCH_FLAGS=(--backend cuda)
fi

echo "==== Build (${BACKEND_FLAGS[*]:-CPU only}) ===="
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_BUILD_TESTS=OFF \
  -DFA_BUILD_BENCH=ON "${BACKEND_FLAGS[@]}"
cmake --build "$BUILD" --parallel "$(nproc)"

echo "==== Benchmark: causal forward, b=1 s=2048 h=16 d=128 ===="
"$BUILD/bench/flashattn_bench" --batch 1 --seqlen 2048 --heads 16 --head-dim 128 --causal \
  --iters 10 --check "${BENCH_FLAGS[@]}" "$@"
