#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer target tests/fuzz/fuzz_api (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in the library too, no BLAS) into the directory $1 (default:
# a temporary one), replays the committed corpus and regressions once (ctest), then
# fuzzes from them for a bounded number of executions; then the same for fuzz_paged (paged
# K/V and fa_fwd_kvcache).
#
#   ci/fuzz.sh [BUILD_DIR]
#   FA_FUZZ_RUNS   executions after the replay (default 100000: coverage grows by under 1%
#                  from there to 200000, fresh-ci 2026-12-06, while CI keeps its 30 minutes)
#   FA_FUZZ_PAGED_RUNS   executions of fuzz_paged (paged K/V, fa_fwd_kvcache) after it
#                  (default 20000, about half a minute on two cores)
#   FA_FUZZ_SEED   libFuzzer's seed (default 1, reproducible; 0 picks one at random)
#   FA_FUZZ_CC / FA_FUZZ_CXX   compilers (default clang-19 / clang++-19; needs libFuzzer,
#                  Debian package libclang-rt-19-dev)
#
# New inputs go to BUILD_DIR/fuzz-corpus (and fuzz-corpus-paged), never into the committed
# corpora; a crash is written to BUILD_DIR/crash-* (add it to tests/fuzz/regressions/, or
# regressions_paged/ for fuzz_paged, once it is fixed).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$#" -ge 1 ]; then
  BUILD="$1"
else
  BUILD="$(mktemp -d)"
  trap 'rm -rf "$BUILD"' EXIT
fi
RUNS="${FA_FUZZ_RUNS:-100000}"
PAGED_RUNS="${FA_FUZZ_PAGED_RUNS:-20000}"
SEED="${FA_FUZZ_SEED:-1}"
JOBS="$(nproc)"

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="${FA_FUZZ_CC:-clang-19}" -DCMAKE_CXX_COMPILER="${FA_FUZZ_CXX:-clang++-19}" \
  -DFA_BUILD_FUZZ=ON -DFA_USE_BLAS=OFF -DFA_BUILD_TESTS=OFF -DFA_BUILD_BENCH=OFF \
  -DFA_BUILD_SHARED=OFF
cmake --build "$BUILD" --parallel "$JOBS" --target fuzz_api fuzz_paged
ctest --test-dir "$BUILD" --output-on-failure

mkdir -p "$BUILD/fuzz-corpus"
start="$(date +%s)"
# NEW/REDUCE lines (one per corpus addition) are left out of the log; the periodic pulse
# lines, a crash report and the final statistics (exec/s) stay.
"$BUILD/tests/fuzz/fuzz_api" -runs="$RUNS" -seed="$SEED" -max_len=512 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$BUILD/" "$BUILD/fuzz-corpus" \
  "$ROOT/tests/fuzz/corpus" "$ROOT/tests/fuzz/regressions" 2>&1 |
  grep --line-buffered -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE)'
echo "fuzz.sh: $RUNS executions in $(( $(date +%s) - start )) s"

mkdir -p "$BUILD/fuzz-corpus-paged"
start="$(date +%s)"
"$BUILD/tests/fuzz/fuzz_paged" -runs="$PAGED_RUNS" -seed="$SEED" -max_len=256 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$BUILD/" "$BUILD/fuzz-corpus-paged" \
  "$ROOT/tests/fuzz/corpus_paged" 2>&1 |
  grep --line-buffered -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE)'
echo "fuzz.sh: fuzz_paged, $PAGED_RUNS executions in $(( $(date +%s) - start )) s"
