// cuda_bwd_prep.cu - instantiates the common backward preprocess kernel for nvcc.
#define FA_KERNEL_PREFIX fa_cuda_
#include "fa_device.h"
#include "gpu_kernels/attn_bwd_prep.h"
