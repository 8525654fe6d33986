export FLASHATTN_LIBRARY=$PWD/.carry/libflashattn.so PYTHONUNBUFFERED=1
(cd .carry && timeout 300 ./flashattn_gpu_tests "[backward]" --durations yes) > $OUT/bwd_tests.log 2>&1; echo "bwd tests rc=$?"
grep -E "test cases|assertions|FAILED" $OUT/bwd_tests.log | head -10
python3 bench/compare_sdpa.py --backward --no-forward --dims 64,128,256 --seqlens 4096,16384 --dtypes bf16 2>&1 | tee $OUT/bench_bwd.txt
ncu --kernel-name regex:_dkdv --launch-skip 3 --launch-count 1 --metrics smsp__inst_executed.sum,gpu__time_duration.sum,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active python3 bench/profile_one.py --dim 128 --seqlen 4096 --backward 2>&1 | grep -E "^    [a-z]" 
