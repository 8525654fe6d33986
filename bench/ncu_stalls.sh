#!/usr/bin/env bash
# ncu_stalls.sh ARGS... - issue-stall breakdown, occupancy, issue and tensor-pipe activity of
# one kernel launch of bench/profile_one.py (ARGS go to it); the kernel is ours, FA2's
# (--fa2) or cuDNN's (--cudnn), as bench/ncu_kernel.sh picks it. Compare them side by side
# to see where a kernel waits.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/ncu_kernel.sh
ncu --kernel-name "$kernel" --launch-skip 3 --launch-count 1 --csv --page raw \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,gpu__time_duration.sum,launch__grid_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem \
    python3 bench/profile_one.py "$@" 2>/dev/null |
    python3 -c '
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith("\""))]
head, units, vals = rows[0], rows[1], rows[2]
keep = ("smsp__average_warps_issue_stalled_", "smsp__issue_active.avg", "sm__warps_active.avg",
        "sm__pipe_tensor_op_hmma_cycles_active.avg", "launch__registers_per_thread", "smsp__inst_executed.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "gpu__time_duration.sum", "launch__grid_size",
        "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem")
pairs = [(h.replace("smsp__average_warps_issue_stalled_", "stall_").replace("_per_issue_active.ratio", ""), v)
         for h, v in zip(head, vals) if h.startswith(keep)]
pairs = [(h, v) for h, v in pairs if not h.startswith("stall_") or float(v.replace(",", "") or 0) >= 0.05]
print(vals[head.index("Kernel Name")][:60])
print("  " + "  ".join(f"{h}={v}" for h, v in pairs))
'
