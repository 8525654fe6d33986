// cuda_combine.cu - instantiates the common split-KV combine kernel for nvcc.
#define FA_KERNEL_PREFIX fa_cuda_
#include "fa_device.h"
#include "gpu_kernels/attn_combine.h"
