/*
 * fa_emu.cpp - the emulated AMD device's scheduler: fibers for the lanes of one
 * workgroup (a register switch of their own on x86-64, ucontext elsewhere), the
 * wave-wide collective points, the workgroup barriers, the LDS arena, and the named
 * errors of fa_emu.h. Design: docs/research/issue15_emulator.md
 * 3.2 (fibers), 3.3 (collectives and their errors), 3.5 (LDS and wave order).
 *
 * Lanes run to their next collective point (a wave op, a barrier, or the end of the
 * kernel). A barrier interval runs one whole wave at a time, in the device's wave order,
 * so a read of another wave's LDS data without a barrier in between sees different data
 * in the forward and the reverse order.
 */
#include "fa_emu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FA_EMU_ASAN 1
#endif
#endif

#if defined(FA_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* Every fiber switch tells ASan which stack comes next ([ASAN] in the research note),
 * else its stack checks see frames of the wrong fiber. Without ASan there is nothing to
 * tell. */
static void switch_begin(void **fake_save, const void *bottom, size_t size)
{
#if defined(FA_EMU_ASAN)
    __sanitizer_start_switch_fiber(fake_save, bottom, size);
#else
    (void)fake_save, (void)bottom, (void)size;
#endif
}
static void switch_end(void *fake, const void **bottom_old, size_t *size_old)
{
#if defined(FA_EMU_ASAN)
    __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
    (void)fake, (void)bottom_old, (void)size_old;
#endif
}
static void stack_unpoison(void *stack, size_t size)
{
#if defined(FA_EMU_ASAN)
    __asan_unpoison_memory_region(stack, size);
#else
    (void)stack, (void)size;
#endif
}

/* ---- the context switch ----
 *
 * A fiber is a stack and the place its suspended state is kept. With ucontext, glibc's
 * swapcontext makes a sigprocmask system call at every switch and ASan intercepts
 * makecontext and swapcontext (warning that it does not fully support them); a split-KV
 * forward took four times as long as with the switch below (research note, step 4). On
 * x86-64 the switch is therefore our own: push the SysV callee-saved registers and the
 * SSE/x87 control words, swap stack pointers, pop. The switch_begin/switch_end
 * annotations around every switch tell ASan which stack runs. Other architectures keep
 * ucontext. */
#if defined(__x86_64__)
struct fiber {
    void *sp; /* the suspended fiber's stack pointer: its saved registers lie there */
};

extern "C" void fa_emu_fiber_switch(void **save_sp, void *next_sp);
__asm__(".pushsection .text\n"
        ".globl fa_emu_fiber_switch\n"
        ".hidden fa_emu_fiber_switch\n"
        ".type fa_emu_fiber_switch, @function\n"
        "fa_emu_fiber_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size fa_emu_fiber_switch, .-fa_emu_fiber_switch\n"
        ".popsection\n");

/* A fresh fiber's stack as fa_emu_fiber_switch leaves a suspended one: the control
 * words, six zeroed registers, and entry as the return address, placed so that entry
 * starts with the stack alignment of a called function (rsp + 8 a multiple of 16).
 * entry never returns: it ends by switching away. */
static void fiber_start(struct fiber *f, unsigned char *stack, size_t size, void (*entry)(void))
{
    uint64_t *top = (uint64_t *)((uintptr_t)(stack + size) & ~(uintptr_t)15);
    uint64_t *sp = top - 9;
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = (uint64_t)mxcsr | (uint64_t)fpucw << 32;
    for (int r = 1; r <= 6; ++r)
        sp[r] = 0;
    sp[7] = (uint64_t)(uintptr_t)entry;
    sp[8] = 0; /* entry's own return address: none */
    f->sp = sp;
}

static void fiber_switch(struct fiber *from, struct fiber *to) { fa_emu_fiber_switch(&from->sp, to->sp); }
#else
struct fiber {
    ucontext_t uc;
};

static void fiber_start(struct fiber *f, unsigned char *stack, size_t size, void (*entry)(void))
{
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = stack;
    f->uc.uc_stack.ss_size = size;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, entry, 0);
}

static void fiber_switch(struct fiber *from, struct fiber *to) { swapcontext(&from->uc, &to->uc); }
#endif

/* ASan enlarges frames; d256's fp32 accumulators are 1-2 KiB per lane (note 3.2). */
#define FA_EMU_STACK_BYTES (256u * 1024u)
#define FA_EMU_MAX_LDS_DECLS 8
#define FA_EMU_TEXT_BYTES 1024

enum lane_state { LANE_READY, LANE_WAVE_OP, LANE_BARRIER, LANE_EXITED, LANE_FAILED };

struct lane {
    struct fiber fib;
    int started;
    enum lane_state state;
    struct fa_emu_dim3 tid;
    /* The wave op this lane waits at, and how many it has reached (that one included). */
    const struct fa_emu_wave_op *op;
    unsigned op_count;
    const void *op_in;
    void *op_out;
    /* The barrier this lane waits at, likewise counted. */
    int bar_any, bar_pred, bar_result;
    unsigned bar_count;
    unsigned lds_decls;
};

struct lds_region {
    unsigned char *base;
    size_t bytes;
};

struct workgroup {
    const struct fa_emu_device *dev;
    struct fa_emu_dim3 grid, block, bidx;
    void (*kernel)(void *);
    void *arg;
    int n_lanes, n_waves;
    struct fiber sched;
    void *sched_fake;
    const void *sched_bottom;
    size_t sched_size;
    struct lds_region lds[FA_EMU_MAX_LDS_DECLS];
    int n_lds;
    size_t lds_total;
};

static struct workgroup g_wg;
static struct lane g_lanes[FA_EMU_MAX_LANES];
static struct lane *g_cur;
/* Fiber stacks live for the process: a launch reuses those of the previous ones. */
static unsigned char *g_stacks[FA_EMU_MAX_LANES];
/* 1 when the last lane on the stack ran its kernel to the end: every frame then cleared
 * its own redzones on return, so the stack's shadow is clean without clearing it again
 * (32 KiB of shadow per lane and workgroup: it was a third of a launch's time). */
static unsigned char g_stack_clean[FA_EMU_MAX_LANES];
/* ASan's fake stack (detect_stack_use_after_return, on by default) of the last lane that
 * ran its kernel to the end on each stack, handed to the next lane there: like a thread
 * calling its next function. Dropping it at every exit cost an mmap, its page faults and
 * a munmap per lane and workgroup. */
static void *g_fake_stacks[FA_EMU_MAX_LANES];
static int g_err;
static char g_text[FA_EMU_TEXT_BYTES];

static int lane_index(const struct lane *ln) { return (int)(ln - g_lanes); }

/* ---- errors ---- */

const char *fa_emu_error_name(int err)
{
    switch (err) {
    case FA_EMU_OK: return "ok";
    case FA_EMU_ERR_LAUNCH: return "bad launch shape";
    case FA_EMU_ERR_DIVERGENT_WAVE_OP: return "divergent wave op";
    case FA_EMU_ERR_PARTIAL_BARRIER: return "partial barrier";
    case FA_EMU_ERR_MIXED_BARRIER: return "mixed barrier";
    case FA_EMU_ERR_LDS_LIMIT: return "LDS over-allocation";
    case FA_EMU_ERR_LDS_DECL: return "LDS declaration mismatch";
    case FA_EMU_ERR_WRONG_TARGET: return "instruction of another target";
    case FA_EMU_ERR_WMMA_COPIES: return "WMMA operand copies differ";
    case FA_EMU_ERR_BPERMUTE_ADDR: return "bpermute address";
    }
    return "unknown emulator error";
}

const char *fa_emu_error_text(void) { return g_text; }

static void lane_yield(struct lane *ln, enum lane_state state);

void fa_emu_fail(int err, const char *fmt, ...)
{
    if (!g_err) {
        g_err = err;
        int n = snprintf(g_text, sizeof g_text, "%s: ", fa_emu_error_name(err));
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_text + n, sizeof g_text - (size_t)n, fmt, ap);
        va_end(ap);
    }
    if (g_cur)
        lane_yield(g_cur, LANE_FAILED);
}

/* "at bpermute #12", "at __syncthreads #3", "exited". */
static void describe_lane(const struct lane *ln, char *buf, size_t n)
{
    if (ln->state == LANE_WAVE_OP)
        snprintf(buf, n, "at %s #%u", ln->op->name, ln->op_count);
    else if (ln->state == LANE_BARRIER)
        snprintf(buf, n, "at %s #%u", ln->bar_any ? "__syncthreads_or" : "__syncthreads", ln->bar_count);
    else
        snprintf(buf, n, "exited");
}

/* Lanes [first, end) as runs of equal state: "lanes 0-31 at bpermute #1, lanes 32-63 exited". */
static void describe_lanes(int first, int end, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = first; i < end && used < n;) {
        char what[128], next[128];
        describe_lane(&g_lanes[i], what, sizeof what);
        int j = i + 1;
        for (; j < end; ++j) {
            describe_lane(&g_lanes[j], next, sizeof next);
            if (strcmp(what, next) != 0)
                break;
        }
        used += (size_t)snprintf(out + used, n - used, "%slanes %d-%d %s", i == first ? "" : ", ", i, j - 1, what);
        i = j;
    }
}

/* ---- fibers ---- */

static unsigned char *lane_stack(int i)
{
    if (!g_stacks[i]) {
        long page = sysconf(_SC_PAGESIZE);
        void *p = mmap(NULL, FA_EMU_STACK_BYTES + (size_t)page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("fa_emu: fiber stack");
            abort();
        }
        /* The lowest page stays inaccessible: an overflowing fiber faults, not corrupts. */
        mprotect(p, (size_t)page, PROT_NONE);
        g_stacks[i] = (unsigned char *)p + page;
    }
    /* A lane that ended in an error, or whose workgroup did, left its frames' redzones
     * poisoned. */
    if (!g_stack_clean[i])
        stack_unpoison(g_stacks[i], FA_EMU_STACK_BYTES);
    g_stack_clean[i] = 0;
    return g_stacks[i];
}

static void lane_main(void)
{
    struct lane *ln = g_cur;
    const int i = lane_index(ln);
    void *fake = g_fake_stacks[i];
    g_fake_stacks[i] = NULL;
    switch_end(fake, &g_wg.sched_bottom, &g_wg.sched_size);
    g_wg.kernel(g_wg.arg);
    ln->state = LANE_EXITED;
    g_stack_clean[i] = 1;
    switch_begin(&g_fake_stacks[i], g_wg.sched_bottom, g_wg.sched_size);
    fiber_switch(&ln->fib, &g_wg.sched);
}

static void lane_yield(struct lane *ln, enum lane_state state)
{
    void *fake = NULL;
    ln->state = state;
    switch_begin(&fake, g_wg.sched_bottom, g_wg.sched_size);
    fiber_switch(&ln->fib, &g_wg.sched);
    switch_end(fake, NULL, NULL);
}

/* Runs lane i until it blocks, exits or fails. */
static void lane_run(int i)
{
    struct lane *ln = &g_lanes[i];
    if (!ln->started) {
        fiber_start(&ln->fib, lane_stack(i), FA_EMU_STACK_BYTES, lane_main);
        ln->started = 1;
    }
    g_cur = ln;
    switch_begin(&g_wg.sched_fake, g_stacks[i], FA_EMU_STACK_BYTES);
    fiber_switch(&g_wg.sched, &ln->fib);
    switch_end(g_wg.sched_fake, NULL, NULL);
    g_cur = NULL;
}

/* ---- lanes' view ---- */

static struct lane *current_lane(const char *what)
{
    if (!g_cur) {
        fprintf(stderr, "fa_emu: %s called outside an emulated kernel\n", what);
        abort();
    }
    return g_cur;
}

struct fa_emu_dim3 fa_emu_thread_idx(void) { return current_lane("threadIdx")->tid; }
struct fa_emu_dim3 fa_emu_block_idx(void) { return (void)current_lane("blockIdx"), g_wg.bidx; }
struct fa_emu_dim3 fa_emu_block_dim(void) { return (void)current_lane("blockDim"), g_wg.block; }
struct fa_emu_dim3 fa_emu_grid_dim(void) { return (void)current_lane("gridDim"), g_wg.grid; }
int fa_emu_target(void) { return g_wg.dev->target; }
static int target_wave_size(int target) { return target == 942 ? 64 : 32; }
int fa_emu_wave_size(void) { return target_wave_size(g_wg.dev->target); }

void fa_emu_wave_collective(const struct fa_emu_wave_op *op, const void *in, void *out)
{
    struct lane *ln = current_lane(op->name);
    ln->op = op;
    ln->op_count++;
    ln->op_in = in;
    ln->op_out = out;
    lane_yield(ln, LANE_WAVE_OP);
}

int fa_emu_barrier(int any, int predicate)
{
    struct lane *ln = current_lane("__syncthreads");
    ln->bar_any = any;
    ln->bar_pred = predicate != 0;
    ln->bar_count++;
    lane_yield(ln, LANE_BARRIER);
    return ln->bar_result;
}

/* The k-th declaration a lane reaches is the workgroup's k-th region; the first lane to
 * reach it allocates it. One malloc per declaration, exactly sized: ASan's redzones then
 * sit right after (and before) every region. */
void *fa_emu_lds_array(size_t bytes)
{
    struct lane *ln = current_lane("FA_AMD_LDS_ARRAY");
    unsigned k = ln->lds_decls++;
    if (k < (unsigned)g_wg.n_lds) {
        if (g_wg.lds[k].bytes != bytes)
            fa_emu_fail(FA_EMU_ERR_LDS_DECL, "lane %d declares LDS #%u with %zu bytes, the workgroup's has %zu",
                        lane_index(ln), k, bytes, g_wg.lds[k].bytes);
        return g_wg.lds[k].base;
    }
    if (k >= FA_EMU_MAX_LDS_DECLS)
        fa_emu_fail(FA_EMU_ERR_LDS_DECL, "more than %d LDS declarations", FA_EMU_MAX_LDS_DECLS);
    size_t total = g_wg.lds_total + bytes;
    if (total > g_wg.dev->lds_limit)
        fa_emu_fail(FA_EMU_ERR_LDS_LIMIT, "LDS #%u of %zu bytes brings the workgroup to %zu bytes, limit %zu", k,
                    bytes, total, g_wg.dev->lds_limit);
    void *p = NULL;
    if (posix_memalign(&p, 16, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "fa_emu: no host memory for %zu bytes of LDS\n", bytes);
        abort();
    }
    /* 0xFF bytes: NaN as fp16, bf16 and fp32, so a read of unwritten LDS shows. */
    memset(p, 0xFF, bytes);
    g_wg.lds[k].base = (unsigned char *)p;
    g_wg.lds[k].bytes = bytes;
    g_wg.n_lds = (int)k + 1;
    g_wg.lds_total = total;
    return p;
}

/* ---- the scheduler ---- */

/* A 32-bit mix of seed and interval, so every barrier interval gets its own order. */
static uint32_t order_hash(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static void wave_order(int *order, int n, unsigned interval)
{
    for (int w = 0; w < n; ++w)
        order[w] = g_wg.dev->order == FA_EMU_ORDER_REVERSE ? n - 1 - w : w;
    if (g_wg.dev->order != FA_EMU_ORDER_SEEDED)
        return;
    uint32_t s = order_hash(g_wg.dev->seed ^ order_hash(interval + 1u));
    for (int w = n - 1; w > 0; --w) {
        s = order_hash(s);
        int j = (int)(s % (uint32_t)(w + 1));
        int t = order[w];
        order[w] = order[j];
        order[j] = t;
    }
}

/* Executes the wave op every lane of wave w waits at; a named error if some lane waits
 * elsewhere or has exited. (Every lane of a wave takes part in every wave op it ran, so
 * their op counts are equal; the counts only make the message say which op.) */
static void wave_op_execute(int w)
{
    const int ws = fa_emu_wave_size(), first = w * ws;
    const struct lane *l0 = &g_lanes[first];
    const void *in[64];
    void *out[64];
    for (int i = 0; i < ws; ++i) {
        const struct lane *ln = &g_lanes[first + i];
        if (ln->state != LANE_WAVE_OP || ln->op != l0->op) {
            char lanes[FA_EMU_TEXT_BYTES];
            describe_lanes(first, first + ws, lanes, sizeof lanes);
            fa_emu_fail(FA_EMU_ERR_DIVERGENT_WAVE_OP, "wave %d: %s", w, lanes);
            return;
        }
        in[i] = ln->op_in;
        out[i] = ln->op_out;
    }
    l0->op->exec(ws, in, out);
    for (int i = 0; i < ws; ++i)
        g_lanes[first + i].state = LANE_READY;
}

/* Runs wave w until each lane is at a barrier or has exited; 0, or 1 on an error. */
static int wave_run(int w)
{
    const int ws = fa_emu_wave_size(), first = w * ws;
    for (;;) {
        int at_op = 0;
        for (int i = first; i < first + ws; ++i) {
            if (g_lanes[i].state == LANE_READY)
                lane_run(i);
            if (g_err)
                return 1;
            at_op |= g_lanes[i].state == LANE_WAVE_OP;
        }
        if (!at_op)
            return 0;
        wave_op_execute(w);
        if (g_err)
            return 1;
    }
}

/* Every lane is at a barrier or has exited: 1 when all have exited, 0 when the barrier
 * released them, -1 on an error. */
static int barrier_resolve(void)
{
    int exited = 0, or_all = 0;
    for (int i = 0; i < g_wg.n_lanes; ++i) {
        exited += g_lanes[i].state == LANE_EXITED;
        or_all |= g_lanes[i].state == LANE_BARRIER && g_lanes[i].bar_pred;
    }
    if (exited == g_wg.n_lanes)
        return 1;
    char lanes[FA_EMU_TEXT_BYTES];
    if (exited) {
        describe_lanes(0, g_wg.n_lanes, lanes, sizeof lanes);
        fa_emu_fail(FA_EMU_ERR_PARTIAL_BARRIER, "%s", lanes);
        return -1;
    }
    for (int i = 1; i < g_wg.n_lanes; ++i)
        if (g_lanes[i].bar_any != g_lanes[0].bar_any) {
            describe_lanes(0, g_wg.n_lanes, lanes, sizeof lanes);
            fa_emu_fail(FA_EMU_ERR_MIXED_BARRIER, "%s", lanes);
            return -1;
        }
    for (int i = 0; i < g_wg.n_lanes; ++i) {
        g_lanes[i].bar_result = or_all;
        g_lanes[i].state = LANE_READY;
    }
    return 0;
}

static void workgroup_start(void)
{
    const struct fa_emu_dim3 b = g_wg.block;
    for (int i = 0; i < g_wg.n_lanes; ++i) {
        struct lane *ln = &g_lanes[i];
        memset(ln, 0, sizeof *ln);
        ln->state = LANE_READY;
        ln->tid.x = (unsigned)i % b.x;
        ln->tid.y = (unsigned)i / b.x % b.y;
        ln->tid.z = (unsigned)i / (b.x * b.y);
    }
    g_wg.n_lds = 0;
    g_wg.lds_total = 0;
}

static void workgroup_end(void)
{
    for (int k = 0; k < g_wg.n_lds; ++k)
        free(g_wg.lds[k].base);
    g_wg.n_lds = 0;
}

static void workgroup_run(void)
{
    int order[FA_EMU_MAX_LANES / 32];
    workgroup_start();
    for (unsigned interval = 0;; ++interval) {
        wave_order(order, g_wg.n_waves, interval);
        for (int w = 0; w < g_wg.n_waves; ++w)
            if (wave_run(order[w]))
                goto done;
        if (barrier_resolve() != 0)
            goto done;
    }
done:
    workgroup_end();
}

static int launch_check(const struct fa_emu_device *dev, struct fa_emu_dim3 block)
{
    const unsigned long n = (unsigned long)block.x * block.y * block.z;
    const int ws = target_wave_size(dev->target);
    if (dev->target != 942 && dev->target != 1100 && dev->target != 1201)
        fa_emu_fail(FA_EMU_ERR_LAUNCH, "target %d (942, 1100 or 1201)", dev->target);
    else if (n == 0 || n > FA_EMU_MAX_LANES)
        fa_emu_fail(FA_EMU_ERR_LAUNCH, "%lu lanes per workgroup (1-%d)", n, FA_EMU_MAX_LANES);
    else if (n % (unsigned)ws)
        fa_emu_fail(FA_EMU_ERR_LAUNCH, "%lu lanes are not whole waves of %d", n, ws);
    return g_err;
}

int fa_emu_launch(const struct fa_emu_device *dev, struct fa_emu_dim3 grid, struct fa_emu_dim3 block,
                  void (*kernel)(void *), void *arg)
{
    g_err = FA_EMU_OK;
    g_text[0] = '\0';
    if (launch_check(dev, block) == FA_EMU_OK) {
        g_wg.dev = dev;
        g_wg.grid = grid;
        g_wg.block = block;
        g_wg.kernel = kernel;
        g_wg.arg = arg;
        g_wg.n_lanes = (int)(block.x * block.y * block.z);
        g_wg.n_waves = g_wg.n_lanes / target_wave_size(dev->target);
        for (unsigned z = 0; z < grid.z && !g_err; ++z)
            for (unsigned y = 0; y < grid.y && !g_err; ++y)
                for (unsigned x = 0; x < grid.x && !g_err; ++x) {
                    g_wg.bidx.x = x, g_wg.bidx.y = y, g_wg.bidx.z = z;
                    workgroup_run();
                }
    }
    if (g_err)
        fprintf(stderr, "fa_emu: %s\n", g_text);
    return g_err;
}

int fa_emu_parse_order(const char *text)
{
    if (!strcmp(text, "forward"))
        return FA_EMU_ORDER_FORWARD;
    if (!strcmp(text, "reverse"))
        return FA_EMU_ORDER_REVERSE;
    if (!strcmp(text, "seeded"))
        return FA_EMU_ORDER_SEEDED;
    return -1;
}
