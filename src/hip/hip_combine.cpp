// hip_combine.cpp - instantiates the common split-KV combine kernel for HIP.
#define FA_KERNEL_PREFIX fa_hip_
#include "fa_device.h"
#include "gpu_kernels/attn_combine.h"
