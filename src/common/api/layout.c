/*
 * layout.c - fa_struct_size: the sizes of the public structs as this library was
 * compiled, so a binding that mirrors them (ctypes, FFI) can tell at load time whether
 * its copy still matches the header the library was built from.
 */
#include "api/export.h"
#include "flashattn.h"

FA_EXPORT size_t fa_struct_size(fa_struct_id which)
{
    switch (which) {
    case FA_STRUCT_TENSOR: return sizeof(fa_tensor);
    case FA_STRUCT_PARAMS: return sizeof(fa_params);
    case FA_STRUCT_PLAN: return sizeof(fa_plan);
    case FA_STRUCT_DEVICE_INFO: return sizeof(fa_device_info);
    case FA_STRUCT_KVCACHE_PARAMS: return sizeof(fa_kvcache_params);
    case FA_STRUCT_COUNT: break;
    }
    return 0;
}
