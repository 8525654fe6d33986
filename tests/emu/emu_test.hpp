// emu_test.hpp - what the emulator's tests share: the emulated device of this build's
// target (FA_EMU_TARGET: one test executable per target) and a one-line launch.
#ifndef FA_EMU_TEST_HPP
#define FA_EMU_TEST_HPP

#include <string.h>

#include "fa_amd_isa.h"

// docs/amd.md's verified LDS per workgroup, the same on the three targets.
static const size_t emu_lds_limit = 65536;

static fa_emu_device emu_device(fa_emu_order order = FA_EMU_ORDER_FORWARD, uint32_t seed = 0)
{
    fa_emu_device dev = {FA_EMU_TARGET, emu_lds_limit, order, seed};
    return dev;
}

// One workgroup of `lanes` lanes unless told otherwise.
static int emu_run(void (*kernel)(void *), void *arg, unsigned lanes, unsigned blocks = 1,
                   fa_emu_order order = FA_EMU_ORDER_FORWARD, uint32_t seed = 0)
{
    fa_emu_device dev = emu_device(order, seed);
    return fa_emu_launch(&dev, {blocks, 1, 1}, {lanes, 1, 1}, kernel, arg);
}

static bool emu_text_has(const char *needle) { return strstr(fa_emu_error_text(), needle) != NULL; }

#endif // FA_EMU_TEST_HPP
