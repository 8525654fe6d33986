#!/usr/bin/env bash
# ncu_source.sh OUT.csv ARGS... - ncu's source page of one kernel launch of
# bench/profile_one.py (ARGS go to it): per SASS instruction the warp-state samples and
# their stall reasons, and how often it ran (the SourceCounters and WarpStateStats
# sections), as CSV, xz-compressed to OUT.csv.xz; bench/ncu_regions.py reads it. The kernel
# is bench/ncu_kernel.sh's pick (ours, or --fa2 / --cudnn); the fourth launch, after the
# warm-up calls.
#   FLASHATTN_LIBRARY=<lib> bash bench/ncu_source.sh /tmp/fwd.csv --dim 128 --seqlen 2048
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: ncu_source.sh OUT.csv ARGS...}; shift
source bench/ncu_kernel.sh
report=$(mktemp -d)/source
ncu --kernel-name "$kernel" --launch-skip 3 --launch-count 1 --section SourceCounters --section WarpStateStats \
    -o "$report" -f python3 bench/profile_one.py "$@" > /dev/null
ncu -i "$report.ncu-rep" --page source --csv --print-source sass > "$out"
rm -rf "$(dirname "$report")"
xz -f "$out"
echo "$out.xz: $(xz -dc "$out.xz" | wc -l) lines"
