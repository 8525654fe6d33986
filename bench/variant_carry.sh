#!/usr/bin/env bash
# variant_carry.sh NAME=PATCH[+PATCH...] ... - builds HEAD's library and, for each NAME, the
# library and the GPU test binary with those bench/patches applied to HEAD's src/, then
# packs them into .carry/carry.txz (git-ignored) for bench/ab_call.sh on the GPU machine:
# lib_main.so, lib_NAME.so and flashattn_gpu_tests_NAME, stripped (bench/carry.sh: what the
# builds share is stored once, ~2 MiB a build).
# Each variant's patches are taken back (git apply -R, last first) once it is built, also
# when its build fails; uncommitted changes under src/ are refused, since they would leak
# into every build. A fresh checkout's first build takes ~7 minutes
# (bench/carry.sh's configuration), each variant 1-2 more.
#   bash bench/variant_carry.sh b19d64=issue14_b19d64_ds_stmatrix_d64.patch \
#        b20=issue14_b19d64_ds_stmatrix_d64.patch+issue14_b20_dq_staged_under_dk.patch
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -z $(git status --porcelain src) ]] || { echo "variant_carry: src/ has uncommitted changes"; exit 1; }
build=build-device stage=$build/variant-stage
source bench/carry.sh
carry_configure
rm -rf "$stage" && mkdir -p "$stage"
applied=() # this variant's patches, in the order applied
take_back() {
    local i
    for ((i = ${#applied[@]} - 1; i >= 0; i--)); do git apply -R "bench/patches/${applied[i]}"; done
    applied=()
}
trap take_back EXIT
keep() { # keep NAME WITH_TESTS
    ninja -C $build flashattn_shared flashattn_gpu_tests > "$stage/build_$1.log" 2>&1 ||
        { tail -20 "$stage/build_$1.log"; exit 1; }
    cp $build/libflashattn.so.0.1.0 "$stage/lib_$1.so"
    [[ $2 == 1 ]] && cp $build/tests/flashattn_gpu_tests "$stage/flashattn_gpu_tests_$1"
    return 0
}
keep main 0
for spec in "$@"; do
    name=${spec%%=*} patches=${spec#*=}
    for p in ${patches//+/ }; do
        git apply "bench/patches/$p" # a patch that does not apply stops the script here
        applied+=("$p")
    done
    keep "$name" 1
    take_back
    echo "variant_carry: $name built ($patches)"
done
rm -f "$stage"/build_*.log
strip "$stage"/*
carry_pack "$stage"
