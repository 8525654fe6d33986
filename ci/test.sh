#!/usr/bin/env bash
# test.sh - what CI runs (through .ci/run): install the dependencies, build and test the
# default configuration (OpenBLAS when found; with ring attention's MPI tests under
# mpiexec, 2 to 4 ranks), pip-install the Python package and run its
# tests on the CPU backend, run the benchmark sweep and its report (headless Chromium),
# build and test again without BLAS, then
# with AddressSanitizer + UndefinedBehaviorSanitizer and with ThreadSanitizer, fuzz the
# API (libFuzzer, tests/fuzz), build the HIP backend for the four AMD targets and check
# its code objects, run the emulated AMD device's tests (src/emu), smoke-run the benchmark CLI with --check, then install into a temporary prefix and build a
# consumer against it with find_package(flashattn) and with pkg-config. Each section
# prints its start time; the seconds each took are listed at the end, pass or fail.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
JOBS="$(nproc)"
# Debian's interpreter, where install_deps.sh puts torch, pytest, wheel, jsonschema and
# matplotlib: a python3 earlier on PATH (pyenv, a conda) has none of them.
PYTHON=/usr/bin/python3

TIMINGS=()
SECTION=""
section_end() {
  if [ -n "$SECTION" ]; then
    TIMINGS+=("$(printf '%5d s  %s' $((SECONDS - SECTION_START)) "$SECTION")")
  fi
  SECTION=""
}
section() {
  section_end
  SECTION="$*"
  SECTION_START=$SECONDS
  printf '\n==== %s ==== (%s)\n' "$*" "$(date -u '+%F %T UTC')"
}
finish() {
  local rc=$?
  section_end
  printf '\n==== Timings (%s after %d s) ====\n' "$([ "$rc" -eq 0 ] && echo passed || echo "FAILED, exit $rc")" "$SECONDS"
  printf '%s\n' "${TIMINGS[@]}"
  rm -rf "$WORK"
}
trap finish EXIT

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

section "Python package: pip install into a venv, pytest on the CPU backend"
# The installed copy (its bundled library, not the tree's) with Debian's torch 1.13; the
# floor makes a run where the tests skip or are not collected fail (tests/python/conftest.py).
"$PYTHON" -m venv --system-site-packages "$WORK/venv"
FLASHATTN_LIBRARY="$WORK/build/libflashattn.so" "$WORK/venv/bin/pip" install --no-build-isolation --no-index \
  "$ROOT/python"
(cd "$WORK" && FLASHATTN_TEST_INSTALLED=1 PYTHONPATH="$ROOT/tests" "$WORK/venv/bin/python" -m pytest -rs \
  -p no:cacheprovider -p pytest_floor --rootdir "$ROOT/tests/python" --min-passed 54 "$ROOT/tests/python")

section "Benchmark sweep (CPU, smoke preset) and the cross-machine report in headless Chromium"
# tests/bench: flashattn_bench --sweep's JSON against bench/sweep_schema.json and its CSV,
# bench/report.py over the committed sweeps of two devices (bench/results/sweep), its
# refusals, and the page in Chromium (no console errors, the plots drawn, a screenshot).
(cd "$WORK" && FLASHATTN_BENCH="$WORK/build/bench/flashattn_bench" PYTHONPATH="$ROOT/tests" \
  FLASHATTN_REPORT_SCREENSHOT="$WORK/report.png" "$PYTHON" -m pytest -rs -p no:cacheprovider -p pytest_floor \
  --rootdir "$ROOT/tests/bench" --min-passed 8 "$ROOT/tests/bench")
"$WORK/build/bench/flashattn_bench" --sweep smoke --iters 2 --out-json "$WORK/smoke.json" --out-csv "$WORK/smoke.csv"
"$PYTHON" "$ROOT/bench/report.py" "$WORK/smoke.json" "$ROOT"/bench/results/sweep/*.json --md "$WORK/report.md"

# The ring library (src/ring, issue 18) is built and its MPI tests run in the default build
# only: it calls the library's public API and nothing of BLAS or a GPU backend, and its
# tests are not registered under the sanitizers (tests/ring/CMakeLists.txt says why), so
# the other builds would compile it again for nothing (minutes of CI on two cores).
section "Build and test without BLAS (-DFA_USE_BLAS=OFF)"
build_and_test "$WORK/build-noblas" -DFA_USE_BLAS=OFF -DFA_BUILD_BENCH=OFF -DFA_BUILD_RING=OFF

# The sanitizer builds: CPU library and tests only (no bench, no GPU backends), without
# OpenBLAS, whose own threads and kernels are not instrumented (false TSan reports, blind
# ASan). Every report is fatal: the flags do not recover (FA_SANITIZE in CMakeLists.txt)
# and the runtimes halt at the first error, so the test that hit it fails with the report.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:print_stacktrace=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:second_deadlock_stack=1"
ulimit -c 0 # abort_on_error: no core files

section "Build and test with AddressSanitizer + UndefinedBehaviorSanitizer (gcc)"
# gcc, the compiler of the builds above: the target_clones (AVX-512/AVX2/baseline) kernels
# of the CPU backend are gcc-only, and they get checked too.
build_and_test "$WORK/build-asan" -DFA_SANITIZE=address,undefined -DFA_USE_BLAS=OFF -DFA_BUILD_BENCH=OFF \
  -DFA_BUILD_RING=OFF

section "Build and test with ThreadSanitizer (clang-19)"
# Every CPU test runs the worker threads (fa_set_num_threads: the case's count, 0 = every
# core), so the whole suite runs here. clang-19, not gcc-12: gcc instruments the ifunc
# resolvers of target_clones, which the dynamic loader runs before the TSan runtime is up
# (a segfault at startup); clang builds the CPU kernels without clones.
build_and_test "$WORK/build-tsan" -DFA_SANITIZE=thread -DFA_USE_BLAS=OFF -DFA_BUILD_BENCH=OFF -DFA_BUILD_RING=OFF \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19

section "libFuzzer over the API on the CPU backend (clang-19, ASan + UBSan), 60k + 20k (paged, beside it) executions"
# Replays the committed corpora and every regression (ctest fuzz_corpus, fuzz_paged_corpus),
# then fuzzes from them with a fixed seed (FA_FUZZ_RUNS, FA_FUZZ_PAGED_RUNS, FA_FUZZ_SEED
# override); tests/fuzz/README.md.
bash "$ROOT/ci/fuzz.sh" "$WORK/build-fuzz"
unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS

section "HIP backend for gfx90a;gfx942;gfx1100;gfx1201: build, check code objects, test"
# No AMD GPU here: the tests check the compiled code objects against the arch table and
# the dispatcher (amd_code_objects), fa_create reports no device (skipped), and the CPU
# tests run against the HIP-enabled library. The benchmark CLI is built on HIP's runtime
# too (bench/bench_gpu.h); without a GPU, --backend hip must name the missing device.
build_and_test "$WORK/build-hip" -DFA_ENABLE_HIP=ON -DFA_HIP_ARCHS="gfx90a;gfx942;gfx1100;gfx1201" \
  -DFA_USE_BLAS=OFF -DFA_BUILD_BENCH=ON -DFA_BUILD_RING=OFF
hip_cli="$("$WORK/build-hip/bench/flashattn_bench" --backend hip --sweep smoke 2>&1 || true)"
grep -q "FA_ERR_NO_DEVICE" <<<"$hip_cli" || { echo "flashattn_bench --backend hip: $hip_cli"; exit 1; }

section "Emulated AMD device: instructions, scheduler, and the HIP kernels' sweep (clang-19, ASan + UBSan)"
# src/emu (issue 15): the thin ISA names of src/hip run on the CPU on an emulated wave64
# (gfx942, whose MFMA forms gfx90a shares) and wave32 (gfx1100, gfx1201) device, checked
# against AMD's Matrix Instruction Calculator tables (tests/emu/calc) and for the
# scheduler's named errors; then every hip kernel instance (FA_EMU_INSTANCES=all) through
# the public API against the fp64 oracle on gfx90a, gfx942, gfx1100 and gfx1201
# (tests/emu/test_emu_sweep.cpp). Test-only.
cmake -S "$ROOT" -B "$WORK/build-emu" -G Ninja -DFA_BUILD_TESTS=OFF -DFA_BUILD_AMD_EMU=ON \
  -DFA_USE_BLAS=OFF -DFA_BUILD_BENCH=OFF -DFA_BUILD_RING=OFF -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19
cmake --build "$WORK/build-emu" --parallel "$JOBS"
ctest --test-dir "$WORK/build-emu" --output-on-failure --parallel "$JOBS" -R amd_emu_

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
# The second exported target: ring attention over MPI (a one-process ring, no mpiexec).
"$WORK/consumer/flashattn_ring_consumer"

section "Consumer through pkg-config"
LIBDIR="$(find "$WORK/prefix" -name flashattn.pc -printf '%h\n' | head -n1)"
export PKG_CONFIG_PATH="$LIBDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# --static brings in the private dependencies (OpenBLAS, -lm) should the linker pick the
# static library; the rpath finds the shared one in this non-system prefix.
cc -std=c99 -Wall -Wextra -Werror "$ROOT/ci/consumer/consumer.c" -o "$WORK/consumer_pc" \
  $(pkg-config --cflags --libs --static flashattn) \
  -Wl,-rpath,"$(pkg-config --variable=libdir flashattn)"
"$WORK/consumer_pc"

section_end
printf '\n==== All CI steps passed ====\n'
