#!/usr/bin/env bash
# device_run.sh - what one call on the GPU machine runs, in order: the GPU tests, the four
# compute-sanitizer tools over the GPU suite, then the side-by-side benchmark. Expects the
# artifacts that bench/prepare_device.sh put in .carry/. Logs go to $OUT.
# Usage: bash bench/device_run.sh [tests|python|sanitize|sass|bench|all] [extra args for compare_sdpa.py]
set -u
what=${1:-all}; shift || true
OUT=${OUT:-/tmp/fa_out}; mkdir -p "$OUT"
export FLASHATTN_LIBRARY=$PWD/.carry/libflashattn.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
if [[ $what == all || $what == tests ]]; then
  echo "== GPU tests"
  (cd .carry && ./flashattn_gpu_tests --durations yes) > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$?"; grep -E "test cases|assertions|FAILED|failed" "$OUT/gpu_tests.log" | tail -15
fi
if [[ $what == all || $what == python ]]; then
  echo "== PyTorch binding: gradients and a training step vs fp64 (pytest)"
  python3 -m pytest -q tests/python > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$?: $(tail -1 "$OUT/pytest.log")"
  echo "== CLI on the GPU"
  .carry/flashattn_bench --backend cuda --seqlen 2048 --heads 16 --head-dim 128 --causal --check \
    > "$OUT/cli.log" 2>&1; echo "cli rc=$?"; grep -E "plan|throughput|check" "$OUT/cli.log"
fi
if [[ $what == all || $what == sanitize ]]; then
  # The four tools over the whole GPU suite (FA_SANITIZE_FILTER narrows it, e.g. "[sanitize]"),
  # side by side on the one GPU: the suite's time is mostly the host's fp64 oracle.
  echo "== compute-sanitizer: memcheck, racecheck, initcheck, synccheck over ${FA_SANITIZE_FILTER:-the whole suite}"
  limit=${FA_SANITIZE_SECONDS:-480}
  for tool in memcheck racecheck initcheck synccheck; do
    extra=(); [[ $tool == memcheck ]] && extra=(--leak-check full)
    timeout "$limit" compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 9 \
      .carry/flashattn_gpu_tests ${FA_SANITIZE_FILTER:+"$FA_SANITIZE_FILTER"} > "$OUT/sanitize_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck initcheck synccheck; do
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test cases|assertions' "$OUT/sanitize_$tool.log" | tail -3 | tr '\n' ' ')"
  done
fi
if [[ $what == all || $what == sass ]]; then
  echo "== machine-code facts per forward kernel"
  bash bench/sass_facts.sh .carry/libflashattn.so | tee "$OUT/sass_facts.md"
fi
if [[ $what == all || $what == bench ]]; then
  echo "== benchmark vs torch SDPA (FA2, cuDNN)"
  python3 bench/compare_sdpa.py --json "$OUT/bench.json" "$@" > "$OUT/bench.txt" 2>&1
  cat "$OUT/bench.txt"
fi
