// hip_bwd_prep.cpp - instantiates the common backward preprocess kernel for HIP.
#define FA_KERNEL_PREFIX fa_hip_
#include "fa_device.h"
#include "gpu_kernels/attn_bwd_prep.h"
