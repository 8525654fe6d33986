// device_tensors.hpp - GPU test support: device mirrors of the oracle's host tensors
// (same storage bytes, poison included, same strides), device arrays, and a CUDA
// context that fails the test when it cannot be created.
#ifndef FA_TEST_DEVICE_TENSORS_HPP
#define FA_TEST_DEVICE_TENSORS_HPP

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "flashattn.h"
#include "oracle.hpp"

using fa_oracle::HostTensor;

struct DeviceBuffer {
    void *ptr = nullptr;
    explicit DeviceBuffer(size_t bytes) { REQUIRE(cudaMalloc(&ptr, bytes ? bytes : 1) == cudaSuccess); }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

// A device mirror of a host tensor: same storage bytes (poison included), same strides.
struct DeviceTensor {
    HostTensor *host;
    std::unique_ptr<DeviceBuffer> buf;
    fa_tensor view;
    explicit DeviceTensor(HostTensor &h) : host(&h), buf(new DeviceBuffer(h.storage.size()))
    {
        REQUIRE(cudaMemcpy(buf->ptr, h.storage.data(), h.storage.size(), cudaMemcpyHostToDevice) ==
                cudaSuccess);
        view = h.view;
        view.data = static_cast<unsigned char *>(buf->ptr) +
                    (static_cast<unsigned char *>(h.view.data) - h.storage.data());
    }
    void copy_back()
    {
        REQUIRE(cudaMemcpy(host->storage.data(), buf->ptr, host->storage.size(), cudaMemcpyDeviceToHost) ==
                cudaSuccess);
    }
};

template <typename T> struct DeviceArray {
    DeviceBuffer buf;
    explicit DeviceArray(const std::vector<T> &v) : buf(v.size() * sizeof(T))
    {
        REQUIRE(cudaMemcpy(buf.ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    const T *get() const { return static_cast<const T *>(buf.ptr); }
};

struct Context {
    fa_context *ctx = nullptr;
    Context() { REQUIRE(fa_create(&ctx, FA_BACKEND_CUDA, 0) == FA_OK); }
    ~Context() { fa_destroy(ctx); }
};

#endif  // FA_TEST_DEVICE_TENSORS_HPP
