export FLASHATTN_LIBRARY=$PWD/.carry/libflashattn.so PYTHONUNBUFFERED=1
run() { echo "== d$1 tile $2"; FLASHATTN_FORCE_TILE=$2 python3 bench/compare_sdpa.py --dims $1 --seqlens 2048,8192 --dtypes bf16 2>&1 | tail -4; }
run 64 128x64:2; run 64 128x128:2
run 128 128x64:2; run 128 128x128:2
run 256 128x64:1; run 256 128x64:2; run 256 64x64:1
run 192 128x64:1; run 192 128x64:2
run 96 128x64:2; run 32 128x128:2
