# ncu_kernel.sh - sourced by bench/ncu_stalls.sh and bench/ncu_source.sh: sets `kernel`, the
# --kernel-name filter for the launch of bench/profile_one.py that their arguments ("$@")
# ask for. Ours: the dK/dV kernel with --backward, else a forward of either family
# (fa_cuda_fwd_d*, fa_cuda_ws_d*); with --fa2 FlashAttention-2's; with --cudnn cuDNN's (a
# forward whose name says sdpa, fmha or flash, a backward named bprop: its generated
# names vary).
kernel='regex:_dkdv'
[[ " $* " == *" --backward "* ]] || kernel='regex:fa_cuda_(fwd|ws)_d'
[[ " $* " == *" --fa2 "* ]] && kernel='regex:flash_bwd_dq_dk_dv|flash_fwd_kernel'
[[ " $* " == *" --fa2 "* && " $* " != *" --backward "* ]] && kernel='regex:flash_fwd_kernel'
[[ " $* " == *" --cudnn "* ]] && kernel='regex:sdpa|fmha|flash|Sdpa|Fmha|Flash'
[[ " $* " == *" --cudnn "* && " $* " == *" --backward "* ]] && kernel='regex:bprop'
true # the last test leaves status 1 where it does not apply; `source` under set -e would stop
