// test_gpu_backend.cpp - the one GPU host layer (src/common/gpu_host/gpu_backend.c) over a
// recording runtime table of the test's own, on the CPU: device discovery and its
// failures, which kernels each pass launches in what order on which grids, the
// shared-memory limit raised once per kernel, workspaces allocated and released on
// every path, failures that name their stage, and the device check of a call's indices:
// launched first when the call has them, and the context's record it reports through.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "aligned_problem.hpp"
#include "api/problem.h"
#include "gpu_host/device_check.h"
#include "gpu_host/gpu_args.h"
#include "gpu_host/gpu_kvcache.h"
#include "gpu_host/gpu_runtime.h"

namespace {

// Launch handles: only their addresses matter.
const void *const k_fwd_kernel = &k_fwd_kernel;
const void *const k_dkdv_kernel = &k_dkdv_kernel;
const void *const k_dq_kernel = &k_dq_kernel;
const void *const k_combine = &k_combine;
const void *const k_preprocess = &k_preprocess;
const void *const k_convert_dq = &k_convert_dq;
const void *const k_append = &k_append;
const void *const k_seq_check = &k_seq_check;
const void *const k_seq_check_pages = &k_seq_check_pages;

struct event {
    std::string op;               // "alloc", "release", "prepare", "launch", "set_device", "sync",
                                  // "host_alloc", "host_free", "zero"
    const void *kernel = nullptr; // launch/prepare: the kernel (*handle)
    const void *ptr = nullptr;    // zero: the memory
    fa_grid grid = {0, 0, 0};
    unsigned threads = 0;
    size_t bytes = 0;             // alloc size, launch's dynamic shared memory, bytes zeroed
    int overlap = 0;              // launch: may overlap the previous kernel of the stream
};

// The recording runtime's state: what happened, and what it is told to do.
struct fake_device {
    std::vector<event> events;
    int device_count = 1;
    int fail_launch_at = -1; // index among launches that returns an error
    int fail_alloc = 0;
    int fail_host_alloc = 0;
    int capturing = 0;
    int launches = 0;
    int launch_overlap = 1;                // what the device reports
    std::vector<fa_seq_check_args> checks; // the device check's arguments, as launched
    std::vector<fa_fwd_args> fwds;         // the forward kernel's, as launched
    fa_device_status record;               // the mapped record (host and device alike)
    alignas(256) unsigned char memory[1 << 16];
};
fake_device g_dev;
const int k_fake_error = 7;

int fake_device_count(int *count)
{
    *count = g_dev.device_count;
    return 0;
}

int fake_properties(int device, fa_gpu_properties *out)
{
    (void)device;
    std::snprintf(out->device_name, sizeof out->device_name, "Fake H200");
    std::snprintf(out->arch, sizeof out->arch, "sm_90");
    out->wave_size = 32;
    out->smem_per_block = 227 * 1024;
    out->smem_per_sm = 228 * 1024;
    out->regs_per_sm = 65536;
    out->max_threads_per_block = 1024;
    out->max_threads_per_sm = 2048;
    out->sm_count = 7;
    out->has_matrix_unit = 1;
    out->launch_overlap = g_dev.launch_overlap;
    return 0;
}

int fake_set_device(int device)
{
    (void)device;
    g_dev.events.push_back({"set_device"});
    return 0;
}

int fake_alloc(void **ptr, size_t bytes, void *stream)
{
    (void)stream;
    event e{"alloc"};
    e.bytes = bytes;
    g_dev.events.push_back(e);
    if (g_dev.fail_alloc) return k_fake_error;
    *ptr = g_dev.memory;
    return 0;
}

void fake_release(void *ptr, void *stream)
{
    (void)stream;
    CHECK(ptr == g_dev.memory);
    g_dev.events.push_back({"release"});
}

int fake_stream_sync(void *stream)
{
    (void)stream;
    g_dev.events.push_back({"sync"});
    return 0;
}

int fake_host_alloc_mapped(void **host, void **device, size_t bytes)
{
    event e{"host_alloc"};
    e.bytes = bytes;
    g_dev.events.push_back(e);
    if (g_dev.fail_host_alloc) return k_fake_error;
    *host = *device = &g_dev.record;
    return 0;
}

void fake_host_free(void *host)
{
    CHECK(host == &g_dev.record);
    g_dev.events.push_back({"host_free"});
}

int fake_stream_capturing(void *stream, int *active)
{
    (void)stream;
    *active = g_dev.capturing;
    return 0;
}

int fake_prepare(const void *kernel, int smem_bytes)
{
    event e{"prepare"};
    e.kernel = kernel;
    e.bytes = static_cast<size_t>(smem_bytes);
    g_dev.events.push_back(e);
    return 0;
}

int fake_launch(const void *kernel, fa_grid grid, unsigned threads, void **args, size_t smem_bytes, void *stream,
                int overlap)
{
    (void)stream;
    event e{"launch"};
    e.overlap = overlap;
    e.kernel = kernel;
    e.grid = grid;
    e.threads = threads;
    e.bytes = smem_bytes;
    g_dev.events.push_back(e);
    if (kernel == k_seq_check || kernel == k_seq_check_pages)
        g_dev.checks.push_back(*static_cast<fa_seq_check_args *>(args[0]));
    if (kernel == k_fwd_kernel)
        g_dev.fwds.push_back(*static_cast<fa_fwd_args *>(args[0]));
    return g_dev.launches++ == g_dev.fail_launch_at ? k_fake_error : 0;
}

int fake_zero(void *ptr, size_t bytes, void *stream)
{
    (void)stream;
    event e{"zero"};
    e.ptr = ptr;
    e.bytes = bytes;
    g_dev.events.push_back(e);
    return 0;
}

const char *fake_error_text(int error) { return error == k_fake_error ? "fake error" : "unknown"; }

fa_gpu_runtime fake_runtime(int dynamic_smem, const char *built_targets)
{
    return {"FAKE", "fake GPU", FA_BACKEND_CUDA, FA_VENDOR_NVIDIA, built_targets, "FA_FAKE_ARCHS",
            fake_device_count, fake_properties, fake_set_device, fake_alloc,
            fake_release, fake_stream_sync, dynamic_smem ? fake_prepare : nullptr, fake_launch,
            fake_error_text, &k_combine, &k_preprocess, &k_convert_dq, &k_append,
            fake_host_alloc_mapped, fake_host_free, fake_stream_capturing, &k_seq_check,
            &k_seq_check_pages, nullptr, fake_zero};
}

// A context bound to a fake runtime (a fresh recording per context).
struct fake_context {
    fa_gpu_runtime rt;
    fa_context ctx;
    fake_context(int dynamic_smem = 1, const char *built_targets = nullptr)
        : rt(fake_runtime(dynamic_smem, built_targets))
    {
        g_dev = fake_device();
        std::memset(&ctx, 0, sizeof ctx);
        ctx.backend = FA_BACKEND_CUDA;
        ctx.ops = &fa_gpu_ops;
    }
    std::vector<std::string> attach_ops; // what attaching did; the events restart after it
    fa_status attach()
    {
        char why[256] = "";
        fa_status st = fa_gpu_attach(&ctx, &rt, why, sizeof why);
        std::snprintf(ctx.last_error, sizeof ctx.last_error, "%s", why);
        for (const event &e : g_dev.events) attach_ops.push_back(e.op);
        g_dev.events.clear();
        return st;
    }
    ~fake_context()
    {
        if (ctx.state) fa_gpu_ops.destroy(&ctx);
    }
};

fa_kernel_config config(fa_pass pass, int atomic_dq)
{
    fa_kernel_config c;
    std::memset(&c, 0, sizeof c);
    c.name = "fake_config";
    c.backend = FA_BACKEND_CUDA;
    c.vendor = FA_VENDOR_NVIDIA;
    c.pass = pass;
    c.dtype = FA_DTYPE_BF16;
    c.head_dim = 64;
    c.tile_m = 128;
    c.tile_n = 64;
    c.threads = 128;
    c.stages = 2;
    c.smem_bytes = 80 * 1024;
    c.compiled = 1;
    c.atomic_dq = atomic_dq;
    c.kernels[0] = pass == FA_PASS_FWD ? &k_fwd_kernel : &k_dkdv_kernel;
    c.kernels[1] = pass == FA_PASS_FWD ? nullptr : &k_dq_kernel;
    return c;
}

fa_selection selection(const fa_kernel_config &c, int splits)
{
    fa_selection sel;
    std::memset(&sel, 0, sizeof sel);
    sel.config = &c;
    sel.num_splits = splits;
    return sel;
}

std::vector<std::string> ops()
{
    std::vector<std::string> out;
    for (const event &e : g_dev.events) out.push_back(e.op);
    return out;
}

std::vector<const void *> launched()
{
    std::vector<const void *> out;
    for (const event &e : g_dev.events)
        if (e.op == "launch") out.push_back(e.kernel);
    return out;
}

const event &nth_launch(int n)
{
    for (const event &e : g_dev.events)
        if (e.op == "launch" && n-- == 0) return e;
    FAIL("fewer launches than asked for");
    return g_dev.events.front();
}

bool same_grid(fa_grid a, fa_grid b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

using strings = std::vector<std::string>;

} // namespace

TEST_CASE("gpu backend: attaching finds the device and its arch-table row", "[gpu_backend]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    CHECK(std::string(f.ctx.row.name) == "sm_90");
    CHECK(f.ctx.row.sm_count == 7); // the reported count replaces the table's
    CHECK(std::string(f.ctx.info.device_name) == "Fake H200");
    CHECK(f.ctx.info.row_from_table == 1);
}

TEST_CASE("gpu backend: attaching without a usable device says why", "[gpu_backend]")
{
    {
        fake_context f;
        g_dev.device_count = 0;
        CHECK(f.attach() == FA_ERR_NO_DEVICE);
        CHECK(std::string(f.ctx.last_error).find("no fake GPU (FAKE)") != std::string::npos);
        CHECK(f.ctx.state == nullptr);
    }
    {
        fake_context f;
        f.ctx.device = 3;
        CHECK(f.attach() == FA_ERR_BAD_BACKEND);
        CHECK(std::string(f.ctx.last_error).find("device index 3 out of range") != std::string::npos);
    }
    {
        fake_context f(1, "sm_80,sm_86");
        CHECK(f.attach() == FA_ERR_UNSUPPORTED);
        CHECK(std::string(f.ctx.last_error).find("rebuild with FA_FAKE_ARCHS including it") != std::string::npos);
    }
    {
        fake_context f(1, "sm_80,sm_90");
        CHECK(f.attach() == FA_OK);
    }
}

TEST_CASE("gpu backend: a forward launches its kernel, raising its shared memory once", "[gpu_backend]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    const fa_problem p = aligned_problem();
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection sel = selection(c, 1);
    REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
    CHECK(ops() == strings{"set_device", "prepare", "launch"});
    const event &e = nth_launch(0);
    CHECK(e.kernel == k_fwd_kernel);
    CHECK(same_grid(e.grid, fa_fwd_grid(&p, &sel)));
    CHECK(e.threads == 128);
    CHECK(e.bytes == 80 * 1024);

    g_dev.events.clear();
    REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
    CHECK(ops() == strings{"set_device", "launch"}); // prepared already
}

TEST_CASE("gpu backend: split-KV allocates its partials, combines, then releases", "[gpu_backend]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    const fa_problem p = aligned_problem();
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection sel = selection(c, 3);
    REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
    CHECK(ops() == strings{"set_device", "alloc", "prepare", "launch", "launch", "release"});
    CHECK(g_dev.events[1].bytes == fa_split_bytes(&p, 3));
    CHECK(launched() == std::vector<const void *>{k_fwd_kernel, k_combine});
    // The forward is the call's first kernel; the combine may overlap its end.
    CHECK(nth_launch(0).overlap == 0);
    CHECK(nth_launch(1).overlap == 1);
    const event &combine = nth_launch(1);
    const fa_fwd_args fwd = fa_make_args(&p, 3, g_dev.memory);
    const fa_combine_args combine_args = fa_make_split_combine_args(&p, &fwd);
    CHECK(same_grid(combine.grid, fa_combine_grid(&combine_args)));
    CHECK(combine.threads == FA_COMBINE_THREADS);
    CHECK(combine.bytes == 0);

    g_dev.events.clear(); // the caller's workspace: nothing allocated
    REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, g_dev.memory, sizeof g_dev.memory) == FA_OK);
    CHECK(ops() == strings{"set_device", "launch", "launch"});
}

TEST_CASE("gpu backend: a device or build without overlapping launches gets plain ones", "[gpu_backend]")
{
    fake_context f;
    g_dev.launch_overlap = 0; // e.g. an sm_80 device, or kernels JIT-compiled from older PTX
    REQUIRE(f.attach() == FA_OK);
    const fa_problem p = aligned_problem();
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection sel = selection(c, 3);
    REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, g_dev.memory, sizeof g_dev.memory) == FA_OK);
    CHECK(launched() == std::vector<const void *>{k_fwd_kernel, k_combine});
    CHECK((nth_launch(0).overlap == 0 && nth_launch(1).overlap == 0));
}

TEST_CASE("gpu backend: fa_combine launches the combine kernel once, or refuses what it cannot read",
          "[gpu_backend]")
{
    alignas(16) static unsigned char storage[64];
    fa_combine_problem p;
    std::memset(&p, 0, sizeof p);
    p.dtype = FA_DTYPE_F16;
    p.n = 2;
    p.batch = 2;
    p.rows = 5;
    p.heads = 3;
    p.head_dim = 64;
    for (int i = 0; i < 2; ++i) {
        p.part_out[i] = storage;
        p.part_out_stride[i] = fa_strides{5 * 3 * 64, 3 * 64, 64};
        p.part_lse[i] = reinterpret_cast<const float *>(storage);
        p.part_lse_stride[i] = fa_strides{3 * 5, 1, 5};
    }
    p.out = storage;
    p.out_stride = p.part_out_stride[0];
    p.lse_stride = p.part_lse_stride[0];
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    g_dev.events.clear();
    REQUIRE(fa_gpu_ops.combine(&f.ctx, &p) == FA_OK);
    CHECK(ops() == strings{"set_device", "launch"}); // no workspace, nothing raised
    fa_combine_args args;
    REQUIRE(fa_gpu_combine_args(&f.ctx, &p, "FAKE", &args) == FA_OK);
    CHECK(nth_launch(0).kernel == k_combine);
    CHECK(same_grid(nth_launch(0).grid, fa_combine_grid(&args)));
    CHECK(nth_launch(0).threads == FA_COMBINE_THREADS);

    auto refused = [&](fa_combine_problem bad, const char *why) {
        g_dev.events.clear();
        CHECK(fa_gpu_ops.combine(&f.ctx, &bad) == FA_ERR_UNSUPPORTED);
        CHECK(std::string(f.ctx.last_error).find(why) != std::string::npos);
        CHECK(launched().empty());
    };
    fa_combine_problem bad = p;
    bad.part_out_stride[1].row += 8; // a layout of its own
    refused(bad, "one layout");
    bad = p;
    bad.part_lse_stride[1].head = 6;
    refused(bad, "partial_lse[1]");
    bad = p;
    bad.part_out[1] = storage + 2;
    refused(bad, "16-byte aligned rows");
    bad = p;
    bad.head_dim = 12;
    refused(bad, "head_dim a multiple of 8");
}

TEST_CASE("gpu backend: the backward runs preprocess, dK/dV, then the dQ step its mode needs",
          "[gpu_backend]")
{
    const fa_problem p = aligned_problem();
    SECTION("dQ by atomics: the accumulator is converted")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_kernel_config c = config(FA_PASS_BWD, 1);
        const fa_selection sel = selection(c, 1);
        REQUIRE(fa_gpu_ops.bwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
        CHECK(launched() == std::vector<const void *>{k_preprocess, k_dkdv_kernel, k_convert_dq});
        CHECK(ops().front() == "set_device");
        CHECK(g_dev.events[1].op == "alloc");
        CHECK(g_dev.events[1].bytes == fa_bwd_workspace_bytes(&p, &c));
        CHECK(ops().back() == "release");
        CHECK(same_grid(nth_launch(0).grid, fa_bwd_prep_grid(&p)));
        CHECK(nth_launch(0).threads == FA_PREP_THREADS);
        CHECK(same_grid(nth_launch(1).grid, fa_bwd_dkdv_grid(&p, &c)));
        CHECK(nth_launch(1).bytes == 80 * 1024);
        CHECK(same_grid(nth_launch(2).grid, fa_bwd_prep_grid(&p)));
    }
    SECTION("deterministic: dQ has its own pass over query tiles")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        fa_problem det = p;
        det.deterministic = 1;
        const fa_kernel_config c = config(FA_PASS_BWD, 1);
        const fa_selection sel = selection(c, 1);
        REQUIRE(fa_gpu_ops.bwd(&f.ctx, &det, &sel, nullptr, 0) == FA_OK);
        CHECK(launched() == std::vector<const void *>{k_preprocess, k_dkdv_kernel, k_dq_kernel});
        CHECK(same_grid(nth_launch(2).grid, fa_bwd_dq_grid(&det, &c)));
        int prepares = 0;
        for (const event &e : g_dev.events) prepares += e.op == "prepare";
        CHECK(prepares == 2); // dK/dV and dQ kernels, each once
    }
}

TEST_CASE("gpu backend: failures name their stage and still release the workspace", "[gpu_backend]")
{
    const fa_problem p = aligned_problem();
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection sel = selection(c, 3);
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        g_dev.fail_launch_at = 1;
        CHECK(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_ERR_DEVICE_RUNTIME);
        CHECK(std::string(f.ctx.last_error) == "launching the split-KV combine: fake error");
        CHECK(ops().back() == "release");
    }
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        g_dev.fail_alloc = 1;
        CHECK(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_ERR_OUT_OF_MEMORY);
        CHECK(std::string(f.ctx.last_error).find("forward workspace of") == 0);
        CHECK(launched().empty());
        CHECK(ops().back() == "alloc"); // nothing to release
    }
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_kernel_config b = config(FA_PASS_BWD, 1);
        const fa_selection bsel = selection(b, 1);
        g_dev.fail_launch_at = 1;
        CHECK(fa_gpu_ops.bwd(&f.ctx, &p, &bsel, nullptr, 0) == FA_ERR_DEVICE_RUNTIME);
        CHECK(std::string(f.ctx.last_error) == "launching the backward dK/dV kernel: fake error");
        CHECK(launched().size() == 2); // nothing after the failed stage
        CHECK(ops().back() == "release");
    }
}

TEST_CASE("gpu backend: a runtime with static shared memory gets 0 dynamic bytes", "[gpu_backend]")
{
    fake_context f(0);
    REQUIRE(f.attach() == FA_OK);
    const fa_problem p = aligned_problem();
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection sel = selection(c, 1);
    REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
    CHECK(ops() == strings{"set_device", "launch"});
    CHECK(nth_launch(0).bytes == 0);
}

// A varlen problem over aligned_problem's tensors: 2 sequences, 600 query and 260 key
// rows, device arrays the host never reads (nothing lies behind them).
fa_problem varlen_problem()
{
    static const int32_t cu_q[3] = {0, 300, 600}, cu_k[3] = {0, 130, 260};
    fa_problem p = aligned_problem();
    p.varlen = 1;
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    p.q_stride.batch = p.k_stride.batch = p.v_stride.batch = p.out_stride.batch = 0;
    p.dq_stride.batch = p.dk_stride.batch = p.dv_stride.batch = p.dout_stride.batch = 0;
    return p;
}

// The warpgroup walk's drawn tiles (attn_fwd_ws.h): a counter after seq_ok in the
// workspace, zeroed in the stream before the call's first kernel.
TEST_CASE("gpu backend: a forward whose walk draws its tiles zeroes their counter first", "[gpu_backend]")
{
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    SECTION("allocated workspace: the counter alone")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_problem p = aligned_problem();
        fa_selection sel = selection(c, 1);
        sel.walk_draws = 1;
        CHECK(fa_fwd_workspace_total(&p, &sel) == 256);
        REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
        CHECK(ops() == strings{"set_device", "alloc", "zero", "prepare", "launch", "release"});
        CHECK(g_dev.events[1].bytes == 256);
        CHECK(g_dev.events[2].ptr == g_dev.memory);
        CHECK(g_dev.events[2].bytes == sizeof(unsigned));
        REQUIRE(g_dev.fwds.size() == 1);
        CHECK(reinterpret_cast<unsigned char *>(g_dev.fwds[0].walk_tickets) == g_dev.memory);
    }
    SECTION("varlen split-KV: after the partials and seq_ok, zeroed before the check")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_problem p = varlen_problem();
        fa_selection sel = selection(c, 3);
        sel.walk_draws = 1;
        const size_t at = fa_split_bytes(&p, 3) + fa_seq_ok_bytes(&p);
        CHECK(fa_seq_ok_bytes(&p) == 256);
        CHECK(fa_fwd_workspace_total(&p, &sel) == at + 256);
        REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, g_dev.memory, sizeof g_dev.memory) == FA_OK);
        REQUIRE(ops().size() >= 2);
        CHECK(ops()[1] == "zero");
        CHECK(g_dev.events[1].ptr == g_dev.memory + at);
        CHECK(launched() == std::vector<const void *>{k_seq_check, k_fwd_kernel, k_combine});
        REQUIRE(g_dev.fwds.size() == 1);
        CHECK(reinterpret_cast<unsigned char *>(g_dev.fwds[0].walk_tickets) == g_dev.memory + at);
    }
    SECTION("a static walk: no counter, nothing zeroed")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_problem p = aligned_problem();
        const fa_selection sel = selection(c, 1);
        CHECK(fa_fwd_workspace_total(&p, &sel) == 0);
        REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
        CHECK(ops() == strings{"set_device", "prepare", "launch"});
        REQUIRE(g_dev.fwds.size() == 1);
        CHECK(g_dev.fwds[0].walk_tickets == nullptr);
    }
}

TEST_CASE("gpu backend: attaching allocates the device-check record, destroying frees it",
          "[gpu_backend][device_check]")
{
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        CHECK(f.attach_ops == strings{"set_device", "host_alloc"});
        f.ctx.ops->destroy(&f.ctx);
        CHECK(ops() == strings{"host_free"});
    }
    {
        fake_context f;
        g_dev.fail_host_alloc = 1;
        CHECK(f.attach() == FA_ERR_DEVICE_RUNTIME);
        CHECK(std::string(f.ctx.last_error) == "allocating the device-check record in mapped host memory: fake error");
        CHECK(f.ctx.state == nullptr);
    }
}

TEST_CASE("gpu backend: a call with device indices runs the device check first", "[gpu_backend][device_check]")
{
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    SECTION("plain: no check, no seq_ok")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_problem p = aligned_problem();
        const fa_selection sel = selection(c, 1);
        REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
        CHECK(launched() == std::vector<const void *>{k_fwd_kernel});
        CHECK(nth_launch(0).overlap == 0); // a call's first kernel is a plain launch
        CHECK(fa_seq_ok_bytes(&p) == 0);
    }
    SECTION("varlen split-KV: the check, the forward, the combine; seq_ok after the partials")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_problem p = varlen_problem();
        const fa_selection sel = selection(c, 3);
        REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, g_dev.memory, sizeof g_dev.memory) == FA_OK);
        CHECK(launched() == std::vector<const void *>{k_seq_check, k_fwd_kernel, k_combine});
        CHECK((nth_launch(0).overlap == 0 && nth_launch(1).overlap == 1 && nth_launch(2).overlap == 1));
        CHECK(same_grid(nth_launch(0).grid, fa_grid{1, 1, 1}));
        CHECK(nth_launch(0).threads == FA_CHECK_THREADS);
        REQUIRE(g_dev.checks.size() == 1);
        REQUIRE(g_dev.fwds.size() == 1);
        CHECK(g_dev.fwds[0].checked_late == 0); // varlen: cu_seqlens place the rows it reads
        const fa_seq_check_args &a = g_dev.checks[0];
        CHECK(a.batch == 2);
        CHECK(a.call == FA_CHECK_CALL_FWD);
        CHECK((a.cu_seqlens_q == p.cu_seqlens_q && a.cu_seqlens_k == p.cu_seqlens_k));
        CHECK((a.rows_q == 600 && a.rows_k == 260 && a.max_seqlen_q == 300 && a.max_seqlen_k == 130));
        CHECK(a.block_table == nullptr);
        CHECK(a.status == &g_dev.record);
        CHECK(reinterpret_cast<unsigned char *>(a.seq_ok) == g_dev.memory + fa_split_bytes(&p, 3));
        CHECK(fa_fwd_workspace_total(&p, &sel) == fa_split_bytes(&p, 3) + 256);
    }
    SECTION("allocated workspace holds seq_ok too")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        fa_problem p = aligned_problem();
        static const int32_t used[2] = {5, 7};
        p.seqused_k = used;
        const fa_selection sel = selection(c, 1);
        REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
        CHECK(ops() == strings{"set_device", "alloc", "launch", "prepare", "launch", "release"});
        CHECK(g_dev.events[1].bytes == fa_seq_ok_bytes(&p));
        REQUIRE(g_dev.checks.size() == 1);
        CHECK(g_dev.checks[0].seqused_k == used);
        CHECK(g_dev.checks[0].seqlen_k == 130);
        CHECK(g_dev.checks[0].cu_seqlens_q == nullptr);
        REQUIRE(g_dev.fwds.size() == 1);
        CHECK(g_dev.fwds[0].checked_late == 1); // fixed length: the check may run beside it
        CHECK(g_dev.fwds[0].checks_itself == 0); // the prefill family: the check kernel
        CHECK(launched() == std::vector<const void *>{k_seq_check, k_fwd_kernel});
        CHECK((nth_launch(0).overlap == 0 && nth_launch(1).overlap == 1));
    }
    SECTION("paged, fixed length, decode family: no check kernel, the forward checks itself")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        fa_problem p = aligned_problem();
        static const int32_t table[2 * 9] = {};
        p.block_table = table;
        p.block_table_stride = 9;
        p.block_table_width = 9;
        p.page_size = 16;
        p.num_pages = 40;
        fa_kernel_config decode = c; // paged K/V runs on the decode family only
        decode.pack_gqa = 1;
        for (int splits : {1, 3}) {
            g_dev.events.clear();
            g_dev.fwds.clear();
            const fa_selection sel = selection(decode, splits);
            REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, g_dev.memory, sizeof g_dev.memory) == FA_OK);
            INFO("splits " << splits);
            if (splits == 1)
                CHECK(launched() == std::vector<const void *>{k_fwd_kernel});
            else
                CHECK(launched() == std::vector<const void *>{k_fwd_kernel, k_combine});
            CHECK(nth_launch(0).overlap == 0); // the call's first kernel
            CHECK(g_dev.checks.empty());
            REQUIRE(g_dev.fwds.size() == 1);
            const fa_fwd_args &a = g_dev.fwds[0];
            CHECK((a.checks_itself == 1 && a.checked_late == 0 && a.num_pages == 40));
            CHECK((a.status == &g_dev.record && a.check_call == FA_CHECK_CALL_FWD));
            CHECK(reinterpret_cast<unsigned char *>(a.seq_ok) == g_dev.memory + fa_split_bytes(&p, splits));
        }
    }
    SECTION("paged varlen: cu_seqlens_k gives lengths only, its end is not checked against rows")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        fa_problem p = varlen_problem();
        static const int32_t table[2 * 9] = {};
        p.block_table = table;
        p.block_table_stride = 9;
        p.block_table_width = 9;
        p.page_size = 16;
        p.num_pages = 40;
        p.total_k = 2 * 9 * 16; // what api.c sets for a paged problem: the tables' capacity
        fa_kernel_config decode = c;
        decode.pack_gqa = 1;
        const fa_selection sel = selection(decode, 1);
        REQUIRE(fa_gpu_ops.fwd(&f.ctx, &p, &sel, g_dev.memory, sizeof g_dev.memory) == FA_OK);
        CHECK(launched() == std::vector<const void *>{k_seq_check, k_seq_check_pages, k_fwd_kernel});
        CHECK((nth_launch(0).overlap == 0 && nth_launch(1).overlap == 1 && nth_launch(2).overlap == 1));
        REQUIRE(g_dev.checks.size() == 2);
        CHECK(fa_check_needs_whole_pass(&g_dev.checks[0]));
        REQUIRE(g_dev.fwds.size() == 1);
        CHECK(g_dev.fwds[0].checked_late == 0);
        CHECK(g_dev.checks[0].cu_seqlens_k == p.cu_seqlens_k);
        CHECK(g_dev.checks[0].rows_k == -1);
        CHECK(g_dev.checks[0].rows_q == p.total_q);
    }
    SECTION("the backward: check, preprocess, dK/dV, dQ; seq_ok after its buffers")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_problem p = varlen_problem();
        const fa_kernel_config b = config(FA_PASS_BWD, 1);
        const fa_selection sel = selection(b, 1);
        REQUIRE(fa_gpu_ops.bwd(&f.ctx, &p, &sel, nullptr, 0) == FA_OK);
        CHECK(launched() == std::vector<const void *>{k_seq_check, k_preprocess, k_dkdv_kernel, k_convert_dq});
        CHECK(g_dev.events[1].bytes == fa_bwd_workspace_total(&p, &b));
        CHECK(fa_bwd_workspace_total(&p, &b) == fa_bwd_workspace_bytes(&p, &b) + 256);
        REQUIRE(g_dev.checks.size() == 1);
        CHECK(g_dev.checks[0].call == FA_CHECK_CALL_BWD);
        CHECK(reinterpret_cast<unsigned char *>(g_dev.checks[0].seq_ok) ==
              g_dev.memory + fa_bwd_workspace_bytes(&p, &b));
    }
    SECTION("a failed check launch stops the call")
    {
        fake_context f;
        REQUIRE(f.attach() == FA_OK);
        const fa_problem p = varlen_problem();
        const fa_selection sel = selection(c, 1);
        g_dev.fail_launch_at = 0;
        CHECK(fa_gpu_ops.fwd(&f.ctx, &p, &sel, nullptr, 0) == FA_ERR_DEVICE_RUNTIME);
        CHECK(std::string(f.ctx.last_error) == "launching the device check of the indices: fake error");
        CHECK(launched().size() == 1);
        CHECK(ops().back() == "release");
    }
}

TEST_CASE("gpu backend: the device-check record is reported once, then cleared", "[gpu_backend][device_check]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    CHECK(f.ctx.ops->device_error(&f.ctx, 0) == FA_OK);
    g_dev.record.claim = 1;
    g_dev.record.call = FA_CHECK_CALL_FWD;
    g_dev.record.batch = 3;
    g_dev.record.index = 3;
    g_dev.record.value = -2;
    g_dev.record.limit = 17;
    g_dev.record.check = FA_CHECK_SEQUSED_K;
    CHECK(f.ctx.ops->device_error(&f.ctx, 0) == FA_ERR_DEVICE_CHECK);
    CHECK(std::string(f.ctx.last_error) ==
          "device check of an earlier fa_fwd: seqused_k[3] = -2 is outside 0..17 (the keys of sequence 3); "
          "sequence 3 of that call wrote nothing");
    CHECK((g_dev.record.check == 0 && g_dev.record.claim == 0));
    CHECK(f.ctx.ops->device_error(&f.ctx, 0) == FA_OK);
    CHECK(ops().empty()); // wait = 0 touches no runtime call
}

TEST_CASE("gpu backend: waiting for the record drains the stream, never under capture",
          "[gpu_backend][device_check]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    CHECK(f.ctx.ops->device_error(&f.ctx, 1) == FA_OK);
    CHECK(ops() == strings{"set_device", "sync"});
    g_dev.events.clear();
    g_dev.capturing = 1;
    g_dev.record.claim = 1;
    g_dev.record.check = FA_CHECK_CU_K_END;
    CHECK(f.ctx.ops->device_error(&f.ctx, 1) == FA_ERR_UNSUPPORTED);
    CHECK(std::string(f.ctx.last_error).find("while it is being captured") != std::string::npos);
    CHECK(ops().empty());
    CHECK(g_dev.record.check == FA_CHECK_CU_K_END); // untouched
    g_dev.capturing = 0;
    CHECK(f.ctx.ops->device_error(&f.ctx, 1) == FA_ERR_DEVICE_CHECK);
}

namespace {
std::string described(int check, int batch, long long index, long long value, long long limit,
                      int call = FA_CHECK_CALL_FWD)
{
    fa_device_status st;
    std::memset(&st, 0, sizeof st);
    st.claim = 1;
    st.check = check;
    st.call = call;
    st.batch = batch;
    st.index = index;
    st.value = value;
    st.limit = limit;
    char text[512];
    fa_describe_device_check(&st, text, sizeof text);
    return text;
}
} // namespace

TEST_CASE("gpu backend: every device check has its message", "[gpu_backend][device_check]")
{
    const std::string all = "; no sequence of that call wrote anything";
    CHECK(described(FA_CHECK_CU_Q_START, -1, 0, 4, 0) ==
          "device check of an earlier fa_fwd: cu_seqlens_q[0] = 4, must be 0" + all);
    CHECK(described(FA_CHECK_CU_K_ORDER, 1, 2, 5, 9, FA_CHECK_CALL_BWD) ==
          "device check of an earlier fa_bwd: cu_seqlens_k decreases: [2] = 5 < [1] = 9" + all);
    CHECK(described(FA_CHECK_CU_Q_END, -1, 3, 70, 64) ==
          "device check of an earlier fa_fwd: cu_seqlens_q[3] = 70 != the tensor's total rows 64" + all);
    const std::string one = "; sequence 2 of that call wrote nothing";
    CHECK(described(FA_CHECK_SEQLEN_Q, 2, 2, 90, 64) ==
          "device check of an earlier fa_fwd: cu_seqlens_q: sequence 2 has 90 query rows > max_seqlen_q 64" + one);
    CHECK(described(FA_CHECK_SEQLEN_K, 2, 2, 91, 80).find("sequence 2 has 91 key rows > max_seqlen_k 80") !=
          std::string::npos);
    CHECK(described(FA_CHECK_CACHE_SEQLENS, 2, 2, -1, 0, FA_CHECK_CALL_FWD_KVCACHE) ==
          "device check of an earlier fa_fwd_kvcache: cache_seqlens[2] = -1 is negative" + one);
    CHECK(described(FA_CHECK_CACHE_CAPACITY, 2, 2, 1030, 1024).find(
              "cache_seqlens[2] + the new keys = 1030 > the cache's capacity 1024") != std::string::npos);
    CHECK(described(FA_CHECK_CACHE_BATCH_IDX, 2, 2, 8, 8).find("cache_batch_idx[2] = 8 is outside 0..7") !=
          std::string::npos);
    CHECK(described(FA_CHECK_PAGED_KEYS, 2, 2, 600, 512).find(
              "sequence 2 has 600 keys > block_table_width x page_block_size = 512") != std::string::npos);
    CHECK(described(FA_CHECK_PAGE_ID, 2, 5, 900, 512) ==
          "device check of an earlier fa_fwd: block_table[2][5] = 900 is outside 0..511 (num_pages 512)" + one);
}

// fa_fwd_kvcache's problem over aligned_problem(): the attention over a contiguous cache
// of 130 keys a row, 5 new keys, rotary over 32 dims.
static fa_kvcache_problem kvcache_problem()
{
    static const int32_t seqlens[2] = {3, 100};
    alignas(16) static unsigned char tables[64];
    fa_kvcache_problem kp;
    std::memset(&kp, 0, sizeof kp);
    kp.attn = aligned_problem();
    kp.k_new = kp.v_new = kp.attn.k;
    kp.k_new_stride = kp.v_new_stride = kp.attn.k_stride;
    kp.seqlen_new = 5;
    kp.capacity = 130;
    kp.cache_rows = 2;
    kp.cache_seqlens = seqlens;
    kp.rotary_cos = kp.rotary_sin = tables;
    kp.rotary_dim = 32;
    kp.rotary_seqlen = 130;
    return kp;
}

TEST_CASE("gpu backend: kvcache runs the device check, the append, then the forward, with no host copy",
          "[gpu_backend][kvcache]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    const fa_kvcache_problem kp = kvcache_problem();
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection sel = selection(c, 1);
    size_t bytes = 0;
    REQUIRE(fa_gpu_ops.fwd_kvcache_workspace(&f.ctx, &kp, &sel, &bytes) == FA_OK);
    CHECK(bytes == fa_kvcache_workspace_bytes(&kp, &sel));
    CHECK(bytes >= 2 * sizeof(int) + 600 * 6 * 64 * 2); // seqused and the rotated q
    REQUIRE(fa_gpu_ops.fwd_kvcache(&f.ctx, &kp, &sel, nullptr, 0) == FA_OK);
    CHECK(ops() == strings{"set_device", "alloc", "launch", "launch", "prepare", "launch", "release"});
    CHECK(launched() == std::vector<const void *>{k_seq_check, k_append, k_fwd_kernel});
    CHECK((nth_launch(0).overlap == 0 && nth_launch(1).overlap == 1 && nth_launch(2).overlap == 1));
    const event &append = nth_launch(1);
    CHECK(same_grid(append.grid, fa_append_grid(&kp)));
    CHECK(append.grid.x == 300); // the rotated q rows outnumber the new ones
    CHECK(append.threads == FA_APPEND_THREADS);
    // The check, the append and the attention share one seq_ok in the workspace.
    REQUIRE(g_dev.checks.size() == 1);
    CHECK(g_dev.checks[0].call == FA_CHECK_CALL_FWD_KVCACHE);
    CHECK(g_dev.checks[0].cache_seqlens == kp.cache_seqlens);
    CHECK(g_dev.checks[0].capacity == kp.capacity);
    CHECK(g_dev.checks[0].min_keys == (kp.rotary_cos ? kp.attn.seqlen_q : 0));
    CHECK(reinterpret_cast<unsigned char *>(g_dev.checks[0].seq_ok) ==
          g_dev.memory + (fa_kvcache_workspace_bytes(&kp, &sel) - 256));
    // The attention reads what the append wrote: it waits for the kernels before it first.
    REQUIRE(g_dev.fwds.size() == 1);
    CHECK(g_dev.fwds[0].checked_late == 0);
    CHECK(g_dev.fwds[0].walk_tickets == nullptr);
}

TEST_CASE("gpu backend: kvcache whose attention draws its tiles zeroes their counter after seq_ok first",
          "[gpu_backend][kvcache]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    const fa_kvcache_problem kp = kvcache_problem();
    const fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection plain = selection(c, 1);
    fa_selection sel = plain;
    sel.walk_draws = 1;
    size_t bytes = 0;
    REQUIRE(fa_gpu_ops.fwd_kvcache_workspace(&f.ctx, &kp, &sel, &bytes) == FA_OK);
    CHECK(bytes == fa_kvcache_workspace_bytes(&kp, &plain) + 256);
    REQUIRE(fa_gpu_ops.fwd_kvcache(&f.ctx, &kp, &sel, nullptr, 0) == FA_OK);
    CHECK(ops() == strings{"set_device", "alloc", "zero", "launch", "launch", "prepare", "launch", "release"});
    CHECK(g_dev.events[2].ptr == g_dev.memory + fa_kvcache_workspace_bytes(&kp, &plain));
    CHECK(g_dev.events[2].bytes == sizeof(unsigned));
    REQUIRE(g_dev.checks.size() == 1);
    CHECK(reinterpret_cast<unsigned char *>(g_dev.checks[0].seq_ok) ==
          g_dev.memory + (fa_kvcache_workspace_bytes(&kp, &plain) - 256));
    REQUIRE(g_dev.fwds.size() == 1);
    CHECK(reinterpret_cast<unsigned char *>(g_dev.fwds[0].walk_tickets) ==
          g_dev.memory + fa_kvcache_workspace_bytes(&kp, &plain));
}

TEST_CASE("gpu backend: paged caches and cache_batch_idx run only on a decode config", "[gpu_backend][kvcache]")
{
    fake_context f;
    REQUIRE(f.attach() == FA_OK);
    static const int32_t rows[2] = {1, 0};
    fa_kvcache_problem kp = kvcache_problem();
    kp.cache_batch_idx = rows;
    kp.attn.block_table = rows;
    kp.attn.block_table_stride = 1;
    kp.attn.block_table_width = 1;
    kp.attn.page_size = 130;
    kp.attn.num_pages = 2;
    fa_kernel_config c = config(FA_PASS_FWD, 0);
    const fa_selection prefill = selection(c, 1);
    size_t bytes = 1;
    // A prefill config cannot read pages: refused before anything launches.
    CHECK(fa_gpu_ops.fwd_kvcache_workspace(&f.ctx, &kp, &prefill, &bytes) == FA_ERR_UNSUPPORTED);
    CHECK(fa_gpu_ops.fwd_kvcache(&f.ctx, &kp, &prefill, nullptr, 0) == FA_ERR_UNSUPPORTED);
    CHECK(std::string(f.ctx.last_error).find("reads paged K/V") != std::string::npos);
    CHECK(launched().empty());
    CHECK(fa_gpu_ops.fwd(&f.ctx, &kp.attn, &prefill, nullptr, 0) == FA_ERR_UNSUPPORTED);
    CHECK(launched().empty());
    // A decode config reads them: the append, then the attention.
    c.pack_gqa = 1;
    const fa_selection decode = selection(c, 1);
    CHECK(fa_gpu_ops.fwd_kvcache_workspace(&f.ctx, &kp, &decode, &bytes) == FA_OK);
    CHECK(fa_gpu_ops.fwd_kvcache(&f.ctx, &kp, &decode, nullptr, 0) == FA_OK);
    // Fixed length: the block-table kernel alone checks each sequence, scalars included.
    CHECK(launched() == std::vector<const void *>{k_seq_check_pages, k_append, k_fwd_kernel});
    REQUIRE(g_dev.checks.size() == 1);
    CHECK((g_dev.checks[0].cache_batch_idx == rows && g_dev.checks[0].cache_seqlens == kp.cache_seqlens));
}
