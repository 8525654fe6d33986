/*
 * fa_emu_kernel.h - what a kernel handle of the emulated AMD device points at (test-only,
 * issue 15): the kernel's name and an entry that runs it on one lane from the launch's
 * argument block. The handle of a HIP build is the kernel's host stub; the runtime table
 * (fa_emu_runtime.cpp) sees only `void **args`, and every kernel takes one struct by
 * value, so the shim (hip/hip_runtime.h) makes each handle a descriptor whose entry
 * copies that struct into the lane's own frame (research note 3.1).
 */
#ifndef FA_EMU_KERNEL_H
#define FA_EMU_KERNEL_H

struct fa_emu_kernel {
    const char *name;
    void (*entry)(void *arg); /* arg: the kernel's argument struct */
};

#endif /* FA_EMU_KERNEL_H */
