// cuda_combine.cu - instantiates the common split-KV combine kernel for nvcc.
#include "fa_device.h"
#include "attn_combine.h"
