// cuda_combine.cu - instantiates the common split-KV combine kernel for nvcc.
#include "fa_device.h"
#include "gpu_kernels/attn_combine.h"
