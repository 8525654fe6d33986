/*
 * fa_emu.h - the emulated AMD device's execution core (test-only, issue 15): one
 * workgroup at a time, its lanes as cooperatively scheduled fibers, the wave-wide
 * collective points (matrix ops, bpermute, ballot), the workgroup barriers and the LDS
 * arena, each misuse reported as a named error. docs/research/issue15_emulator.md,
 * sections 3.2-3.5, is the design; the instructions themselves live in fa_emu_isa.cpp.
 *
 * One OS thread drives the emulator; a launch runs to completion (or to its first error)
 * before fa_emu_launch returns.
 */
#ifndef FA_EMU_H
#define FA_EMU_H

#include <stddef.h>
#include <stdint.h>

/* The named errors. A launch ends at the first one; fa_emu_error_text says where. */
enum fa_emu_error {
    FA_EMU_OK = 0,
    FA_EMU_ERR_LAUNCH,            /* unknown target, block not whole waves, or too many lanes */
    FA_EMU_ERR_DIVERGENT_WAVE_OP, /* lanes of one wave at different wave ops, or some exited */
    FA_EMU_ERR_PARTIAL_BARRIER,   /* a barrier reached by only part of the workgroup */
    FA_EMU_ERR_MIXED_BARRIER,     /* __syncthreads and __syncthreads_or met at one barrier */
    FA_EMU_ERR_LDS_LIMIT,         /* LDS declared past the device's per-workgroup limit */
    FA_EMU_ERR_LDS_DECL,          /* lanes disagree on the size of one LDS declaration */
    FA_EMU_ERR_WRONG_TARGET,      /* an instruction the emulated target does not have */
    FA_EMU_ERR_WMMA_COPIES,       /* RDNA3 WMMA: lanes l and l + 16 hold different A/B copies */
    FA_EMU_ERR_BPERMUTE_ADDR      /* ds_bpermute byte address unaligned or past the wave */
};

/* Which wave runs first in each barrier interval: a missing barrier between a writer
 * wave and a reader wave shows in one of the orders (research note 3.5). */
enum fa_emu_order { FA_EMU_ORDER_FORWARD, FA_EMU_ORDER_REVERSE, FA_EMU_ORDER_SEEDED };

struct fa_emu_device {
    int target;              /* 942 (gfx942, wave64), 1100 (gfx1100) or 1201 (gfx1201; wave32) */
    size_t lds_limit;        /* bytes of LDS one workgroup may declare */
    enum fa_emu_order order;
    uint32_t seed;           /* FA_EMU_ORDER_SEEDED's permutations */
};

struct fa_emu_dim3 {
    unsigned x, y, z;
};

#define FA_EMU_MAX_LANES 1024

/* Runs kernel(arg) on every lane of every workgroup of the grid; FA_EMU_OK or the first
 * named error. */
int fa_emu_launch(const struct fa_emu_device *dev, struct fa_emu_dim3 grid, struct fa_emu_dim3 block,
                  void (*kernel)(void *), void *arg);
/* The message of the last failed launch ("" after a good one), and an error's name. */
const char *fa_emu_error_text(void);
const char *fa_emu_error_name(int err);
/* "forward", "reverse", "seeded" (FA_EMU_ORDER's values); -1 for anything else. */
int fa_emu_parse_order(const char *text);

/* The running lane's coordinates and wave geometry. */
struct fa_emu_dim3 fa_emu_thread_idx(void);
struct fa_emu_dim3 fa_emu_block_idx(void);
struct fa_emu_dim3 fa_emu_block_dim(void);
struct fa_emu_dim3 fa_emu_grid_dim(void);
int fa_emu_target(void);
int fa_emu_wave_size(void);

/* A wave-wide operation: once every lane of the wave has arrived at the same op, exec
 * runs once with every lane's operands (in) and result slots (out), indexed by lane in
 * the wave. exec reports a misuse through fa_emu_fail. */
struct fa_emu_wave_op {
    const char *name;
    void (*exec)(int wave_size, const void *const *in, void *const *out);
};
void fa_emu_wave_collective(const struct fa_emu_wave_op *op, const void *in, void *out);

/* __syncthreads (any 0) and __syncthreads_or (any 1: returns the OR of every lane's
 * predicate). */
int fa_emu_barrier(int any, int predicate);

/* The workgroup's next LDS declaration for this lane: `bytes` bytes, 16-byte aligned,
 * 0xFF-filled when the workgroup starts, exactly sized so ASan sees any access past it. */
void *fa_emu_lds_array(size_t bytes);

/* Records a named error and ends the launch; called from a lane or from an exec. A lane
 * that calls it does not return from it. */
void fa_emu_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* FA_EMU_H */
