#!/usr/bin/env bash
# test.sh - what CI runs (through .ci/run): install the dependencies, build and test the
# default configuration (OpenBLAS when found), build and test again without BLAS, build
# the HIP backend for the four AMD targets and check its code objects, smoke-
# run the benchmark CLI with --check, then install into a temporary prefix and build a
# consumer against it with find_package(flashattn) and with pkg-config.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
JOBS="$(nproc)"

section() { printf '\n==== %s ====\n' "$*"; }

build_and_test() { # build_and_test DIR [cmake args...]
  local dir="$1"
  shift
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFA_BUILD_TESTS=ON "$@"
  cmake --build "$dir" --parallel "$JOBS"
  ctest --test-dir "$dir" --output-on-failure --parallel "$JOBS"
}

section "Install dependencies"
bash "$ROOT/ci/install_deps.sh"

section "Build and test (default: OpenBLAS when present)"
build_and_test "$WORK/build" -DFA_BUILD_BENCH=ON

section "Build and test without BLAS (-DFA_USE_BLAS=OFF)"
build_and_test "$WORK/build-noblas" -DFA_USE_BLAS=OFF -DFA_BUILD_BENCH=OFF

section "HIP backend for gfx90a;gfx942;gfx1100;gfx1201: build, check code objects, test"
# No AMD GPU here: the tests check the compiled code objects against the arch table and
# the dispatcher (amd_code_objects), fa_create reports no device (skipped), and the CPU
# tests run against the HIP-enabled library.
build_and_test "$WORK/build-hip" -DFA_ENABLE_HIP=ON -DFA_HIP_ARCHS="gfx90a;gfx942;gfx1100;gfx1201" \
  -DFA_USE_BLAS=OFF -DFA_BUILD_BENCH=OFF

section "Benchmark CLI smoke run with --check"
"$WORK/build/bench/flashattn_bench" --backend cpu --batch 2 --seqlen 256 --heads 4 \
  --kv-heads 2 --head-dim 64 --causal --iters 2 --check
"$WORK/build/bench/flashattn_bench" --backend cpu --seqlen-q 96 --seqlen-k 200 --heads 2 \
  --head-dim 40 --dtype bf16 --window 32,8 --softcap 20 --alibi --iters 1 --check --json
"$WORK/build/bench/flashattn_bench" --backend cpu --batch 2 --seqlen 256 --heads 4 \
  --kv-heads 2 --head-dim 64 --causal --iters 2 --backward --check
"$WORK/build/bench/flashattn_bench" --backend cpu --seqlen-q 96 --seqlen-k 200 --heads 2 \
  --head-dim 40 --dtype bf16 --window 32,8 --softcap 20 --alibi --iters 1 --backward --check --json

section "Install into a temporary prefix"
# A prefix chosen at install time, not at configure time: the package files must follow.
cmake --install "$WORK/build" --prefix "$WORK/prefix"

section "Consumer through find_package(flashattn)"
cmake -S "$ROOT/ci/consumer" -B "$WORK/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$WORK/prefix"
cmake --build "$WORK/consumer"
"$WORK/consumer/flashattn_consumer"

section "Consumer through pkg-config"
LIBDIR="$(find "$WORK/prefix" -name flashattn.pc -printf '%h\n' | head -n1)"
export PKG_CONFIG_PATH="$LIBDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# --static brings in the private dependencies (OpenBLAS, -lm) should the linker pick the
# static library; the rpath finds the shared one in this non-system prefix.
cc -std=c99 -Wall -Wextra -Werror "$ROOT/ci/consumer/consumer.c" -o "$WORK/consumer_pc" \
  $(pkg-config --cflags --libs --static flashattn) \
  -Wl,-rpath,"$(pkg-config --variable=libdir flashattn)"
"$WORK/consumer_pc"

section "All CI steps passed"
