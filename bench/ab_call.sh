#!/usr/bin/env bash
# ab_call.sh - one GPU-machine call over the .carry/carry.txz that bench/variant_carry.sh
# packed, in this order, each part only when its variable is set, logs under $OUT:
#   AB_LIBS="main b20 ..."   libraries timed side by side with SDPA FLASH and cuDNN
#                            (compare_sdpa.py), alternated AB_REPS times (3), with
#                            AB_BWD_ARGS (backward; e.g. "--dims 64,128 --seqlens 2048,8192
#                            --causal 0,1") and/or AB_FWD_ARGS (forward) -> times.txt
#   AB_TEST_BIN=NAME         flashattn_gpu_tests_NAME over AB_TESTS, Catch2 filters separated
#                            by ';', one process each, in parallel, AB_TEST_SECONDS (270) at
#                            most (a deadlock shows as rc 124) -> tNAME_<k>.log
#   AB_NCU="ARGS;ARGS"       bench/ncu_stalls.sh on main's library per ARGS (add --cudnn for
#                            cuDNN's kernel) -> log.txt; AB_NCU_SOURCE="ARGS" adds
#                            ncu_source.sh's per-instruction page -> ncu_src.csv.xz
# log.txt has each part's rc and the seconds it ended at.
#   AB_LIBS="main b20" AB_BWD_ARGS="..." AB_TEST_BIN=b20 AB_TESTS="cuda backward: sm_90*" bash bench/ab_call.sh
set -u
OUT=${OUT:-/tmp/fa_out}; mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 1
source bench/carry.sh
carry_unpack
export PYTHONUNBUFFERED=1
log() { echo "$SECONDS s: $*" >> "$OUT/log.txt"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >> "$OUT/log.txt"

for rep in $(seq "${AB_REPS:-3}"); do
    for lib in ${AB_LIBS:-}; do
        for dir in bwd fwd; do
            args=${AB_BWD_ARGS:-}; extra="--backward --no-forward"
            [[ $dir == fwd ]] && args=${AB_FWD_ARGS:-} extra=""
            [[ -n $args ]] || continue
            echo "=== $dir $lib rep $rep" >> "$OUT/times.txt"
            # shellcheck disable=SC2086
            FLASHATTN_LIBRARY=$PWD/.carry/lib_$lib.so timeout 120 python3 bench/compare_sdpa.py $extra $args \
                >> "$OUT/times.txt" 2>&1
            log "$dir $lib rep $rep rc=$?"
        done
    done
done

if [[ -n ${AB_TEST_BIN:-} ]]; then
    k=0
    IFS=';' read -r -a filters <<< "${AB_TESTS:-}"
    for filter in "${filters[@]}"; do
        k=$((k + 1))
        (cd .carry && timeout "${AB_TEST_SECONDS:-270}" "./flashattn_gpu_tests_$AB_TEST_BIN" "$filter" -d yes \
            > "$OUT/t${AB_TEST_BIN}_$k.log" 2>&1; echo "rc=$?" >> "$OUT/t${AB_TEST_BIN}_$k.log") &
    done
    wait
    for f in "$OUT"/t"${AB_TEST_BIN}"_*.log; do
        log "$(basename "$f"): $(grep -E 'rc=|test cases|FAILED' "$f" | tail -3 | tr '\n' ' ')"
    done
fi

export FLASHATTN_LIBRARY=$PWD/.carry/lib_main.so
IFS=';' read -r -a ncu_runs <<< "${AB_NCU:-}"
for args in "${ncu_runs[@]}"; do
    # shellcheck disable=SC2086
    { echo "== ncu_stalls $args"; timeout 150 bash bench/ncu_stalls.sh $args 2>&1 | tail -3; } >> "$OUT/log.txt"
    log "ncu_stalls $args done"
done
if [[ -n ${AB_NCU_SOURCE:-} ]]; then
    # shellcheck disable=SC2086
    timeout 200 bash bench/ncu_source.sh "$OUT/ncu_src.csv" $AB_NCU_SOURCE >> "$OUT/log.txt" 2>&1
    log "ncu_source $AB_NCU_SOURCE rc=$?"
fi
tail -30 "$OUT/log.txt"
