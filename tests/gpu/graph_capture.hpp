// graph_capture.hpp - what the GPU tests of captured calls share: a non-blocking
// stream, a captured and instantiated CUDA graph, capture of one library call (which
// must succeed, with the blocking device-error query refused while capturing), and
// byte-level helpers for device buffers (download, upload, re-poison).
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "device_tensors.hpp"
#include "oracle.hpp"

inline bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

// Byte-equal (a named test keeps Catch from printing whole buffers on failure).
inline bool same_bytes(const std::vector<unsigned char> &a, const std::vector<unsigned char> &b) { return a == b; }

template <typename T> void upload(const DeviceArray<T> &dst, const std::vector<T> &src)
{
    REQUIRE(cudaMemcpy(dst.buf.ptr, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
}

// An output poisoned again, on the device and in its host copy, before a call.
inline void reset(DeviceTensor &t)
{
    fa_oracle::poison(*t.host);
    REQUIRE(cudaMemcpy(t.buf->ptr, t.host->storage.data(), t.host->storage.size(), cudaMemcpyHostToDevice) ==
            cudaSuccess);
}

inline std::vector<unsigned char> download(const DeviceTensor &t)
{
    std::vector<unsigned char> bytes(t.host->storage.size());
    REQUIRE(cudaMemcpy(bytes.data(), t.buf->ptr, bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    return bytes;
}

struct Stream {
    cudaStream_t s = nullptr;
    Stream() { REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess); }
    ~Stream() { cudaStreamDestroy(s); }
};

// One captured graph, instantiated.
struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ~Graph()
    {
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
    }
    void replay(cudaStream_t s)
    {
        REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
        REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    }
};

// Captures what `call` enqueues on the context's stream s (the call must succeed), with
// fa_device_error(ctx, 1) refused meanwhile and fa_device_error(ctx, 0) answering.
template <typename F> void capture(fa_context *ctx, cudaStream_t s, Graph &g, F call)
{
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    const fa_status st = call();
    const std::string msg = fa_last_error(ctx);
    const fa_status wait = fa_device_error(ctx, 1);
    const fa_status peek = fa_device_error(ctx, 0);
    const cudaError_t end = cudaStreamEndCapture(s, &g.graph);
    INFO(fa_status_string(st) << ": " << msg);
    REQUIRE(st == FA_OK);
    REQUIRE(end == cudaSuccess);
    CHECK(wait == FA_ERR_UNSUPPORTED);
    CHECK(peek == FA_OK);
    REQUIRE(cudaGraphInstantiate(&g.exec, g.graph, 0) == cudaSuccess);
}
