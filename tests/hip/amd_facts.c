/*
 * amd_facts.c - prints what the AMD build checks compare the compiled code objects
 * against, straight from the library: the AMD rows of the arch table, the HIP registry,
 * and the kernel the dispatcher selects for each AMD row over a grid of problems.
 * Read by bench/amd_resources.py (the resource and dispatch checks, AMD_RESOURCES.md).
 *
 * Lines: row NAME WAVE SMEM_PER_BLOCK SMEM_PER_CU SM_COUNT MATRIX_UNIT
 *        config NAME KERNEL WAVE THREADS SMEM_BYTES
 *        select ROW KERNEL (one per distinct selection)
 *        unsupported ROW D DTYPE REASON (a problem no AMD config covers)
 */
#include <stdio.h>
#include <string.h>

#include "dispatch.h"

/* The kernel symbol of a config: fa_fwd_d<d>_<f16|bf16>_<m>x<n>x<stages>. */
static void kernel_name(const fa_kernel_config *c, char *out, size_t len)
{
    snprintf(out, len, "fa_fwd_d%d_%s_%dx%dx%d", c->head_dim, c->dtype == FA_DTYPE_BF16 ? "bf16" : "f16",
             c->tile_m, c->tile_n, c->stages);
}

static void print_selections(const fa_arch_row *row, const fa_kernel_config *reg, int count)
{
    static const long long seqs[][2] = {{1, 32768}, {512, 512}, {2048, 2048}, {4096, 4096}};
    char seen[64][48];
    int n_seen = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int d = 8; d <= 256; d += 8)
            for (int s = 0; s < 4; s++) {
                fa_problem_shape shape;
                fa_selection sel;
                char name[48];
                memset(&shape, 0, sizeof shape);
                shape.pass = FA_PASS_FWD;
                shape.dtype = dt ? FA_DTYPE_BF16 : FA_DTYPE_F16;
                shape.batch = 2;
                shape.heads = 16;
                shape.heads_k = 16;
                shape.head_dim = d;
                shape.seqlen_q = seqs[s][0];
                shape.seqlen_k = seqs[s][1];
                if (fa_select_config(row, reg, count, &shape, NULL, &sel) != FA_OK) {
                    printf("unsupported %s %d %s %s\n", row->name, d, dt ? "bf16" : "fp16", sel.reason);
                    continue;
                }
                kernel_name(sel.config, name, sizeof name);
                int i = 0;
                while (i < n_seen && strcmp(seen[i], name) != 0)
                    i++;
                if (i == n_seen && n_seen < 64) {
                    snprintf(seen[n_seen++], sizeof seen[0], "%s", name);
                    printf("select %s %s\n", row->name, name);
                }
            }
}

int main(void)
{
    int count = 0;
    const fa_kernel_config *reg = fa_registry(FA_BACKEND_HIP, &count);
    for (int i = 0; i < count; i++) {
        char name[48];
        kernel_name(&reg[i], name, sizeof name);
        printf("config %s %s %d %d %d\n", reg[i].name, name, reg[i].min_wave_size, reg[i].threads,
               reg[i].smem_bytes);
    }
    for (int r = 0; r < fa_arch_count(); r++) {
        const fa_arch_row *row = fa_arch_at(r);
        if (row->vendor != FA_VENDOR_AMD)
            continue;
        printf("row %s %d %d %d %d %s\n", row->name, row->wave_size, row->smem_per_block,
               row->smem_per_sm, row->sm_count, row->matrix_unit == FA_MATRIX_MFMA ? "mfma" : "wmma");
        print_selections(row, reg, count);
    }
    return 0;
}
