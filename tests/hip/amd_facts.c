/*
 * amd_facts.c - prints what the AMD build checks compare the compiled code objects
 * against, straight from the library: the AMD rows of the arch table, the HIP forward and
 * backward registries, and the kernels the dispatcher selects for each AMD row over a
 * grid of problems. Read by bench/amd_resources.py (the resource and dispatch checks,
 * AMD_RESOURCES.md).
 *
 * Lines: row NAME WAVE SMEM_PER_BLOCK SMEM_PER_CU SM_COUNT MATRIX_UNIT
 *        config NAME WAVE THREADS SMEM_BYTES ATOMIC_DQ (NAME is the kernel symbol, a
 *                          backward's two kernels add _dkdv and _dq; ATOMIC_DQ: 1 when
 *                          the dK/dV kernel adds dQ with atomics)
 *        select ROW KERNEL (one per distinct selection; a backward config selects its
 *                          _dkdv and _dq kernels)
 *        unsupported ROW PASS D DTYPE REASON (a problem no AMD config covers)
 */
#include <stdio.h>
#include <string.h>

#include "select/registry.h"

static void print_selections(const fa_arch_row *row, const fa_kernel_config *reg, int count,
                             fa_pass pass)
{
    static const long long seqs[][2] = {{1, 32768}, {512, 512}, {2048, 2048}, {4096, 4096}};
    static const char *const fwd_suffixes[] = {"", NULL}, *const bwd_suffixes[] = {"_dkdv", "_dq", NULL};
    const char *const *suffixes = pass == FA_PASS_BWD ? bwd_suffixes : fwd_suffixes;
    char seen[64][48];
    int n_seen = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int d = 8; d <= 256; d += 8)
            for (int s = 0; s < 4; s++) {
                fa_problem_shape shape;
                fa_selection sel;
                char name[48];
                memset(&shape, 0, sizeof shape);
                shape.pass = pass;
                shape.dtype = dt ? FA_DTYPE_BF16 : FA_DTYPE_F16;
                shape.batch = 2;
                shape.heads = 16;
                shape.heads_k = 16;
                shape.head_dim = d;
                shape.seqlen_q = seqs[s][0];
                shape.seqlen_k = seqs[s][1];
                if (fa_select_config(row, reg, count, &shape, NULL, &sel) != FA_OK) {
                    printf("unsupported %s %s %d %s %s\n", row->name, pass == FA_PASS_BWD ? "bwd" : "fwd",
                           d, fa_dtype_name(shape.dtype), sel.reason);
                    continue;
                }
                for (const char *const *suffix = suffixes; *suffix; suffix++) {
                    snprintf(name, sizeof name, "%s%s", sel.config->name, *suffix);
                    int i = 0;
                    while (i < n_seen && strcmp(seen[i], name) != 0)
                        i++;
                    if (i == n_seen && n_seen < 64) {
                        snprintf(seen[n_seen++], sizeof seen[0], "%s", name);
                        printf("select %s %s\n", row->name, name);
                    }
                }
            }
}

int main(void)
{
    int count = 0, bwd_count = 0;
    const fa_kernel_config *reg = fa_registry(FA_BACKEND_HIP, &count);
    const fa_kernel_config *bwd = fa_registry_bwd(FA_BACKEND_HIP, &bwd_count);
    for (int i = 0; i < count + bwd_count; i++) {
        const fa_kernel_config *c = i < count ? &reg[i] : &bwd[i - count];
        printf("config %s %d %d %d %d\n", c->name, c->min_wave_size, c->threads, c->smem_bytes,
               c->atomic_dq);
    }
    for (int r = 0; r < fa_arch_count(); r++) {
        const fa_arch_row *row = fa_arch_at(r);
        if (row->vendor != FA_VENDOR_AMD)
            continue;
        printf("row %s %d %d %d %d %s\n", row->name, row->wave_size, row->smem_per_block,
               row->smem_per_sm, row->sm_count, row->matrix_unit == FA_MATRIX_MFMA ? "mfma" : "wmma");
        print_selections(row, reg, count, FA_PASS_FWD);
        print_selections(row, bwd, bwd_count, FA_PASS_BWD);
    }
    return 0;
}
