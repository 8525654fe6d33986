export FLASHATTN_LIBRARY=$PWD/.carry/libflashattn.so PYTHONUNBUFFERED=1
for d in 128 64; do
 for tile in 128x64:2 64x64:2 128x128:1; do
  echo "== d$d tile $tile"
  FLASHATTN_FORCE_TILE=$tile python3 bench/compare_sdpa.py --dims $d --seqlens 4096,16384 --dtypes bf16 2>&1 | tail -4
 done
done
echo "== d256"; python3 bench/compare_sdpa.py --dims 256 --seqlens 4096 --dtypes bf16 --causal 0 | tail -1
for d in 128 256; do
ncu --kernel-name regex:fa_fwd_d --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats python3 bench/profile_one.py --dim $d --seqlen 4096 > $OUT/ncu_d$d.txt 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Bank|bank" $OUT/ncu_d$d.txt | head -30
done
cuobjdump -sass .carry/libflashattn.so > $OUT/sass.txt 2>&1; ls -la $OUT/sass.txt
