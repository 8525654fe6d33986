#!/usr/bin/env bash
# ptxas_check.sh BUILD_DIR - compiles every warpgroup unit the instance lists declare
# (ws_instances.txt: forward; bws_instances.txt: backward) from BUILD_DIR/generated/cuda
# for sm_90a with ptxas's report, and fails if any spills or has its wgmma serialised
# (ptxas's "Potential Performance Loss" advisories C7514 / C7515 and the like: a path
# the compiler cannot rule out touches an accumulator before the wait for its product,
# and then it waits after every wgmma of the kernel; one such build lost 20-25%,
# bench/NOTES.md issue 13 ws12), and, in the d128 and d256 forward units' machine code, that
# the loop waits for P·V after the softmax's exponentials, and in the d128 backward units'
# that dQ is staged while dK runs (bench/sass_waits.py). Runs
# the units in parallel (nproc). Needs nvcc, and fetches nvdisasm once (bench/sass_local.sh).
set -euo pipefail
build=${1:?usage: ptxas_check.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
units=() # fa_cuda_<family>_d<D>_<dtype>_<M>x<N>x<stages>, as the build generates them
for family in ws bws; do
    list=$root/src/common/select/${family}_instances.txt
    [[ -f $list ]] || { echo "no $list"; exit 1; }
    while read -r vendor d m n _ stages _ dtypes; do
        for t in ${dtypes//,/ }; do units+=("fa_cuda_${family}_d${d}_${t}_${m}x${n}x${stages}"); done
    done < <(grep -v '^#' "$list" | awk 'NF >= 8 && $1 == "cuda"')
done
check() {
    local unit=$1 src="$build/generated/cuda/$1.cu" report
    [[ -f $src ]] || { echo "$unit: no $src"; return 1; }
    if ! report=$(nvcc -x cu -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -Xptxas=-v -std=c++14 \
        -I"$root/include" -I"$root/src/common" -I"$root/src/cuda" -DFA_HAVE_CUDA=1 "$src" -cubin -o "$cubins/$unit.cubin" 2>&1) ||
        ! grep -q 'Used [0-9]* registers' <<< "$report"; then
        echo "$unit: nvcc failed or reported no kernel"
        printf '%s\n' "$report"
        return 1
    fi
    local spills advisories
    spills=$(grep -o '[0-9]* bytes spill stores' <<< "$report" | awk '{s += $1} END {print s + 0}')
    advisories=$(grep -c 'Potential Performance Loss' <<< "$report" || true)
    echo "$unit: spill stores $spills bytes, serialisation advisories $advisories"
    if [[ $spills != 0 || $advisories != 0 ]]; then
        grep -E 'spill stores|Potential Performance Loss' <<< "$report"
        return 1
    fi
}
export -f check
cubins=$(mktemp -d) # each unit's machine code, kept for the SASS check below
trap 'rm -rf "$cubins"' EXIT
export build root cubins
printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -I{} bash -c 'check {}' && echo "ptxas_check: all ${#units[@]} units clean"
# Where the loops wait (bench/sass_waits.py), in the machine code of the units matching a pattern:
# the d128 and d256 forward units' P·V runs under the softmax (attn_fwd_ws.h), and the d128
# backward units' dK under the dQ staging (attn_bwd_ws.h, FA_BWS_DQ_BEFORE_DK).
check_waits() { # check_waits pv|dq UNIT_PATTERN
    local unit sass=()
    for unit in "${units[@]}"; do
        [[ $unit =~ $2 ]] || continue
        bash "$root/bench/sass_local.sh" "$cubins/$unit.cubin" "/tmp/$unit.sass" > /dev/null
        sass+=("/tmp/$unit.sass")
    done
    python3 "$root/bench/sass_waits.py" "$1" "${sass[@]}"
}
check_waits pv '^fa_cuda_ws_d(128|256)_'
check_waits dq '^fa_cuda_bws_d128_'
