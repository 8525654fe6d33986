// emu_api_checks.hpp - what the tests of flashattn's public API on the emulated AMD
// device share (tests/emu/test_emu_api.cpp, test_emu_sweep.cpp): a context on the
// emulator, the wave order for one scope, and the forward and backward of a test case
// (tests/cpu_case.hpp) run through fa_fwd / fa_bwd and checked against the fp64 oracle
// with the CPU tests' tolerance rule. Device memory is host memory on the emulator, so
// the tensors are host tensors. Compiled once per wave size (FA_EMU_WAVE_SIZE) and linked
// into each target's test executable, which names its part (emu_arch.cpp).
#ifndef FA_EMU_API_CHECKS_HPP
#define FA_EMU_API_CHECKS_HPP

#include <string>

#include "cpu_case.hpp"
#include "flashattn.h"
#include "oracle.hpp"

namespace fa_emu_test {

// The emulated part's arch row ("gfx942"), defined per test executable (emu_arch.cpp).
extern const char *const emulated_arch;

struct EmuContext {
    fa_context *ctx = nullptr;
    EmuContext();
    ~EmuContext();
};

// FA_EMU_ORDER for the scope of one run (the runtime reads it at every launch), the
// caller's own restored after it.
struct WaveOrder {
    std::string saved;
    bool had;
    explicit WaveOrder(const char *order);
    ~WaveOrder();
};

// An environment variable for one scope (the API reads the tile overrides, the runtime
// FA_EMU_LDS_LIMIT, at every call), unset again after it.
struct ScopedEnv {
    const char *name;
    ScopedEnv(const char *n, const std::string &value);
    ~ScopedEnv();
};

bool contains(const std::string &text, const char *part);

// fa_fwd of r into r.out and r.lse; on failure the context's message goes to the
// caller's next check.
fa_status forward(const EmuContext &cx, fa_test::Run &r, const fa_params &params);

// r.out and r.lse against the fp64 oracle: twice what a naive implementation in the
// dtype is off by, plus 1e-5.
void check_against_oracle(const fa_test::Run &r, const fa_params &params);

// The forward of c (num_splits as fa_params takes it) on the emulator: its status, and
// when FA_OK every output element written and the result within the oracle's bound. The
// plan it ran goes to *plan when plan is not NULL.
fa_status check_forward(const fa_test::Case &c, int num_splits = 0, fa_plan *plan = nullptr);

// A backward's inputs (out and lse from the CPU backend's forward, as in training) and
// its poisoned gradients.
struct BackwardRun {
    fa_test::Run r;
    fa_oracle::HostTensor dout, dq, dk, dv;
};

void prepare_backward(const fa_test::Case &c, int deterministic, BackwardRun &b);
fa_status run_backward(const EmuContext &cx, BackwardRun &b);

// The backward of c on the emulator: its status, and when FA_OK every gradient element
// written and each gradient within 3x a naive backward's error plus 1e-5 of the fp64
// reference (the CPU tests' rule).
fa_status check_backward(const fa_test::Case &c, int deterministic);

} // namespace fa_emu_test

#endif // FA_EMU_API_CHECKS_HPP
