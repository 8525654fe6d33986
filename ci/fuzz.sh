#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer target tests/fuzz/fuzz_api (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in the library too, no BLAS) into the directory $1 (default:
# a temporary one), replays the committed corpus and regressions once (ctest), then
# fuzzes from them for a bounded number of executions, side by side with the same for
# fuzz_paged (paged K/V and fa_fwd_kvcache).
#
#   ci/fuzz.sh [BUILD_DIR]
#   FA_FUZZ_RUNS   executions after the replay (default 60000: 65000 reached 1762 of the
#                  1776 edges that 200000 reach, fresh-ci 2026-12-06; CI keeps its 30 minutes)
#   FA_FUZZ_PAGED_RUNS   executions of fuzz_paged (paged K/V, fa_fwd_kvcache), run beside
#                  fuzz_api on the second core (default 20000, under a minute)
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
RUNS="${FA_FUZZ_RUNS:-60000}"
PAGED_RUNS="${FA_FUZZ_PAGED_RUNS:-20000}"
SEED="${FA_FUZZ_SEED:-1}"
JOBS="$(nproc)"

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="${FA_FUZZ_CC:-clang-19}" -DCMAKE_CXX_COMPILER="${FA_FUZZ_CXX:-clang++-19}" \
  -DFA_BUILD_FUZZ=ON -DFA_USE_BLAS=OFF -DFA_BUILD_TESTS=OFF -DFA_BUILD_BENCH=OFF \
  -DFA_BUILD_SHARED=OFF
cmake --build "$BUILD" --parallel "$JOBS" --target fuzz_api fuzz_paged
ctest --test-dir "$BUILD" --output-on-failure

# The two targets fuzz side by side (libFuzzer runs one process on one core); their logs
# are printed once both have ended, fuzz_api's first. NEW/REDUCE lines (one per corpus
# addition) are left out; the periodic pulse lines, a crash report and the final
# statistics (exec/s) stay.
fuzz() { # fuzz NAME RUNS MAX_LEN CORPUS_DIR SEED_DIRS...
  local name="$1" runs="$2" max_len="$3" corpus="$4" start rc=0
  shift 4
  mkdir -p "$corpus"
  start="$(date +%s)"
  "$BUILD/tests/fuzz/$name" -runs="$runs" -seed="$SEED" -max_len="$max_len" -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$BUILD/" "$corpus" "$@" 2>&1 |
    grep --line-buffered -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE)' || rc=$?
  echo "fuzz.sh: $name, $runs executions in $(( $(date +%s) - start )) s, exit $rc"
  return "$rc"
}
fuzz fuzz_api "$RUNS" 512 "$BUILD/fuzz-corpus" "$ROOT/tests/fuzz/corpus" "$ROOT/tests/fuzz/regressions" \
  > "$BUILD/fuzz_api.log" &
api=$!
paged_rc=0
fuzz fuzz_paged "$PAGED_RUNS" 256 "$BUILD/fuzz-corpus-paged" "$ROOT/tests/fuzz/corpus_paged" \
  > "$BUILD/fuzz_paged.log" || paged_rc=$?
api_rc=0
wait "$api" || api_rc=$?
cat "$BUILD/fuzz_api.log" "$BUILD/fuzz_paged.log"
[ "$api_rc" -eq 0 ] && [ "$paged_rc" -eq 0 ]
