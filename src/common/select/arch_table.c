/*
 * arch_table.c - the per-architecture table of on-chip limits the dispatcher selects
 * tiles from (one row per GPU architecture, plus the CPU), and the conservative row
 * built from a device's reported limits when its architecture is not in the table.
 *
 * Sources, cited per number below as [tag]:
 *  [CUDA-TS]   NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute
 *              Capability" table (KB there means 1024 bytes): threads per block 1024,
 *              32-bit registers per SM 64K, registers per thread 255, resident threads
 *              per SM, shared memory per SM and per block (opt-in maximum).
 *  [A100-WP]   NVIDIA A100 Tensor Core GPU Architecture whitepaper: A100 has 108 SMs.
 *  [GA102-WP]  NVIDIA Ampere GA102 GPU Architecture whitepaper: full GA102 has 84 SMs
 *              (A40, RTX 3090 Ti); RTX 3090 has 82, A10 72.
 *  [AD102-WP]  NVIDIA Ada GPU Architecture whitepaper / L40 datasheet: L40 and L40S have
 *              142 SMs; RTX 4090 128.
 *  [H100-WP]   NVIDIA H100 Tensor Core GPU Architecture whitepaper: H100 SXM5 has 132
 *              SMs; H200 uses the same GH100 configuration.
 *  [B200]      NVIDIA Blackwell B200: 148 SMs (2 dies x 74) as the runtime reports them.
 *  [ROCM-SPEC] ROCm documentation, "GPU hardware specifications" (reference/
 *              gpu-arch-specs): CUs, wavefront size, LDS KiB, VGPR file KiB per CU.
 *  [AMD-NOTES] docs/amd.md, "Hardware rows" and "Occupancy" (#hardware-rows, #occupancy),
 *              and "Memory operations" (#memory-operations): this project's digest of
 *              AMD's documentation, with the source of each fact.
 *  [HIP-WGP]   ROCm/hip issue #3198, ROCm/MIVisionX PR #930: on gfx10+ (RDNA) HIP's
 *              multiProcessorCount counts WGPs (2 CUs each). The RDNA rows therefore use
 *              the WGP as their "SM": sm_count, LDS and registers are per WGP.
 */
#include "select/arch_table.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024

static const fa_arch_row k_rows[] = {
    /* The CPU. It has no shared memory: smem_per_block is the budget for one worker's
     * tile working set (fp32 Q, O accumulator, K, V and S tiles). 1 MiB is the private
     * L2 of common server cores (AMD Zen 4/5, AWS Graviton 3; Intel Sapphire Rapids has
     * 2 MiB); a tile that stays in L2 reads each K/V element from memory once per query
     * tile. One worker runs one tile at a time, so one "thread" per block and per SM;
     * sm_count is replaced by the worker count at run time. No register limit (0). */
    {"cpu", FA_VENDOR_CPU, 1, 1024 * KIB, 1024 * KIB, 0, 0, 1, 1, 1, FA_MATRIX_NONE, 0},

    /* sm_80 (A100): 163 KB/block, 164 KB/SM, 2048 threads/SM [CUDA-TS]; 108 SMs
     * [A100-WP]; mma.sync m16n8k16 and cp.async are sm_80 features (PTX ISA). */
    {"sm_80", FA_VENDOR_NVIDIA, 32, 163 * KIB, 164 * KIB, 65536, 255, 1024, 2048, 108,
     FA_MATRIX_MMA_SYNC, 1},
    /* sm_86 (A40, RTX 30xx): 99 KB/block, 100 KB/SM, 1536 threads/SM [CUDA-TS];
     * 84 SMs [GA102-WP]. */
    {"sm_86", FA_VENDOR_NVIDIA, 32, 99 * KIB, 100 * KIB, 65536, 255, 1024, 1536, 84,
     FA_MATRIX_MMA_SYNC, 1},
    /* sm_89 (L40, RTX 40xx): 99 KB/block, 100 KB/SM, 1536 threads/SM [CUDA-TS];
     * 142 SMs [AD102-WP]. */
    {"sm_89", FA_VENDOR_NVIDIA, 32, 99 * KIB, 100 * KIB, 65536, 255, 1024, 1536, 142,
     FA_MATRIX_MMA_SYNC, 1},
    /* sm_90 (H100, H200): 227 KB/block, 228 KB/SM, 2048 threads/SM [CUDA-TS]; 132 SMs
     * [H100-WP]. Warpgroup MMA (wgmma.mma_async) and TMA: PTX ISA 9.7.15 and
     * cp.async.bulk.tensor, "requires sm_90a" (docs/research/issue13_hopper.md). */
    {"sm_90", FA_VENDOR_NVIDIA, 32, 227 * KIB, 228 * KIB, 65536, 255, 1024, 2048, 132,
     FA_MATRIX_WGMMA, 1},
    /* sm_100 (B200): 227 KB/block, 228 KB/SM, 2048 threads/SM [CUDA-TS]; 148 SMs
     * [B200]. tcgen05 exists but our kernels use mma.sync + cp.async. */
    {"sm_100", FA_VENDOR_NVIDIA, 32, 227 * KIB, 228 * KIB, 65536, 255, 1024, 2048, 148,
     FA_MATRIX_MMA_SYNC, 1},

    /* AMD CDNA: wave64; 512 KiB VGPR file per CU = 131072 32-bit registers [ROCM-SPEC];
     * 512 registers per lane counting 256 AGPRs [AMD-NOTES]; 1024 threads per workgroup
     * (HIP limit); 8 waves per SIMD x 4 SIMDs x 64 = 2048 threads per CU [AMD-NOTES].
     * No cp.async equivalent (buffer loads) [AMD-NOTES]. */
    /* gfx90a (MI250X, one GCD): 110 CUs per GCD, LDS 64 KiB [ROCM-SPEC]. */
    {"gfx90a", FA_VENDOR_AMD, 64, 64 * KIB, 64 * KIB, 131072, 512, 1024, 2048, 110,
     FA_MATRIX_MFMA, 0},
    /* gfx942 (MI300X): 304 CUs, LDS 64 KiB [ROCM-SPEC]. */
    {"gfx942", FA_VENDOR_AMD, 64, 64 * KIB, 64 * KIB, 131072, 512, 1024, 2048, 304,
     FA_MATRIX_MFMA, 0},
    /* gfx950 (MI355X): 256 CUs, LDS 160 KiB [ROCM-SPEC]. */
    {"gfx950", FA_VENDOR_AMD, 64, 160 * KIB, 160 * KIB, 131072, 512, 1024, 2048, 256,
     FA_MATRIX_MFMA, 0},

    /* AMD RDNA3/4, per WGP [HIP-WGP]: wave32; LDS 64 KiB per workgroup, 128 KiB per
     * WGP; 768 KiB VGPR file per WGP = 196608 registers [AMD-NOTES]; 256 VGPRs per lane
     * (RDNA ISA encoding limit); 1024 threads per workgroup (HIP limit). Threads per
     * WGP: 4 SIMD32 x 16 wave slots x 32 = 2048, not verified on hardware here (no RDNA
     * device); LDS limits our kernels first, and the runtime's own value replaces it. */
    /* gfx1100 (RX 7900 XTX): 96 CUs = 48 WGPs [ROCM-SPEC][HIP-WGP]. */
    {"gfx1100", FA_VENDOR_AMD, 32, 64 * KIB, 128 * KIB, 196608, 256, 1024, 2048, 48,
     FA_MATRIX_WMMA, 0},
    /* gfx1201 (RX 9070 XT): 64 CUs = 32 WGPs [AMD-NOTES][HIP-WGP]. */
    {"gfx1201", FA_VENDOR_AMD, 32, 64 * KIB, 128 * KIB, 196608, 256, 1024, 2048, 32,
     FA_MATRIX_WMMA, 0},
};

#define ROW_COUNT ((int)(sizeof(k_rows) / sizeof(k_rows[0])))

int fa_arch_count(void) { return ROW_COUNT; }

const fa_arch_row *fa_arch_at(int index)
{
    if (index < 0 || index >= ROW_COUNT) return NULL;
    return &k_rows[index];
}

const fa_arch_row *fa_arch_find(const char *name)
{
    int i;
    if (!name) return NULL;
    for (i = 0; i < ROW_COUNT; i++)
        if (strcmp(k_rows[i].name, name) == 0) return &k_rows[i];
    return NULL;
}

/* ---- fallback rows ------------------------------------------------------------------ */

/* Orders architectures of one vendor: NVIDIA "sm_86" -> 86 (compute capability); AMD
 * "gfx90a" -> major 9, minor 0, stepping 0xa packed as major*256 + minor*16 + stepping
 * (the last two characters are hex digits; the rest is the decimal major). -1 when the
 * name does not parse. */
static int arch_key(const char *name, fa_vendor vendor)
{
    char *end;
    size_t len;
    long major;
    int minor, step;
    char digits[8];

    if (!name) return -1;
    if (vendor == FA_VENDOR_NVIDIA) {
        long cc;
        if (strncmp(name, "sm_", 3) != 0) return -1;
        cc = strtol(name + 3, &end, 10);
        return end == name + 3 ? -1 : (int)cc;
    }
    if (vendor != FA_VENDOR_AMD || strncmp(name, "gfx", 3) != 0) return -1;
    len = strcspn(name + 3, ":"); /* drop target features such as ":sramecc+:xnack-" */
    if (len < 3 || len >= sizeof(digits)) return -1;
    memcpy(digits, name + 3, len);
    digits[len] = '\0';
    step = (int)strtol(digits + len - 1, &end, 16);
    if (*end) return -1;
    digits[len - 1] = '\0';
    minor = (int)strtol(digits + len - 2, &end, 16);
    if (*end) return -1;
    digits[len - 2] = '\0';
    major = strtol(digits, &end, 10);
    if (*end || end == digits) return -1;
    return (int)(major * 256 + minor * 16 + step);
}

/* The nearest known row of the same family: NVIDIA, the newest table row not newer than
 * the device (sm_87 -> sm_86, sm_120 -> sm_100; sm_75 has none: our kernels need sm_80).
 * AMD, the same, restricted to the same gfx major (gfx90c -> gfx90a; gfx1030, RDNA2 without
 * WMMA, has none). NULL when there is none. */
static const fa_arch_row *nearest_row(const char *name, fa_vendor vendor)
{
    const fa_arch_row *best = NULL;
    int key = arch_key(name, vendor), best_key = -1, i;

    if (key < 0) return NULL;
    for (i = 0; i < ROW_COUNT; i++) {
        int k = arch_key(k_rows[i].name, vendor);
        if (k < 0 || k > key || k <= best_key) continue;
        if (vendor == FA_VENDOR_AMD && k / 256 != key / 256) continue;
        best = &k_rows[i];
        best_key = k;
    }
    return best;
}

/* Smallest value of a field over the table rows of a vendor: the conservative default
 * for a limit the device did not report. */
static int vendor_min(fa_vendor vendor, size_t field_offset)
{
    int i, best = 0;
    for (i = 0; i < ROW_COUNT; i++) {
        int v;
        if (k_rows[i].vendor != vendor) continue;
        memcpy(&v, (const char *)&k_rows[i] + field_offset, sizeof v);
        if (best == 0 || (v > 0 && v < best)) best = v;
    }
    return best;
}

#define VENDOR_MIN(vendor, field) vendor_min((vendor), offsetof(fa_arch_row, field))

/* A reported value wins when positive; otherwise the vendor's smallest table value. */
static int reported_or(int reported, int fallback) { return reported > 0 ? reported : fallback; }

/* Rules (documented in arch_table.h's contract, detailed here):
 *  1. Every limit the device reports (> 0) is used as is: the device knows best.
 *  2. A limit not reported (<= 0) takes the smallest value of the vendor's table rows,
 *     never a larger one, so the dispatcher cannot pick a tile that does not fit.
 *  3. The wave size, when not reported, comes from the nearest row of the family, else
 *     the vendor's usual one (32 NVIDIA, 64 AMD CDNA-style, 1 CPU).
 *  4. The matrix unit and async copy come from the nearest row of the family, and only
 *     when the device says it has a matrix unit; no nearest row means the scalar path.
 *     Warpgroup MMA only for the row's own architecture (sm_90a code runs on sm_90
 *     alone): another one near it gets mma.sync.
 *  5. Consistency: per-block shared memory never exceeds per-SM shared memory, and
 *     threads per block never exceed threads per SM; sm_count is at least 1. */
fa_arch_row fa_arch_from_device(const char *name, fa_vendor vendor, int wave_size,
                                int smem_per_block, int smem_per_sm, int regs_per_sm,
                                int max_threads_per_block, int max_threads_per_sm,
                                int sm_count, int has_matrix_unit)
{
    fa_arch_row row;
    const fa_arch_row *near = nearest_row(name, vendor);
    int default_wave = vendor == FA_VENDOR_NVIDIA ? 32 : vendor == FA_VENDOR_AMD ? 64 : 1;

    memset(&row, 0, sizeof row);
    strncpy(row.name, name ? name : "unknown", sizeof row.name - 1);
    row.vendor = vendor;
    row.wave_size = reported_or(wave_size, near ? near->wave_size : default_wave);
    row.smem_per_block = reported_or(smem_per_block, VENDOR_MIN(vendor, smem_per_block));
    row.smem_per_sm = reported_or(smem_per_sm, VENDOR_MIN(vendor, smem_per_sm));
    row.regs_per_sm = reported_or(regs_per_sm, VENDOR_MIN(vendor, regs_per_sm));
    row.max_regs_per_thread = near ? near->max_regs_per_thread
                                   : VENDOR_MIN(vendor, max_regs_per_thread);
    row.max_threads_per_block =
        reported_or(max_threads_per_block, VENDOR_MIN(vendor, max_threads_per_block));
    row.max_threads_per_sm =
        reported_or(max_threads_per_sm, VENDOR_MIN(vendor, max_threads_per_sm));
    row.sm_count = reported_or(sm_count, 1);
    row.matrix_unit = (has_matrix_unit && near) ? near->matrix_unit : FA_MATRIX_NONE;
    /* sm_90a machine code runs on sm_90 alone ("a" features are not forward compatible):
     * a nearest row's warpgroup MMA does not carry over to another architecture. */
    if (row.matrix_unit == FA_MATRIX_WGMMA && strcmp(near->name, row.name) != 0)
        row.matrix_unit = FA_MATRIX_MMA_SYNC;
    row.has_async_copy = near ? near->has_async_copy : 0;

    if (row.smem_per_block > row.smem_per_sm) row.smem_per_block = row.smem_per_sm;
    if (row.max_threads_per_block > row.max_threads_per_sm)
        row.max_threads_per_block = row.max_threads_per_sm;
    return row;
}
