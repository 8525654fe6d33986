/*
 * arch_table.h - one row of on-chip limits per GPU architecture (and the CPU), the
 * facts the dispatcher selects tiles from. The rows themselves live in arch_table.c.
 */
#ifndef FA_ARCH_TABLE_H
#define FA_ARCH_TABLE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fa_vendor { FA_VENDOR_CPU = 0, FA_VENDOR_NVIDIA, FA_VENDOR_AMD } fa_vendor;

typedef enum fa_matrix_unit {
    FA_MATRIX_NONE = 0, /* scalar FMA only                        */
    FA_MATRIX_MMA_SYNC, /* NVIDIA mma.sync m16n8k16 (sm_80+)       */
    FA_MATRIX_WGMMA,    /* NVIDIA wgmma.mma_async + TMA (sm_90a); such a row also runs */
                        /* mma.sync kernels                                           */
    FA_MATRIX_MFMA,     /* AMD CDNA v_mfma                         */
    FA_MATRIX_WMMA      /* AMD RDNA3/4 v_wmma                      */
} fa_matrix_unit;

typedef struct fa_arch_row {
    char name[16];             /* "sm_90", "gfx942", "cpu"                                  */
    fa_vendor vendor;
    int wave_size;             /* threads per warp / wavefront                              */
    int smem_per_block;        /* bytes of shared memory / LDS one block may use (opt-in)  */
    int smem_per_sm;           /* bytes per SM / CU                                         */
    int regs_per_sm;           /* 32-bit registers per SM / CU                              */
    int max_regs_per_thread;   /* architectural per-thread register limit                   */
    int max_threads_per_block;
    int max_threads_per_sm;
    int sm_count;              /* SMs / CUs of the flagship part (the device's own count    */
                               /* replaces it at run time)                                  */
    fa_matrix_unit matrix_unit;
    int has_async_copy;        /* cp.async (sm_80+); AMD: 0                                 */
} fa_arch_row;

/* Number of rows, and row i (0 <= i < count). */
int fa_arch_count(void);
const fa_arch_row *fa_arch_at(int index);
/* Row by name ("sm_90"), or NULL. */
const fa_arch_row *fa_arch_find(const char *name);
/* A conservative row for an architecture missing from the table, built from the limits
 * the device reports. The nearest known row of the same vendor family supplies the
 * matrix unit; reported limits always win over table values. */
fa_arch_row fa_arch_from_device(const char *name, fa_vendor vendor, int wave_size,
                                int smem_per_block, int smem_per_sm, int regs_per_sm,
                                int max_threads_per_block, int max_threads_per_sm,
                                int sm_count, int has_matrix_unit);

#ifdef __cplusplus
}
#endif

#endif /* FA_ARCH_TABLE_H */
