// hip_bwd_prep.cpp - instantiates the common backward preprocess kernel for HIP.
#include "fa_device.h"
#include "attn_bwd_prep.h"
