// emu_arch.cpp - the one part of a test executable of the emulated AMD device that
// differs between targets of one wave size: the part's arch row, FA_EMU_ARCH of the build
// (cmake/FlashattnAmdEmu.cmake), which the API tests expect the plans and device info to
// name.
#include "emu_api_checks.hpp"

const char *const fa_emu_test::emulated_arch = FA_EMU_ARCH;
