// hip_combine.cpp - instantiates the common split-KV combine kernel for HIP.
#include "fa_device.h"
#include "attn_combine.h"
