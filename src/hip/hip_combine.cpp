// hip_combine.cpp - instantiates the common split-KV combine kernel for HIP.
#include "fa_device.h"
#include "gpu_kernels/attn_combine.h"
