// test_emu_isa.cpp - the emulated instructions of this build's target: the matrix
// instruction against a plain fp64 matmul on random data, its operands placed and its
// result read through AMD's Matrix Instruction Calculator's own tables (tests/emu/calc),
// not through the emulator's equations, so a wrong equation there cannot agree with
// itself; bpermute and ballot against a reference; and each instruction's misuse error.
#include <catch2/catch.hpp>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <random>

#include "emu_test.hpp"

// One lane's part of a matrix instruction on 16-bit element bits and fp32 accumulators.
typedef void (*mma_issue_fn)(int bf16, const uint16_t *a, const uint16_t *b, const float *c, float *d);

#define MMA_ISSUE(name, frag_f16, frag_bf16, acc_vec, mma_f16, mma_bf16)              \
    static void name(int bf16, const uint16_t *a, const uint16_t *b, const float *c, float *d) \
    {                                                                                  \
        acc_vec acc;                                                                   \
        memcpy(&acc, c, sizeof acc);                                                   \
        if (bf16) {                                                                    \
            frag_bf16 va, vb;                                                          \
            memcpy(&va, a, sizeof va);                                                 \
            memcpy(&vb, b, sizeof vb);                                                 \
            acc = mma_bf16(va, vb, acc);                                               \
        } else {                                                                       \
            frag_f16 va, vb;                                                           \
            memcpy(&va, a, sizeof va);                                                 \
            memcpy(&vb, b, sizeof vb);                                                 \
            acc = mma_f16(va, vb, acc);                                                \
        }                                                                              \
        memcpy(d, &acc, sizeof acc);                                                   \
    }

// A matrix instruction of this target: D (dim x dim) = A (dim x kdim) B + C, its
// calculator tables (tests/emu/calc/<calc>_<dtype>_<A|B|D>.csv), 16-bit elements of A
// (and B) and fp32 registers of D per lane, and how often the tables hold each element.
struct mma_kind {
    const char *calc;
    int dim, kdim, elems, regs, copies;
    mma_issue_fn issue;
};

#if FA_AMD_PRIM == FA_AMD_MFMA16
MMA_ISSUE(issue_mfma16, fa_emu_f16x4, fa_emu_i16x4, fa_emu_f32x4, fa_isa_mfma16_f16, fa_isa_mfma16_bf16)
MMA_ISSUE(issue_mfma32, fa_emu_f16x4, fa_emu_i16x4, fa_emu_f32x16, fa_isa_mfma32_f16, fa_isa_mfma32_bf16)
static const mma_kind k_primary = {"cdna3", 16, 16, 4, 4, 1, issue_mfma16};
static const mma_kind k_mfma32 = {"cdna3_32x32x8", 32, 8, 4, 16, 1, issue_mfma32};
// gfx90a's forms of the same two (..16x16x16f16 / bf16_1k, ..32x32x8f16 / bf16_1k), which
// its device pass selects too (src/hip/fa_amd_isa.h): the emulated instructions against
// CDNA2's tables, so the emulated gfx90a's kernels rest on its own calculator output.
static const mma_kind k_cdna2_mfma16 = {"cdna2", 16, 16, 4, 4, 1, issue_mfma16};
static const mma_kind k_cdna2_mfma32 = {"cdna2_32x32x8", 32, 8, 4, 16, 1, issue_mfma32};
#elif FA_AMD_PRIM == FA_AMD_WMMA_GFX11
MMA_ISSUE(issue_wmma11, fa_emu_f16x16, fa_emu_i16x16, fa_emu_f32x8, fa_isa_wmma11_f16, fa_isa_wmma11_bf16)
static const mma_kind k_primary = {"rdna3", 16, 16, 16, 8, 2, issue_wmma11}; // RDNA3 holds A and B twice
#else
MMA_ISSUE(issue_wmma12, fa_emu_f16x8, fa_emu_i16x8, fa_emu_f32x8, fa_isa_wmma12_f16, fa_isa_wmma12_bf16)
static const mma_kind k_primary = {"rdna4", 16, 16, 8, 8, 1, issue_wmma12};
#endif

// Which matrix element each (lane, register half) holds: one of the calculator's tables.
struct calc_map {
    int lanes, elems;
    int row[64][16], col[64][16];
};

// Rows "lane,X[r][c],X[r][c],..." of one table; the other lines (architecture,
// instruction, header) start with a letter.
static void calc_load(calc_map *m, const char *calc, const char *dtype, char matrix)
{
    char path[512], line[1024];
    snprintf(path, sizeof path, "%s/%s_%s_%c.csv", FA_EMU_CALC_DIR, calc, dtype, matrix);
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    memset(m, 0, sizeof *m);
    while (fgets(line, sizeof line, f)) {
        if (line[0] < '0' || line[0] > '9')
            continue;
        char *p;
        const int lane = (int)strtol(line, &p, 10);
        int e = 0;
        for (; (p = strchr(p, '[')) != NULL && e < 16; ++e) {
            m->row[lane][e] = (int)strtol(p + 1, &p, 10);
            m->col[lane][e] = (int)strtol(p + 2, &p, 10);
        }
        m->lanes = lane + 1;
        m->elems = e;
    }
    fclose(f);
}

// The table covers each element of a rows x cols matrix `copies` times (else the parse is
// wrong and the matmul check would prove nothing).
static void calc_check_cover(const calc_map &m, int elems, int copies, int rows, int cols)
{
    int seen[32][32] = {};
    REQUIRE(m.lanes == FA_AMD_WAVE_SIZE);
    REQUIRE(m.elems == elems);
    for (int l = 0; l < m.lanes; ++l)
        for (int e = 0; e < m.elems; ++e) {
            REQUIRE((m.row[l][e] < rows && m.col[l][e] < cols));
            seen[m.row[l][e]][m.col[l][e]]++;
        }
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j)
            REQUIRE(seen[i][j] == copies);
}

struct mma_case {
    const mma_kind *kind;
    calc_map a, b, d;
    int bf16;
    uint16_t A[32][32], B[32][32]; // 16-bit element bits
    float C[32][32], D[32][32];
    int corrupt_lane;              // flips one bit of this lane's A element 1; -1: none
};

// arg: one mma_case per wave of the workgroup.
static void mma_kernel(void *arg)
{
    mma_case *t = (mma_case *)arg + threadIdx.x / FA_AMD_WAVE_SIZE;
    const int l = (int)(threadIdx.x % FA_AMD_WAVE_SIZE);
    uint16_t a[16], b[16];
    float c[16], d[16];
    for (int e = 0; e < t->kind->elems; ++e) {
        a[e] = t->A[t->a.row[l][e]][t->a.col[l][e]];
        b[e] = t->B[t->b.row[l][e]][t->b.col[l][e]];
    }
    if (l == t->corrupt_lane)
        a[1] ^= 1u;
    for (int r = 0; r < t->kind->regs; ++r)
        c[r] = t->C[t->d.row[l][r]][t->d.col[l][r]];
    t->kind->issue(t->bf16, a, b, c, d);
    for (int r = 0; r < t->kind->regs; ++r)
        t->D[t->d.row[l][r]][t->d.col[l][r]] = d[r];
}

static double elem_to_double(uint16_t bits, int bf16)
{
    if (bf16)
        return __uint_as_float((uint32_t)bits << 16);
    _Float16 h;
    memcpy(&h, &bits, sizeof h);
    return (double)h;
}

static uint16_t elem_from_float(float x, int bf16)
{
    if (bf16)
        return (uint16_t)(__float_as_uint(x) >> 16); // truncation: any bf16 value will do
    _Float16 h = (_Float16)x;
    uint16_t bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
}

static void mma_case_init(mma_case *t, const mma_kind *kind, int bf16)
{
    const char *dtype = bf16 ? "bf16" : "f16";
    t->kind = kind;
    calc_load(&t->a, kind->calc, dtype, 'A');
    calc_load(&t->b, kind->calc, dtype, 'B');
    calc_load(&t->d, kind->calc, dtype, 'D');
    calc_check_cover(t->a, kind->elems, kind->copies, kind->dim, kind->kdim);
    calc_check_cover(t->b, kind->elems, kind->copies, kind->kdim, kind->dim);
    calc_check_cover(t->d, kind->regs, 1, kind->dim, kind->dim);
    t->bf16 = bf16;
    t->corrupt_lane = -1;
}

static void mma_case_randomize(mma_case *t, std::mt19937 &rng)
{
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (int i = 0; i < 32; ++i)
        for (int j = 0; j < 32; ++j) {
            t->A[i][j] = elem_from_float(u(rng), t->bf16);
            t->B[i][j] = elem_from_float(u(rng), t->bf16);
            t->C[i][j] = u(rng);
            t->D[i][j] = NAN;
        }
}

// D against C + A·B in fp64: the emulator rounds each exact sum once to fp32, so the
// error is within 2^-24 of the sum of magnitudes; a misplaced element is off by O(1).
static void mma_check(const mma_case &t)
{
    const int dim = t.kind->dim;
    for (int i = 0; i < dim; ++i)
        for (int j = 0; j < dim; ++j) {
            double ref = t.C[i][j], mag = fabs(t.C[i][j]);
            for (int k = 0; k < t.kind->kdim; ++k) {
                const double p = elem_to_double(t.A[i][k], t.bf16) * elem_to_double(t.B[k][j], t.bf16);
                ref += p;
                mag += fabs(p);
            }
            INFO("D[" << i << "][" << j << "] = " << t.D[i][j] << ", fp64 matmul " << ref);
            REQUIRE(fabs(t.D[i][j] - ref) <= ldexp(mag, -22));
        }
}

static void mma_random_trials(const mma_kind *kind, int bf16)
{
    static mma_case t;
    mma_case_init(&t, kind, bf16);
    std::mt19937 rng(1234u + (unsigned)bf16);
    for (int trial = 0; trial < 20; ++trial) {
        mma_case_randomize(&t, rng);
        REQUIRE(emu_run(mma_kernel, &t, FA_AMD_WAVE_SIZE) == FA_EMU_OK);
        mma_check(t);
    }
}

TEST_CASE("matrix_f16_matches_fp64_matmul") { mma_random_trials(&k_primary, 0); }
TEST_CASE("matrix_bf16_matches_fp64_matmul") { mma_random_trials(&k_primary, 1); }
#if FA_AMD_PRIM == FA_AMD_MFMA16
TEST_CASE("matrix_32x32x8_f16_matches_fp64_matmul") { mma_random_trials(&k_mfma32, 0); }
TEST_CASE("matrix_32x32x8_bf16_matches_fp64_matmul") { mma_random_trials(&k_mfma32, 1); }
TEST_CASE("matrix_cdna2_f16_matches_fp64_matmul") { mma_random_trials(&k_cdna2_mfma16, 0); }
TEST_CASE("matrix_cdna2_bf16_matches_fp64_matmul") { mma_random_trials(&k_cdna2_mfma16, 1); }
TEST_CASE("matrix_cdna2_32x32x8_f16_matches_fp64_matmul") { mma_random_trials(&k_cdna2_mfma32, 0); }
TEST_CASE("matrix_cdna2_32x32x8_bf16_matches_fp64_matmul") { mma_random_trials(&k_cdna2_mfma32, 1); }
#endif

// Two waves issue their own products at once; each gets its own result.
TEST_CASE("matrix_op_per_wave")
{
    static mma_case t[2];
    std::mt19937 rng(99u);
    for (int w = 0; w < 2; ++w) {
        mma_case_init(&t[w], &k_primary, 0);
        mma_case_randomize(&t[w], rng);
    }
    REQUIRE(emu_run(mma_kernel, t, 2 * FA_AMD_WAVE_SIZE, 1, FA_EMU_ORDER_REVERSE) == FA_EMU_OK);
    mma_check(t[0]);
    mma_check(t[1]);
}

#if FA_AMD_PRIM == FA_AMD_WMMA_GFX11
// RDNA3: lanes l and l + 16 must hold bitwise-equal copies of A and B (note 2.2, 3.4).
TEST_CASE("wmma11_differing_copies_refused")
{
    static mma_case t;
    mma_case_init(&t, &k_primary, 0);
    std::mt19937 rng(7u);
    mma_case_randomize(&t, rng);
    t.corrupt_lane = 21;
    REQUIRE(emu_run(mma_kernel, &t, 32) == FA_EMU_ERR_WMMA_COPIES);
    REQUIRE(emu_text_has("A element 1"));
    REQUIRE(emu_text_has("lane 21"));
    t.corrupt_lane = 5;
    REQUIRE(emu_run(mma_kernel, &t, 32) == FA_EMU_ERR_WMMA_COPIES);
    REQUIRE(emu_text_has("lane 5"));
}
#endif

// A matrix instruction of another target is refused, not computed in some layout.
static void other_target_kernel(void *)
{
#if FA_AMD_PRIM == FA_AMD_WMMA_GFX12
    (void)fa_emu_wmma11_f16(fa_emu_f16x16{}, fa_emu_f16x16{}, fa_emu_f32x8{});
#else
    (void)fa_emu_wmma12_f16(fa_emu_f16x8{}, fa_emu_f16x8{}, fa_emu_f32x8{});
#endif
}

TEST_CASE("matrix_op_of_other_target_refused")
{
    REQUIRE(emu_run(other_target_kernel, NULL, FA_AMD_WAVE_SIZE) == FA_EMU_ERR_WRONG_TARGET);
    REQUIRE(emu_text_has("instruction of another target"));
}

// ---- ds_bpermute_b32 ----

struct perm_case {
    int addr[2 * 64], v[2 * 64], out[2 * 64];
};

static void bpermute_kernel(void *arg)
{
    perm_case *t = (perm_case *)arg;
    const int i = (int)threadIdx.x;
    t->out[i] = fa_isa_bpermute(t->addr[i], t->v[i]);
}

TEST_CASE("bpermute_gathers_by_byte_address")
{
    static perm_case t;
    const int ws = FA_AMD_WAVE_SIZE;
    const int lane_bits = ws == 64 ? 6 : 5;
    std::mt19937 rng(5u);
    for (int trial = 0; trial < 14; ++trial) {
        for (int i = 0; i < 2 * ws; ++i) {
            // Odd trials: lane ^ mask for every mask (fa_lane_xor's use); even: random lanes.
            const int mask = 1 << (trial / 2 % lane_bits);
            const int src = trial % 2 ? (i % ws) ^ mask : (int)(rng() % (unsigned)ws);
            t.addr[i] = src * 4;
            t.v[i] = (int)rng();
        }
        REQUIRE(emu_run(bpermute_kernel, &t, 2 * ws) == FA_EMU_OK);
        for (int i = 0; i < 2 * ws; ++i) {
            const int wave0 = i / ws * ws; // the source is a lane of the same wave
            REQUIRE(t.out[i] == t.v[wave0 + t.addr[i] / 4]);
        }
    }
}

TEST_CASE("bpermute_bad_address_refused")
{
    static perm_case t;
    const int ws = FA_AMD_WAVE_SIZE;
    for (int i = 0; i < ws; ++i)
        t.addr[i] = 4 * i;
    t.addr[3] = 4 * 3 + 2;
    REQUIRE(emu_run(bpermute_kernel, &t, ws) == FA_EMU_ERR_BPERMUTE_ADDR);
    REQUIRE(emu_text_has("lane 3 gives byte address 14"));
    t.addr[3] = 4 * ws; // one lane past the wave
    REQUIRE(emu_run(bpermute_kernel, &t, ws) == FA_EMU_ERR_BPERMUTE_ADDR);
    t.addr[3] = -4;
    REQUIRE(emu_run(bpermute_kernel, &t, ws) == FA_EMU_ERR_BPERMUTE_ADDR);
    t.addr[3] = 4 * (ws - 1);
    REQUIRE(emu_run(bpermute_kernel, &t, ws) == FA_EMU_OK);
}

// ---- ballot ----

struct ballot_case {
    int pred[2 * 64];
    uint64_t out[2 * 64];
};

static void ballot_kernel(void *arg)
{
    ballot_case *t = (ballot_case *)arg;
    t->out[threadIdx.x] = fa_isa_ballot(t->pred[threadIdx.x]);
}

TEST_CASE("ballot_sets_the_bits_of_true_lanes")
{
    static ballot_case t;
    const int ws = FA_AMD_WAVE_SIZE;
    std::mt19937 rng(11u);
    for (int trial = 0; trial < 10; ++trial) {
        uint64_t want[2] = {0, 0};
        for (int i = 0; i < 2 * ws; ++i) {
            t.pred[i] = trial == 0 ? 0 : (int)(rng() % 3) - 1; // -1, 0, 1: any nonzero is true
            want[i / ws] |= (uint64_t)(t.pred[i] != 0) << (i % ws);
        }
        REQUIRE(emu_run(ballot_kernel, &t, 2 * ws) == FA_EMU_OK);
        for (int i = 0; i < 2 * ws; ++i)
            REQUIRE(t.out[i] == want[i / ws]);
    }
}

TEST_CASE("exp2_is_the_hosts")
{
    REQUIRE(fa_isa_exp2(-INFINITY) == 0.0f);
    REQUIRE(fa_isa_exp2(3.0f) == 8.0f);
    REQUIRE(fa_isa_exp2(-1.0f) == 0.5f);
}
