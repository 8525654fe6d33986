/*
 * runtime_table.cpp - a vendor's runtime table (gpu_runtime.h), written once over its
 * runtime vocabulary fa_runtime.h (src/cuda or src/hip, found by the include path, as
 * the kernels find fa_device.h). Compiled by each vendor's compiler as host code; each
 * entry is one runtime call or two.
 */
#include "fa_runtime.h"

extern "C" const void *const FA_RT_HANDLE(combine), *const FA_RT_HANDLE(bwd_preprocess),
    *const FA_RT_HANDLE(bwd_convert_dq), *const FA_RT_HANDLE(kv_append), *const FA_RT_HANDLE(seq_check),
    *const FA_RT_HANDLE(seq_check_pages);

static FA_RT(Stream_t) as_stream(void *stream) { return (FA_RT(Stream_t))stream; }

static int rt_device_count(int *count) { return FA_RT(GetDeviceCount)(count); }

static int rt_properties(int device, fa_gpu_properties *out)
{
    fa_rt_device_prop prop;
    FA_RT(Error_t) err = FA_RT(GetDeviceProperties)(&prop, device);
    if (err != FA_RT(Success))
        return err;
    snprintf(out->device_name, sizeof out->device_name, "%s", prop.name);
    out->wave_size = prop.warpSize;
    out->max_threads_per_block = prop.maxThreadsPerBlock;
    out->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
    out->sm_count = prop.multiProcessorCount;
    fa_rt_vendor_props(&prop, out);
    return FA_RT(Success);
}

/* Only when another device is current: every call selects its device, and a call inside a
 * graph capture should make no runtime call it does not need. */
static int rt_set_device(int device)
{
    int current = -1;
    if (FA_RT(GetDevice)(&current) == FA_RT(Success) && current == device)
        return FA_RT(Success);
    return FA_RT(SetDevice)(device);
}

static int rt_stream_sync(void *stream) { return FA_RT(StreamSynchronize)(as_stream(stream)); }

static int rt_host_alloc_mapped(void **host, void **device, size_t bytes)
{
    FA_RT(Error_t) err = fa_rt_host_alloc_mapped(host, bytes);
    if (err != FA_RT(Success))
        return err;
    err = FA_RT(HostGetDevicePointer)(device, *host, 0);
    if (err != FA_RT(Success))
        (void)fa_rt_host_free(*host);
    return err;
}

static void rt_host_free(void *host) { (void)fa_rt_host_free(host); }

static int rt_stream_capturing(void *stream, int *active)
{
    FA_RT(StreamCaptureStatus) status = FA_RT(StreamCaptureStatusNone);
    FA_RT(Error_t) err = FA_RT(StreamIsCapturing)(as_stream(stream), &status);
    *active = status != FA_RT(StreamCaptureStatusNone);
    return err;
}

static int rt_launch(const void *kernel, fa_grid grid, unsigned threads, void **args, size_t smem_bytes,
                     void *stream, int overlap)
{
    if (overlap)
        return fa_rt_launch_overlapping(kernel, dim3(grid.x, grid.y, grid.z), dim3(threads), args, smem_bytes,
                                        as_stream(stream));
    return FA_RT(LaunchKernel)(kernel, dim3(grid.x, grid.y, grid.z), dim3(threads), args, smem_bytes,
                               as_stream(stream));
}

static int rt_zero(void *ptr, size_t bytes, void *stream)
{
    return FA_RT(MemsetAsync)(ptr, 0, bytes, as_stream(stream));
}

static const char *rt_error_text(int error) { return FA_RT(GetErrorString)((FA_RT(Error_t))error); }

extern "C" const fa_gpu_runtime FA_RT_TABLE = {
    FA_RT_NAME, FA_RT_DEVICE_KIND, FA_RT_BACKEND, FA_RT_VENDOR, FA_RT_BUILT_TARGETS, FA_RT_TARGETS_OPTION,
    rt_device_count, rt_properties, rt_set_device, fa_rt_alloc, fa_rt_release,
    rt_stream_sync, fa_rt_prepare_kernel, rt_launch, rt_error_text,
    &FA_RT_HANDLE(combine), &FA_RT_HANDLE(bwd_preprocess), &FA_RT_HANDLE(bwd_convert_dq),
    &FA_RT_HANDLE(kv_append),
    rt_host_alloc_mapped, rt_host_free, rt_stream_capturing,
    &FA_RT_HANDLE(seq_check), &FA_RT_HANDLE(seq_check_pages),
    FA_RT_ENCODE_MAPS, rt_zero,
};
