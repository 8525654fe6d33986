#!/usr/bin/env bash
# device_run.sh - what one call on the GPU machine runs, in order: the GPU tests, the four
# compute-sanitizer tools over the GPU suite, then the side-by-side benchmark. Expects the
# artifacts that bench/prepare_device.sh put in .carry/. Logs go to $OUT.
# Usage: bash bench/device_run.sh [tests|python|sanitize|sass|bench|decode|sweep|hopper|warpgroup|backward|ring|all] [extra args for compare_sdpa.py]
# sweep (not part of all): issue 17's presets, flashattn_bench and bench/sweep_torch.py.
# warpgroup (not part of all): issue 13's forward tests with a time limit, sanitizers over
# the warpgroup tests, and the side-by-side table. backward (not part of all): issue 14's,
# the same for the warpgroup backward, with the Llama training step. ring (not part of
# all): issue 18's NCCL ring on every visible GPU (run it on nvidia-h200-x2 or larger).
# hopper (not part of all): issue 13's sm_90a primitive tests ([hopper]) with their output,
# then memcheck and racecheck over them.
# decode: issue 12's decode table with paged rows, then d64, MQA and s_q 4 (compare_decode.py),
# the table again cold (--cold),
# the kernels of a b 1 and a b 16 call inside graph replays (graph_timeline.py), and
# memcheck over the decode, paged, kvcache, graph, device-check and combine tests.
set -u
what=${1:-all}; shift || true
OUT=${OUT:-/tmp/fa_out}; mkdir -p "$OUT"
source bench/carry.sh # run from the repository root, as the carry is
carry_unpack
export FLASHATTN_LIBRARY=$PWD/.carry/libflashattn.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
if [[ $what == hopper ]]; then
  echo "== Hopper primitives (src/cuda/fa_hopper.h)"
  (cd .carry && ./flashattn_gpu_tests "[hopper]" --durations yes) 2>&1 | tee "$OUT/hopper.log" | tail -40
  for tool in memcheck racecheck; do
    (cd .carry && timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 ./flashattn_gpu_tests "[hopper]") \
      > "$OUT/hopper_$tool.log" 2>&1
    echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/hopper_$tool.log" | tail -1)"
  done
fi
if [[ $what == warpgroup ]]; then
  # issue 13: the warpgroup forward's tests under a time limit (a barrier or setmaxnreg
  # deadlock shows as rc 124), one sanitizer pass each, then the side-by-side table.
  echo "== warpgroup forward (attn_fwd_ws.h): tests, with the sanitizers beside them"
  # Side by side: the time is the host's fp64 oracle (16 cores), not the GPU. The
  # sanitizers take the two warpgroup cases that end in a kernel launch of their own
  # shapes (the forced-tile sweep runs the same kernels on smaller ones).
  (cd .carry && timeout 360 ./flashattn_gpu_tests "cuda forward*,cuda empty*,cuda plan*,cuda decode*,cuda warpgroup*" \
     --durations yes > "$OUT/warpgroup_tests.log" 2>&1; echo $? > "$OUT/warpgroup_tests.rc") &
  for tool in memcheck synccheck racecheck; do
    (cd .carry && timeout 420 compute-sanitizer --tool $tool --error-exitcode 9 ./flashattn_gpu_tests \
       "cuda warpgroup: the plan*,cuda warpgroup: more query tiles*" > "$OUT/warpgroup_$tool.log" 2>&1;
     echo $? > "$OUT/warpgroup_$tool.rc") &
  done
  wait
  echo "tests rc=$(cat "$OUT/warpgroup_tests.rc")"; grep -E "test cases|assertions|FAILED" "$OUT/warpgroup_tests.log" | tail -8
  for tool in memcheck synccheck racecheck; do
    echo "$tool rc=$(cat "$OUT/warpgroup_$tool.rc"): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test cases' "$OUT/warpgroup_$tool.log" | tail -2 | tr '\n' ' ')"
  done
  echo "== benchmark vs torch SDPA (FA2, cuDNN)"
  timeout 200 python3 bench/compare_sdpa.py --json "$OUT/bench.json" "$@" > "$OUT/bench.txt" 2>&1
  cat "$OUT/bench.txt"
fi
if [[ $what == backward ]]; then
  # issue 14: the warpgroup backward's own tests under a time limit (a barrier deadlock
  # shows as rc 124), the side-by-side backward table (extra args go to compare_sdpa.py),
  # the Llama training step (bench/llama_step.py), memcheck, racecheck and synccheck with
  # only the warpgroup backward's kernels instrumented (the time is the host's oracle),
  # then the whole backward suite (FA_BWD_SUITE_SECONDS at most). FA_BWD_OTHER_LIB, when set, is another
  # build's library timed on the same rows first (a version before). FA_BWD_PARTS picks
  # among "tests bench llama sanitize suite" (default: all; one call has 600 s).
  parts=" ${FA_BWD_PARTS:-tests bench llama sanitize suite} "
  if [[ $parts == *" tests "* ]]; then
    echo "== warpgroup backward (attn_bwd_ws.h): its tests"
    (cd .carry && timeout 240 ./flashattn_gpu_tests "cuda backward: sm_90*" --durations yes) > "$OUT/bws_tests.log" 2>&1
    echo "bws tests rc=$?"; grep -E "test cases|assertions|FAILED|with expansion|^[0-9.]+ s:" "$OUT/bws_tests.log" | head -12
  fi
  if [[ $parts == *" bench "* ]]; then
    echo "== backward vs torch SDPA (FA2, cuDNN)"
    if [[ -n ${FA_BWD_OTHER_LIB:-} ]]; then
      FLASHATTN_LIBRARY=$PWD/$FA_BWD_OTHER_LIB timeout 90 python3 bench/compare_sdpa.py --backward --no-forward \
        --dims 64,128 --dtypes bf16 --seqlens 2048,8192 > "$OUT/bench_other.txt" 2>&1
      echo "other library rc=$?"; tail -9 "$OUT/bench_other.txt"
    fi
    timeout 200 python3 bench/compare_sdpa.py --backward --no-forward --json "$OUT/bench.json" "$@" > "$OUT/bench.txt" 2>&1
    echo "bench rc=$?"; cat "$OUT/bench.txt"
  fi
  if [[ $parts == *" llama "* ]]; then
    echo "== Llama training step (bench/llama_step.py)"
    timeout 150 python3 bench/llama_step.py > "$OUT/llama_step.txt" 2>&1; echo "llama rc=$?"; tail -6 "$OUT/llama_step.txt"
  fi
  if [[ $parts == *" sanitize "* ]]; then
    for tool in memcheck racecheck synccheck; do
      (cd .carry && timeout 200 compute-sanitizer --tool $tool --kernel-name kns=bws --error-exitcode 9 \
         ./flashattn_gpu_tests "cuda backward: sm_90 runs*" > "$OUT/bws_$tool.log" 2>&1; echo $? > "$OUT/bws_$tool.rc") &
    done
    wait
    for tool in memcheck racecheck synccheck; do
      echo "$tool rc=$(cat "$OUT/bws_$tool.rc"): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test cases' "$OUT/bws_$tool.log" | tail -2 | tr '\n' ' ')"
    done
  fi
  if [[ $parts == *" suite "* ]]; then
    (cd .carry && timeout "${FA_BWD_SUITE_SECONDS:-200}" ./flashattn_gpu_tests "[backward]" --durations yes) > "$OUT/bwd_tests.log" 2>&1
    echo "[backward] rc=$?"; grep -E "test cases|assertions|FAILED|with expansion" "$OUT/bwd_tests.log" | head -8
  fi
fi
if [[ $what == ring ]]; then
  # issue 18: ring attention over NCCL, every visible GPU a rank of one process
  # (tests/ring/test_ring_nccl.cpp: each rank against one GPU's fa_fwd / fa_bwd and the
  # fp64 oracle), then its timing case (ring forward and backward against one GPU, and
  # the scaling efficiency) at 128k and 512k tokens. One GPU makes a ring of one rank.
  (cd .carry && timeout 300 ./flashattn_ring_nccl_tests --durations yes) > "$OUT/ring_tests.log" 2>&1
  echo "ring tests rc=$?"; grep -E "test cases|assertions|FAILED|with expansion" "$OUT/ring_tests.log" | head -8
  for tokens in 131072 524288; do
    (cd .carry && FA_RING_BENCH_TOKENS=$tokens timeout 240 ./flashattn_ring_nccl_tests "[.bench]") \
      > "$OUT/ring_bench_$tokens.log" 2>&1
    echo "ring timing at $tokens tokens rc=$?"; tail -6 "$OUT/ring_bench_$tokens.log"
  done
fi
if [[ $what == sweep ]]; then
  # issue 17: every preset by flashattn_bench, then the torch providers on the same shapes
  # (bench/sweep_torch.py); the JSON files are what bench/report.py merges.
  for p in smoke training decode paged; do
    .carry/flashattn_bench --sweep $p --out-json "$OUT/sweep_cuda_$p.json" --out-csv "$OUT/sweep_cuda_$p.csv" \
      2> "$OUT/sweep_cuda_$p.log"
    echo "flashattn_bench --sweep $p rc=$?: $(tail -1 "$OUT/sweep_cuda_$p.log")"
  done
  for p in training decode paged; do
    timeout 200 python3 bench/sweep_torch.py --preset $p --bench .carry/flashattn_bench \
      --out "$OUT/sweep_torch_$p.json" 2> "$OUT/sweep_torch_$p.log"
    echo "sweep_torch.py --preset $p rc=$?: $(tail -1 "$OUT/sweep_torch_$p.log")"
  done
fi
if [[ $what == all || $what == tests ]]; then
  echo "== GPU tests"
  (cd .carry && ./flashattn_gpu_tests --durations yes) > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$?"; grep -E "test cases|assertions|FAILED|failed" "$OUT/gpu_tests.log" | tail -15
fi
if [[ $what == all || $what == python ]]; then
  echo "== Python package (issue 16): the tests from the tree, then from a pip-installed copy"
  PYTHONPATH=tests python3 -m pytest -q -rs --durations 15 -p pytest_floor --min-passed 116 tests/python > "$OUT/pytest.log" 2>&1
  echo "pytest (tree) rc=$?: $(tail -1 "$OUT/pytest.log")"; head -5 "$OUT/pytest.log"
  site=$(mktemp -d)
  python3 -m pip install -q --no-build-isolation --no-index --no-deps --target "$site" ./python > "$OUT/pip.log" 2>&1
  echo "pip install rc=$?"; tail -3 "$OUT/pip.log"
  (cd /tmp && env -u FLASHATTN_LIBRARY FLASHATTN_TEST_INSTALLED=1 PYTHONPATH="$site:$OLDPWD/tests" \
     python3 -m pytest -q -p no:cacheprovider -p pytest_floor --rootdir "$OLDPWD/tests/python" --min-passed 116 \
     "$OLDPWD/tests/python") > "$OUT/pytest_installed.log" 2>&1
  echo "pytest (installed) rc=$?: $(tail -1 "$OUT/pytest_installed.log")"; sed -n 2,4p "$OUT/pytest_installed.log"
  python3 bench/python_overhead.py 2>&1 | tee "$OUT/python_overhead.txt"
  echo "== CLI on the GPU"
  .carry/flashattn_bench --backend cuda --seqlen 2048 --heads 16 --head-dim 128 --causal --check \
    > "$OUT/cli.log" 2>&1; echo "cli rc=$?"; grep -E "plan|throughput|check" "$OUT/cli.log"
fi
if [[ $what == all || $what == sanitize ]]; then
  # The four tools over the whole GPU suite, side by side on the one GPU (the suite's time
  # is mostly the host's fp64 oracle). racecheck, the slowest, runs in shards of the test
  # list: every other test in two shards, and the O(s)-memory tests (32k-128k keys, the
  # sizes that dwarf every other test under racecheck) in a third, so a shard that runs
  # out of time costs only its own tests. Logs: $OUT/sanitize/, packed as sanitize.tar.gz.
  limit=${FA_SANITIZE_SECONDS:-480}
  logs=$OUT/sanitize; mkdir -p "$logs"
  tests=.carry/flashattn_gpu_tests
  $tests --list-test-names-only | grep -v '^$' | sed 's/,/\\,/g' > "$logs/all.txt"
  grep -v 'extra device memory' "$logs/all.txt" | awk 'NR % 2 == 1' > "$logs/race_1.txt"
  grep -v 'extra device memory' "$logs/all.txt" | awk 'NR % 2 == 0' > "$logs/race_2.txt"
  grep 'extra device memory' "$logs/all.txt" > "$logs/race_3.txt"
  echo "== compute-sanitizer: memcheck, initcheck, synccheck over the suite; racecheck in 3 shards ($limit s each at most)"
  for tool in memcheck initcheck synccheck; do
    extra=(); [[ $tool == memcheck ]] && extra=(--leak-check full)
    timeout "$limit" compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 9 $tests \
      > "$logs/$tool.log" 2>&1 &
  done
  for shard in 1 2 3; do
    timeout "$limit" compute-sanitizer --tool racecheck --error-exitcode 9 $tests -f "$logs/race_$shard.txt" \
      > "$logs/racecheck_$shard.log" 2>&1 &
  done
  wait
  for log in "$logs"/*.log; do
    echo "$(basename "$log" .log): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test cases|assertions|SIGTERM' "$log" | tail -3 | tr '\n' ' ')"
  done
  tar -czf "$OUT/sanitize.tar.gz" -C "$OUT" sanitize && rm -rf "$logs"
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
if [[ $what == all || $what == decode ]]; then
  echo "== decode vs torch SDPA (FA2, cuDNN), paged rows P 16 and 256"
  python3 bench/compare_decode.py --pages 16,256 --json "$OUT/decode.json" > "$OUT/decode.txt" 2>&1
  python3 bench/compare_decode.py --dims 64 --rows 1x8192,16x8192,64x16384 >> "$OUT/decode.txt" 2>&1
  python3 bench/compare_decode.py --kv-heads 1 --rows 1x8192,16x8192,64x16384 >> "$OUT/decode.txt" 2>&1
  python3 bench/compare_decode.py --sq 4 --rows 1x8192,16x8192,64x16384 >> "$OUT/decode.txt" 2>&1
  echo "== the same rows cold (K/V not in L2 at any timed call: a server's step)" >> "$OUT/decode.txt"
  python3 bench/compare_decode.py --cold --pages 16,256 --json "$OUT/decode_cold.json" >> "$OUT/decode.txt" 2>&1
  python3 bench/compare_decode.py --cold --dims 64 --rows 1x8192,16x8192 >> "$OUT/decode.txt" 2>&1
  python3 bench/compare_decode.py --cold --kv-heads 1 --rows 1x8192,16x8192 >> "$OUT/decode.txt" 2>&1
  cat "$OUT/decode.txt"
  echo "== where a call's time goes inside a graph (b 1 and b 16 x 8192)"
  python3 bench/graph_timeline.py --rows 1x8192,16x8192 2>&1 | grep -v -i warn | tee "$OUT/timeline.txt"
  echo "== memcheck over the issue-12 tests"
  compute-sanitizer --tool memcheck --error-exitcode 9 .carry/flashattn_gpu_tests \
    "[decode],[paged],[kvcache],[graph],[device_check],[combine]" > "$OUT/decode_memcheck.log" 2>&1
  echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|test cases' "$OUT/decode_memcheck.log" | tail -2 | tr '\n' ' ')"
fi
