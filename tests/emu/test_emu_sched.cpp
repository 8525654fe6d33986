// test_emu_sched.cpp - the emulator's execution model on this build's target: lane
// coordinates, barriers (and __syncthreads_or), the wave order per barrier interval, the
// LDS arena (arrays and objects), and the named errors of a partial barrier, a divergent
// wave op, an LDS over-allocation and a bad launch; an out-of-range LDS write and a
// lane's stack overflow caught by ASan in a child.
#include <catch2/catch.hpp>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "emu_test.hpp"

static const int WS = FA_AMD_WAVE_SIZE;

// ---- lane coordinates ----

struct coords {
    fa_emu_dim3 tid[1024], bid[1024], bdim, gdim;
};

static void coords_kernel(void *arg)
{
    coords *c = (coords *)arg;
    const fa_emu_dim3 t = threadIdx, b = blockIdx, bd = blockDim;
    const unsigned block = b.x + gridDim.x * b.y, lane = t.x + bd.x * t.y;
    c->tid[block * bd.x * bd.y + lane] = t;
    c->bid[block * bd.x * bd.y + lane] = b;
    c->bdim = bd;
    c->gdim = gridDim;
}

TEST_CASE("lanes_see_their_coordinates")
{
    static coords c;
    const fa_emu_device dev = emu_device();
    REQUIRE(fa_emu_launch(&dev, {3, 2, 1}, {(unsigned)WS, 2, 1}, coords_kernel, &c) == FA_EMU_OK);
    REQUIRE((c.bdim.x == (unsigned)WS && c.bdim.y == 2 && c.gdim.x == 3 && c.gdim.y == 2));
    for (unsigned by = 0; by < 2; ++by)
        for (unsigned bx = 0; bx < 3; ++bx)
            for (unsigned ty = 0; ty < 2; ++ty)
                for (unsigned tx = 0; tx < (unsigned)WS; ++tx) {
                    const unsigned i = (bx + 3 * by) * 2 * WS + tx + WS * ty;
                    REQUIRE((c.tid[i].x == tx && c.tid[i].y == ty && c.tid[i].z == 0));
                    REQUIRE((c.bid[i].x == bx && c.bid[i].y == by && c.bid[i].z == 0));
                }
}

// ---- barriers ----

struct ring {
    int got[256];
    int lds_was_poison;
};

// Each lane writes its id to LDS, waits at the barrier, then reads its neighbour's (the
// last lane of a wave reads the next wave's first): right in every wave order.
static void ring_kernel(void *arg)
{
    ring *r = (ring *)arg;
    FA_AMD_LDS_ARRAY(lds, 256 * sizeof(int));
    int *slot = (int *)lds;
    const int i = (int)threadIdx.x, n = (int)blockDim.x;
    if (slot[i] != -1) // 0xFF bytes before anyone writes
        r->lds_was_poison = 0;
    slot[i] = i;
    __syncthreads();
    r->got[i] = slot[(i + 1) % n];
}

TEST_CASE("barrier_orders_lds_between_waves")
{
    static ring r;
    const fa_emu_order orders[] = {FA_EMU_ORDER_FORWARD, FA_EMU_ORDER_REVERSE, FA_EMU_ORDER_SEEDED};
    for (fa_emu_order order : orders) {
        memset(&r, 0, sizeof r);
        r.lds_was_poison = 1;
        REQUIRE(emu_run(ring_kernel, &r, 4 * WS, 2, order, 3u) == FA_EMU_OK);
        REQUIRE(r.lds_was_poison == 1);
        for (int i = 0; i < 4 * WS; ++i)
            REQUIRE(r.got[i] == (i + 1) % (4 * WS));
    }
}

struct vote {
    int pred_lane;
    int got[256];
};

static void syncthreads_or_kernel(void *arg)
{
    vote *v = (vote *)arg;
    const int i = (int)threadIdx.x;
    v->got[i] = __syncthreads_or(i == v->pred_lane);
}

TEST_CASE("syncthreads_or_gives_every_lane_the_or")
{
    static vote v;
    const int lanes[] = {-1, 0, 3 * WS - 1, WS + 5};
    for (int lane : lanes) {
        v.pred_lane = lane;
        REQUIRE(emu_run(syncthreads_or_kernel, &v, 3 * WS) == FA_EMU_OK);
        for (int i = 0; i < 3 * WS; ++i)
            REQUIRE(v.got[i] == (lane >= 0));
    }
}

// Wave 1 leaves early while waves 0 and 2 wait: an error naming both, not a hang.
static void partial_barrier_kernel(void *)
{
    if (threadIdx.x / WS == 1)
        return;
    __syncthreads();
}

TEST_CASE("partial_barrier_is_a_named_error")
{
    REQUIRE(emu_run(partial_barrier_kernel, NULL, 3 * WS) == FA_EMU_ERR_PARTIAL_BARRIER);
    const std::string want = "partial barrier: lanes 0-" + std::to_string(WS - 1) + " at __syncthreads #1, lanes " +
                             std::to_string(WS) + "-" + std::to_string(2 * WS - 1) + " exited, lanes " +
                             std::to_string(2 * WS) + "-" + std::to_string(3 * WS - 1) + " at __syncthreads #1";
    REQUIRE(std::string(fa_emu_error_text()) == want);
}

// Part of one wave leaves (the hardware would go on with the rest of the wave masked;
// the kernels never rely on that, so the emulator reports it).
static void partial_wave_barrier_kernel(void *)
{
    if (threadIdx.x < 16)
        return;
    __syncthreads();
}

TEST_CASE("barrier_without_part_of_a_wave_is_a_named_error")
{
    REQUIRE(emu_run(partial_wave_barrier_kernel, NULL, 2 * WS) == FA_EMU_ERR_PARTIAL_BARRIER);
    const std::string want =
        "partial barrier: lanes 0-15 exited, lanes 16-" + std::to_string(2 * WS - 1) + " at __syncthreads #1";
    REQUIRE(std::string(fa_emu_error_text()) == want);
}

// One more barrier in wave 0 than in the others (a barrier inside a wave-dependent branch).
static void extra_barrier_kernel(void *)
{
    __syncthreads();
    if (threadIdx.x < (unsigned)WS)
        __syncthreads();
}

TEST_CASE("barrier_in_a_wave_dependent_branch_is_a_named_error")
{
    REQUIRE(emu_run(extra_barrier_kernel, NULL, 2 * WS) == FA_EMU_ERR_PARTIAL_BARRIER);
    REQUIRE(emu_text_has("at __syncthreads #2"));
    REQUIRE(emu_text_has("exited"));
}

static void mixed_barrier_kernel(void *)
{
    if (threadIdx.x < (unsigned)WS)
        __syncthreads();
    else
        (void)__syncthreads_or(1);
}

TEST_CASE("syncthreads_met_by_syncthreads_or_is_a_named_error")
{
    REQUIRE(emu_run(mixed_barrier_kernel, NULL, 2 * WS) == FA_EMU_ERR_MIXED_BARRIER);
    REQUIRE(emu_text_has("at __syncthreads_or #1"));
}

// ---- divergent wave ops ----

static void divergent_op_kernel(void *)
{
    if (threadIdx.x % WS < 16)
        (void)fa_isa_ballot(1);
    else
        (void)fa_isa_bpermute(0, 1);
}

static void half_exited_kernel(void *)
{
    if (threadIdx.x % WS >= (unsigned)WS / 2)
        return;
    (void)fa_isa_bpermute((int)(threadIdx.x % WS) * 4, 1);
}

TEST_CASE("divergent_wave_op_is_a_named_error")
{
    REQUIRE(emu_run(divergent_op_kernel, NULL, WS) == FA_EMU_ERR_DIVERGENT_WAVE_OP);
    const std::string want = "divergent wave op: wave 0: lanes 0-15 at ballot #1, lanes 16-" + std::to_string(WS - 1) +
                             " at ds_bpermute_b32 #1";
    REQUIRE(std::string(fa_emu_error_text()) == want);

    REQUIRE(emu_run(half_exited_kernel, NULL, 2 * WS) == FA_EMU_ERR_DIVERGENT_WAVE_OP);
    REQUIRE(emu_text_has("wave 0: lanes 0-"));
    REQUIRE(emu_text_has("at ds_bpermute_b32 #1"));
    REQUIRE(emu_text_has("exited"));
}

// After any error the emulator runs the next launch from a clean state.
TEST_CASE("launch_after_an_error_runs_cleanly")
{
    static ring r;
    REQUIRE(emu_run(divergent_op_kernel, NULL, WS) == FA_EMU_ERR_DIVERGENT_WAVE_OP);
    r.lds_was_poison = 1;
    REQUIRE(emu_run(ring_kernel, &r, 2 * WS) == FA_EMU_OK);
    REQUIRE(std::string(fa_emu_error_text()).empty());
    REQUIRE(r.got[2 * WS - 1] == 0);
}

// ---- wave order ----

struct order_log {
    int wave[64 * 16];
    int n;
    int stale; // wave 1 read wave 0's LDS word before wave 0 wrote it
};

// Lane 0 of each wave logs its wave in every barrier interval (8 intervals).
static void order_kernel(void *arg)
{
    order_log *log = (order_log *)arg;
    for (int interval = 0; interval < 8; ++interval) {
        if (threadIdx.x % WS == 0)
            log->wave[log->n++] = (int)(threadIdx.x / WS);
        __syncthreads();
    }
}

static void order_run(order_log *log, fa_emu_order order, uint32_t seed, int waves)
{
    memset(log, 0, sizeof *log);
    REQUIRE(emu_run(order_kernel, log, (unsigned)(waves * WS), 1, order, seed) == FA_EMU_OK);
    REQUIRE(log->n == 8 * waves);
}

TEST_CASE("wave_order_forward_reverse_seeded")
{
    static order_log a, b;
    const int waves = 6;
    order_run(&a, FA_EMU_ORDER_FORWARD, 0, waves);
    for (int i = 0; i < a.n; ++i)
        REQUIRE(a.wave[i] == i % waves);
    order_run(&a, FA_EMU_ORDER_REVERSE, 0, waves);
    for (int i = 0; i < a.n; ++i)
        REQUIRE(a.wave[i] == waves - 1 - i % waves);

    order_run(&a, FA_EMU_ORDER_SEEDED, 42u, waves);
    int distinct_intervals = 0;
    for (int iv = 0; iv < 8; ++iv) {
        int seen = 0;
        for (int w = 0; w < waves; ++w)
            seen |= 1 << a.wave[iv * waves + w];
        REQUIRE(seen == (1 << waves) - 1); // a permutation of the waves
        distinct_intervals += iv > 0 && memcmp(&a.wave[iv * waves], &a.wave[0], waves * sizeof(int)) != 0;
    }
    REQUIRE(distinct_intervals > 0); // the order changes between intervals
    order_run(&b, FA_EMU_ORDER_SEEDED, 42u, waves);
    REQUIRE(memcmp(a.wave, b.wave, sizeof a.wave) == 0); // and is reproducible
    order_run(&b, FA_EMU_ORDER_SEEDED, 43u, waves);
    REQUIRE(memcmp(a.wave, b.wave, sizeof a.wave) != 0);
}

// Wave 0 writes an LDS word that wave 1 reads with no barrier between: right in forward
// order, the 0xFF poison in reverse, which is how a missing barrier shows.
static void missing_barrier_kernel(void *arg)
{
    order_log *log = (order_log *)arg;
    FA_AMD_LDS_ARRAY(lds, 16);
    int *word = (int *)lds;
    if (threadIdx.x == 0)
        *word = 7;
    if (threadIdx.x == (unsigned)WS)
        log->stale = *word != 7;
}

TEST_CASE("missing_barrier_shows_in_reverse_order")
{
    static order_log log;
    REQUIRE(emu_run(missing_barrier_kernel, &log, 2 * WS, 1, FA_EMU_ORDER_FORWARD) == FA_EMU_OK);
    REQUIRE(log.stale == 0);
    REQUIRE(emu_run(missing_barrier_kernel, &log, 2 * WS, 1, FA_EMU_ORDER_REVERSE) == FA_EMU_OK);
    REQUIRE(log.stale == 1);
}

// ---- LDS arena ----

struct lds_case {
    size_t bytes[2];
    unsigned char *base[256][2];
    int poison_ok;
};

// Two declarations; each lane checks its regions are 0xFF where nobody wrote yet.
static void lds_kernel(void *arg)
{
    lds_case *t = (lds_case *)arg;
    FA_AMD_LDS_ARRAY(first, t->bytes[0]);
    FA_AMD_LDS_ARRAY(second, t->bytes[1]);
    const unsigned i = threadIdx.x;
    t->base[i][0] = first;
    t->base[i][1] = second;
    if (i == 0 && (first[t->bytes[0] - 1] != 0xFF || second[0] != 0xFF))
        t->poison_ok = 0;
    __syncthreads();
    if (i == 0)
        first[t->bytes[0] - 1] = 0, second[0] = 0;
}

TEST_CASE("lds_regions_shared_aligned_and_poisoned_per_workgroup")
{
    static lds_case t;
    t.bytes[0] = 1000;
    t.bytes[1] = emu_lds_limit - 1008;
    t.poison_ok = 1;
    REQUIRE(emu_run(lds_kernel, &t, 2 * WS, 3) == FA_EMU_OK); // three workgroups, each fresh
    REQUIRE(t.poison_ok == 1);
    for (int i = 0; i < 2 * WS; ++i) {
        REQUIRE(t.base[i][0] == t.base[0][0]);
        REQUIRE(t.base[i][1] == t.base[0][1]);
    }
    REQUIRE(((uintptr_t)t.base[0][0] % 16 == 0 && (uintptr_t)t.base[0][1] % 16 == 0));
    REQUIRE(t.base[0][0] != t.base[0][1]);
}

TEST_CASE("lds_over_allocation_is_a_named_error")
{
    static lds_case t;
    t.bytes[0] = 1000;
    t.bytes[1] = emu_lds_limit - 1000 + 16;
    REQUIRE(emu_run(lds_kernel, &t, WS) == FA_EMU_ERR_LDS_LIMIT);
    REQUIRE(emu_text_has("LDS over-allocation: LDS #1 of 64552 bytes brings the workgroup to 65552 bytes, limit 65536"));
    t.bytes[0] = emu_lds_limit + 1;
    REQUIRE(emu_run(lds_kernel, &t, WS) == FA_EMU_ERR_LDS_LIMIT);
    t.bytes[0] = 16;
    t.bytes[1] = emu_lds_limit - 16; // exactly the limit
    REQUIRE(emu_run(lds_kernel, &t, WS) == FA_EMU_OK);
}

// An LDS object (FA_AMD_LDS_OBJECT, the combine's kind) from the same arena as the
// arrays: one per workgroup, shared by its lanes, 0xFF-poisoned afresh for each
// workgroup, and counted against the limit with the array declared after it.
struct lds_object {
    float weights[4];
    int slots[60];
};

struct lds_object_case {
    size_t array_bytes;
    const lds_object *addr[256];
    int poison_ok;
};

static void lds_object_kernel(void *arg)
{
    lds_object_case *t = (lds_object_case *)arg;
    FA_AMD_LDS_OBJECT(lds_object, obj);
    FA_AMD_LDS_ARRAY(after, t->array_bytes);
    (void)after;
    const unsigned i = threadIdx.x;
    t->addr[i] = &obj;
    if (i == 0 && (obj.slots[59] != -1 || !(obj.weights[0] != obj.weights[0]))) // -1 and NaN
        t->poison_ok = 0;
    __syncthreads();
    if (i == 0)
        obj.slots[59] = 0, obj.weights[0] = 0.f;
}

TEST_CASE("lds_object_shared_poisoned_and_counted")
{
    static lds_object_case t;
    t.array_bytes = emu_lds_limit - sizeof(lds_object); // exactly the limit
    t.poison_ok = 1;
    REQUIRE(emu_run(lds_object_kernel, &t, 2 * WS, 2) == FA_EMU_OK); // two workgroups, each fresh
    REQUIRE(t.poison_ok == 1);
    for (int i = 0; i < 2 * WS; ++i)
        REQUIRE(t.addr[i] == t.addr[0]);
    REQUIRE((uintptr_t)t.addr[0] % 16 == 0);
    t.array_bytes += 1;
    REQUIRE(emu_run(lds_object_kernel, &t, WS) == FA_EMU_ERR_LDS_LIMIT);
    REQUIRE(emu_text_has("brings the workgroup to 65537 bytes, limit 65536"));
}

static void lds_size_by_lane_kernel(void *)
{
    FA_AMD_LDS_ARRAY(lds, threadIdx.x < 3 ? 64 : 128);
    (void)lds;
}

TEST_CASE("lds_declaration_sizes_must_agree")
{
    REQUIRE(emu_run(lds_size_by_lane_kernel, NULL, WS) == FA_EMU_ERR_LDS_DECL);
    REQUIRE(emu_text_has("lane 3 declares LDS #0 with 128 bytes, the workgroup's has 64"));
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_TEST_ASAN 1
#include <sanitizer/asan_interface.h>
#endif
#endif

#if defined(EMU_TEST_ASAN)
static void lds_overflow_kernel(void *arg)
{
    const int offset = *(const int *)arg;
    FA_AMD_LDS_ARRAY(lds, 256);
    if (threadIdx.x == 1)
        lds[offset] = 1;
}

static void lds_object_overflow_kernel(void *arg)
{
    const int offset = *(const int *)arg;
    FA_AMD_LDS_OBJECT(lds_object, obj);
    if (threadIdx.x == 1)
        ((unsigned char *)&obj)[offset] = 1;
}

// ASan ends the process at its first report, so the kernel runs in a child whose stderr
// comes back through a pipe.
static std::string child_report(void (*kernel)(void *), int arg, int *status)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        emu_run(kernel, &arg, WS);
        _exit(0);
    }
    close(fds[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
        text.append(buf, (size_t)n);
    close(fds[0]);
    REQUIRE(waitpid(pid, status, 0) == pid);
    return text;
}

TEST_CASE("lds_out_of_range_write_caught_by_asan")
{
    int status = 0;
    std::string report = child_report(lds_overflow_kernel, 256, &status); // one byte past the end
    INFO(report);
    REQUIRE(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    REQUIRE(report.find("AddressSanitizer: heap-buffer-overflow") != std::string::npos);
    REQUIRE(report.find("WRITE of size 1") != std::string::npos);
    report = child_report(lds_overflow_kernel, -1, &status); // one byte before the start
    REQUIRE(report.find("AddressSanitizer: heap-buffer-overflow") != std::string::npos);
    report = child_report(lds_overflow_kernel, 255, &status); // the last byte: no report
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    REQUIRE(report.find("AddressSanitizer") == std::string::npos);
    // An LDS object (the combine's kind) is bounded the same way.
    report = child_report(lds_object_overflow_kernel, (int)sizeof(lds_object), &status);
    REQUIRE(report.find("AddressSanitizer: heap-buffer-overflow") != std::string::npos);
    report = child_report(lds_object_overflow_kernel, (int)sizeof(lds_object) - 1, &status);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    REQUIRE(report.find("AddressSanitizer") == std::string::npos);
}

// A lane's frame keeps its redzones across a switch out and back in (the barrier), and
// ASan reports an overflow there as one of that lane's stack.
static void stack_overflow_kernel(void *arg)
{
    volatile char local[32];
    volatile char *at = local; // through a pointer: UBSan's bounds check would report first
    local[0] = 1;
    __syncthreads();
    if (threadIdx.x == 1)
        at[*(const int *)arg] = local[0];
}

TEST_CASE("lane_stack_overflow_after_a_switch_caught_by_asan")
{
    int status = 0;
    std::string report = child_report(stack_overflow_kernel, 32, &status); // one past the end
    INFO(report);
    REQUIRE(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    REQUIRE(report.find("AddressSanitizer: stack-buffer-overflow") != std::string::npos);
    report = child_report(stack_overflow_kernel, 31, &status); // the last byte: no report
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    REQUIRE(report.find("AddressSanitizer") == std::string::npos);
}

// A throw unpoisons the stack ASan believes is current: without the fiber switch
// annotations that is the scheduler's, and ASan warns of false reports to come.
static void throwing_kernel(void *arg)
{
    try {
        throw *(const int *)arg;
    } catch (int) {
    }
}

TEST_CASE("asan_knows_each_fibers_stack")
{
    int status = 0;
    const std::string report = child_report(throwing_kernel, 1, &status);
    INFO(report);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    REQUIRE(report.find("AddressSanitizer") == std::string::npos);
    REQUIRE(report.find("False positive error reports may follow") == std::string::npos);
}
#endif

// ---- launch shape ----

static void empty_kernel(void *) {}

TEST_CASE("launch_must_be_whole_waves")
{
    REQUIRE(emu_run(empty_kernel, NULL, (unsigned)WS + 16) == FA_EMU_ERR_LAUNCH);
    REQUIRE(emu_text_has("are not whole waves"));
    REQUIRE(emu_run(empty_kernel, NULL, 0) == FA_EMU_ERR_LAUNCH);
    REQUIRE(emu_run(empty_kernel, NULL, FA_EMU_MAX_LANES + WS) == FA_EMU_ERR_LAUNCH);
    REQUIRE(emu_run(empty_kernel, NULL, FA_EMU_MAX_LANES) == FA_EMU_OK);
    fa_emu_device dev = emu_device();
    dev.target = 906;
    REQUIRE(fa_emu_launch(&dev, {1, 1, 1}, {64, 1, 1}, empty_kernel, NULL) == FA_EMU_ERR_LAUNCH);
}

TEST_CASE("order_names_parse")
{
    REQUIRE(fa_emu_parse_order("forward") == FA_EMU_ORDER_FORWARD);
    REQUIRE(fa_emu_parse_order("reverse") == FA_EMU_ORDER_REVERSE);
    REQUIRE(fa_emu_parse_order("seeded") == FA_EMU_ORDER_SEEDED);
    REQUIRE(fa_emu_parse_order("backward") == -1);
}
