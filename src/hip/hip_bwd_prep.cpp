// hip_bwd_prep.cpp - instantiates the common backward preprocess kernel for HIP.
#include "fa_device.h"
#include "gpu_kernels/attn_bwd_prep.h"
