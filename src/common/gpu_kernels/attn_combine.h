/*
 * attn_combine.h - the combine kernel, written once for every vendor: n partial results
 * (out_i, lse_i) of the same queries over disjoint keys merged by their LSEs into out and
 * lse, for fa_combine (f16/bf16 partials) and for the split-KV forward (its fp32 partials).
 * A group of 2^args.lanes_log2 threads takes one (row, head). Its LSE reductions are
 * shuffles only: a group wider than a warp has each warp reduce all n LSEs by itself (the
 * same sums in the same order in every warp), and each lane turns the LSEs of the
 * partials it reads into their weights exp(lse_i - lse) itself (L1 hits). The rows of the
 * partials are read with 16-byte loads, skipping those whose weight is 0 (lse -inf or
 * +inf: no key). The group's chunk lanes take turns over 8-element chunks of the row; its
 * other lanes split the partials (a small grid, decode's 32 (row, head)s, gets more loads
 * in flight), up to a whole block per (row, head), whose warps' sums then meet once in
 * shared memory. The split-KV forward's partials lie in its workspace, all readable:
 * there (args.read_ahead) a lane loads the rows of its first partials before their
 * weights are known. A small grid runs one warp per SM sub-partition, so
 * every instruction waits its full latency: the index math is shifts and 32-bit where it
 * can be (bench/NOTES.md dec6: 1325 -> 818 instructions per warp, 6.3 -> 4.7 us at b 1).
 * Blocks of FA_COMBINE_THREADS along x cover the rows x heads of one batch entry; batch
 * entries lie over grid y and z
 * (launch_grid.h). Included once by the vendor's shared-kernels unit.
 */
#ifndef FA_ATTN_COMBINE_H
#define FA_ATTN_COMBINE_H

#include "fa_device.h"
#include "flashattn.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/attn_sequence.h"

/* Partials whose loads one thread has in flight at a time. */
#define FA_COMBINE_UNROLL 4

#if FA_COMBINE_CHUNK_LANES > FA_WARP_SIZE || FA_COMBINE_THREADS % FA_WARP_SIZE != 0
#error "a row's chunk lanes must lie in one warp, and a block hold whole warps"
#endif

/* The block's shared memory: room for the partial sums of the warps of a group wider than
 * a warp. */
typedef struct fa_combine_smem {
    float spill[FA_COMBINE_THREADS][8];
} fa_combine_smem;

/* The larger of a and b, NaN when either is (fmaxf would drop it: a NaN LSE must give NaN). */
FA_DEVICE float fa_nan_max(float a, float b) { return b > a || b != b ? b : a; }

/* acc summed over the lanes `from` apart and beyond within a warp (from = chunk lanes:
 * the lanes of one chunk, up to the group or the warp). */
FA_DEVICE void fa_warp_sum(float acc[8], int from, int lanes)
{
    for (int m = from; m < lanes && m < FA_WARP_SIZE; m <<= 1)
#pragma unroll
        for (int k = 0; k < 8; ++k)
            acc[k] += fa_lane_xor(acc[k], m);
}

/* One element of out, from fp32. */
FA_DEVICE unsigned short fa_combine_pack1(float x, int bf16)
{
    return (unsigned short)((bf16 ? fa_pack2_bf16(x, 0.f) : fa_pack2_f16(x, 0.f)) & 0xffffu);
}

/* The chunks c0 .. of out's row for a group wider than a warp: each warp's sums (acc,
 * after fa_warp_sum) meet in shared memory, where every lane of the group adds one
 * element's over the warps, in warp order, and stores it; a lane adds lanes / 32 values
 * rather than every element of its chunk. Every thread of the block takes part (barriers). */
FA_DEVICE void fa_combine_store_wide(const fa_combine_args *a, int valid, const float acc[8], int lane, int c0,
                                     unsigned short *out, fa_combine_smem *sm)
{
    const int lanes = 1 << a->lanes_log2, chunk_lanes = 1 << a->chunk_lanes_log2, first = threadIdx.x - lane;
    const int chunks = a->head_dim >> 3, bf16 = a->out_dtype == FA_DTYPE_BF16;
    const int elems = 8 * (chunks - c0 < chunk_lanes ? chunks - c0 : chunk_lanes);
    if (lane % FA_WARP_SIZE < chunk_lanes)
#pragma unroll
        for (int k = 0; k < 8; ++k)
            sm->spill[threadIdx.x][k] = acc[k];
    fa_barrier();
    for (int e = lane; valid && e < elems; e += lanes) {
        const float *at = &sm->spill[first + (e >> 3)][e & 7];
        float sum = at[0];
        for (int w = FA_WARP_SIZE; w < lanes; w += FA_WARP_SIZE)
            sum += at[w * 8];
        out[8 * c0 + e] = fa_combine_pack1(sum, bf16);
    }
    fa_barrier();
}

/* Partial i's LSE and its out, `at` elements in (attn_args.h: a pointer each, or a base
 * and a split stride, in which case i * the stride is the partial's start). */
FA_DEVICE const float *fa_combine_part_lse(const fa_combine_args *a, int i, long long at)
{
    return (a->part_lse_split ? a->part_lse[0] : a->part_lse[i]) + (i * a->part_lse_split + at);
}
FA_DEVICE const void *fa_combine_part_out(const fa_combine_args *a, int i, long long at, int elem_bytes)
{
    const char *base = (const char *)(a->part_out_split ? a->part_out[0] : a->part_out[i]);
    return base + (i * a->part_out_split + at) * elem_bytes;
}

FA_DEVICE int fa_no_key(float lse) { return fabsf(lse) == INFINITY; }

/* Where one (row, head)'s LSEs lie in the partials, their merged LSE, and the LSE this
 * lane read first (partial lane % fa_lse_lanes, -inf where there is none). */
typedef struct fa_combine_item {
    long long lse_at;
    float lse, held;
} fa_combine_item;

/* The lanes that reduce a group's LSEs together: the group, or each warp of a group wider
 * than a warp by itself, so that the reductions are shuffles. */
FA_DEVICE int fa_lse_lanes(int lanes_log2) { return 1 << lanes_log2 < FA_WARP_SIZE ? 1 << lanes_log2 : FA_WARP_SIZE; }

/* item->lse, the merged LSE of one (row, head): max + log(sum of exp(lse_i - max)) over
 * the partials that saw a key; -inf when none did, NaN when an LSE is. Each lane keeps
 * the first LSE it reads (item->held); the ones after it are read again in the second
 * pass (L1 hits) rather than held, up to FA_COMBINE_MAX_PARTIALS a lane. valid 0 (a group
 * past the last row): no reads, but its lanes still take part in the shuffles. */
FA_DEVICE void fa_combine_lse(const fa_combine_args *a, int valid, int lane, fa_combine_item *item)
{
    const int width = fa_lse_lanes(a->lanes_log2), first = lane & (width - 1);
    float max = -INFINITY, sum = 0.f;
    item->held = valid && first < a->n ? *fa_combine_part_lse(a, first, item->lse_at) : -INFINITY;
    for (int i = first; valid && i < a->n; i += width) {
        const float x = i == first ? item->held : *fa_combine_part_lse(a, i, item->lse_at);
        if (!fa_no_key(x))
            max = fa_nan_max(max, x);
    }
    for (int m = 1; m < width; m <<= 1)
        max = fa_nan_max(max, fa_lane_xor(max, m));
    for (int i = first; valid && max != -INFINITY && i < a->n; i += width) {
        const float x = i == first ? item->held : *fa_combine_part_lse(a, i, item->lse_at);
        if (!fa_no_key(x))
            sum += fa_exp2((x - max) * FA_LOG2E);
    }
    for (int m = 1; m < width; m <<= 1)
        sum += fa_lane_xor(sum, m);
    item->lse = max == -INFINITY ? -INFINITY : max + logf(sum);
}

/* The weight exp(lse_i - lse) of a partial whose LSE is x: 0 for one that saw no key (its
 * out may be anything); NaN when the merged LSE is. */
FA_DEVICE float fa_combine_weight_of(const fa_combine_item *item, float x)
{
    return fa_no_key(x) || item->lse == -INFINITY ? 0.f : fa_exp2((x - item->lse) * FA_LOG2E);
}

/* Partial i's weight, 0 past the last partial. */
FA_DEVICE float fa_combine_weight(const fa_combine_args *a, const fa_combine_item *item, int i)
{
    return i < a->n ? fa_combine_weight_of(item, *fa_combine_part_lse(a, i, item->lse_at)) : 0.f;
}

/* 8 consecutive elements of a partial's row, as fp32. */
FA_DEVICE void fa_combine_load8(float v[8], const void *row, int dtype)
{
    if (dtype == FA_DTYPE_F32) {
        const float4 lo = ((const float4 *)row)[0], hi = ((const float4 *)row)[1];
        v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
        v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
        return;
    }
    const uint4 x = *(const uint4 *)row;
    const uint32_t words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 f = dtype == FA_DTYPE_BF16 ? fa_unpack2_bf16(words[k]) : fa_unpack2_f16(words[k]);
        v[2 * k] = f.x;
        v[2 * k + 1] = f.y;
    }
}

/* acc += w_i * out_i over the partials first, first + step, ... at element offset `off`
 * of their rows; a partial of weight 0 is not read (its out may be anything). Inlined
 * with dtype constant at each call, so each element type gets a loop of its own. */
FA_DEVICE void fa_combine_accumulate(const fa_combine_args *a, const fa_combine_item *item, long long off,
                                     int first, int step, int dtype, float acc[8])
{
    const int elem_bytes = dtype == FA_DTYPE_F32 ? 4 : 2;
    for (int i0 = first; i0 < a->n; i0 += FA_COMBINE_UNROLL * step) {
        float wu[FA_COMBINE_UNROLL], v[FA_COMBINE_UNROLL][8] = {};
#pragma unroll
        for (int u = 0; u < FA_COMBINE_UNROLL; ++u) {
            const int i = i0 + u * step;
            wu[u] = fa_combine_weight(a, item, i);
            if (wu[u] != 0.f)
                fa_combine_load8(v[u], fa_combine_part_out(a, i, off, elem_bytes), dtype);
        }
        /* A partial not read adds 0 * 0. */
#pragma unroll
        for (int u = 0; u < FA_COMBINE_UNROLL; ++u)
#pragma unroll
            for (int k = 0; k < 8; ++k)
                acc[k] = fmaf(wu[u], v[u][k], acc[k]);
    }
}

/* Partials per lane whose rows are loaded ahead of the weights (args.read_ahead): one
 * round of fa_combine_accumulate, which for a small grid's 256-lane groups (16 shares at
 * d128) covers 64 partials; more slots cost every lane their address math and registers. */
#define FA_COMBINE_AHEAD 4

typedef struct fa_combine_ahead {
    float v[FA_COMBINE_AHEAD][8];
    float w[FA_COMBINE_AHEAD];
} fa_combine_ahead;

/* The fp32 rows at element offset `off` of partials first, first + step, ... (the first
 * FA_COMBINE_AHEAD of them), whatever their weights will be: the split-KV workspace holds
 * every split's rows, written or not. */
FA_DEVICE void fa_combine_load_ahead(const fa_combine_args *a, long long off, int first, int step,
                                     fa_combine_ahead *ahead)
{
    const float *row = (const float *)fa_combine_part_out(a, first, off, 4);
    const long long row_step = step * a->part_out_split;
#pragma unroll
    for (int u = 0; u < FA_COMBINE_AHEAD; ++u, row += row_step) {
        if (first + u * step < a->n)
            fa_combine_load8(ahead->v[u], row, FA_DTYPE_F32);
        else
            for (int k = 0; k < 8; ++k)
                ahead->v[u][k] = 0.f;
    }
}

/* The weights of the partials read ahead (first, first + step, ...). When every partial's
 * LSE is held by a lane of the reduction (n <= fa_lse_lanes), from that lane's register,
 * else read again (valid groups only). Every lane of the warp takes part (the shuffles). */
FA_DEVICE void fa_combine_ahead_weights(const fa_combine_args *a, int valid, const fa_combine_item *item, int first,
                                        int step, float w[FA_COMBINE_AHEAD])
{
    const int width = fa_lse_lanes(a->lanes_log2), unit = fa_lane() & ~(width - 1);
    const int held = a->n <= width;
#pragma unroll
    for (int u = 0; u < FA_COMBINE_AHEAD; ++u) {
        const int i = first + u * step;
        const float x = fa_lane_read(item->held, unit + (i & (width - 1)));
        if (held)
            w[u] = i < a->n ? fa_combine_weight_of(item, x) : 0.f;
        else
            w[u] = valid ? fa_combine_weight(a, item, i) : 0.f;
    }
}

#if FA_COMBINE_AHEAD % FA_COMBINE_UNROLL != 0
#error "the rows read ahead must end where a round of fa_combine_accumulate ends"
#endif

/* acc += w_i * out_i over the rows loaded ahead, exactly as fa_combine_accumulate's rounds
 * of FA_COMBINE_UNROLL would add them, so the sums keep their bits (a -0 included): a
 * round that starts past the last partial adds nothing, the rest of one that runs past
 * it adds 0 * 0, and a row of weight 0 adds 0 * 0 (it may be a split's row nobody wrote). */
FA_DEVICE void fa_combine_add_ahead(const fa_combine_args *a, int first, int step, const fa_combine_ahead *ahead,
                                    float acc[8])
{
#pragma unroll
    for (int u = 0; u < FA_COMBINE_AHEAD; ++u) {
        if (first + (u - u % FA_COMBINE_UNROLL) * step >= a->n)
            break;
        const float wi = ahead->w[u];
#pragma unroll
        for (int k = 0; k < 8; ++k)
            acc[k] = fmaf(wi, wi != 0.f ? ahead->v[u][k] : 0.f, acc[k]);
    }
}

/* out's row of one (row, head): the chunk lanes take turns over its 8-element chunks, each
 * lane of a chunk sums its share of the partials, and the shares meet by shuffles within
 * a warp, then for a group wider than a warp in fa_combine_store_wide (every thread takes
 * part, so the loop runs as often for all). valid gates the reads, write the stores. */
FA_DEVICE void fa_combine_row(const fa_combine_args *a, int valid, int write, int batch, long long row, int head,
                              int lane, const fa_combine_item *item, int read_ahead,
                              const fa_combine_ahead *ahead, fa_combine_smem *sm)
{
    const int chunk_lanes = 1 << a->chunk_lanes_log2, chunks = a->head_dim >> 3;
    const int chunk = lane & (chunk_lanes - 1), share = lane >> a->chunk_lanes_log2;
    const int shares = 1 << (a->lanes_log2 - a->chunk_lanes_log2);
    const long long part_row = fa_row_at(&a->part_out_layout, batch, row, head);
    unsigned short *out = (unsigned short *)a->out + fa_row_at(&a->out_layout, batch, row, head);
    for (int c0 = 0; c0 < chunks; c0 += chunk_lanes) {
        const int c = c0 + chunk, active = valid && c < chunks;
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        const long long off = part_row + 8LL * c;
        if (active && read_ahead && c0 == 0) {
            fa_combine_add_ahead(a, share, shares, ahead, acc);
            fa_combine_accumulate(a, item, off, share + FA_COMBINE_AHEAD * shares, shares, FA_DTYPE_F32, acc);
        } else if (active && a->part_dtype == FA_DTYPE_F32)
            fa_combine_accumulate(a, item, off, share, shares, FA_DTYPE_F32, acc);
        else if (active && a->part_dtype == FA_DTYPE_BF16)
            fa_combine_accumulate(a, item, off, share, shares, FA_DTYPE_BF16, acc);
        else if (active)
            fa_combine_accumulate(a, item, off, share, shares, FA_DTYPE_F16, acc);
        fa_warp_sum(acc, chunk_lanes, 1 << a->lanes_log2);
        if (1 << a->lanes_log2 > FA_WARP_SIZE) {
            fa_combine_store_wide(a, valid && write, acc, lane, c0, out, sm);
            continue;
        }
        if (!active || !write || share != 0)
            continue;
        uint4 packed;
        const int bf16 = a->out_dtype == FA_DTYPE_BF16;
        packed.x = bf16 ? fa_pack2_bf16(acc[0], acc[1]) : fa_pack2_f16(acc[0], acc[1]);
        packed.y = bf16 ? fa_pack2_bf16(acc[2], acc[3]) : fa_pack2_f16(acc[2], acc[3]);
        packed.z = bf16 ? fa_pack2_bf16(acc[4], acc[5]) : fa_pack2_f16(acc[4], acc[5]);
        packed.w = bf16 ? fa_pack2_bf16(acc[6], acc[7]) : fa_pack2_f16(acc[6], acc[7]);
        *(uint4 *)(out + 8 * c) = packed;
    }
}

/* item_id / heads and its remainder, in 32 bits while item_id fits (a 64-bit division is
 * a call of some hundred instructions). */
FA_DEVICE long long fa_combine_row_of(long long item_id, int heads, int *head)
{
    if (item_id <= 0xffffffffLL) {
        const unsigned q = (unsigned)item_id / (unsigned)heads;
        *head = (int)((unsigned)item_id - q * (unsigned)heads);
        return q;
    }
    *head = (int)(item_id % heads);
    return item_id / heads;
}

extern "C" FA_GLOBAL void __launch_bounds__(FA_COMBINE_THREADS) FA_CAT(FA_KERNEL_PREFIX, combine)(fa_combine_args args)
{
    FA_SHARED_OBJECT(fa_combine_smem, sm);
    unsigned zero, batch_u;
    fa_block_pair(1, args.batch, &zero, &batch_u);
    if (batch_u == (unsigned)args.batch) /* past the last batch entry */
        return;
    const int batch = (int)batch_u, lane = threadIdx.x & ((1 << args.lanes_log2) - 1);
    const long long first_item = (long long)blockIdx.x * (FA_COMBINE_THREADS >> args.lanes_log2);
    const long long item_id = first_item + (threadIdx.x >> args.lanes_log2);
    int head;
    const long long row_in_seq = fa_combine_row_of(item_id, args.heads, &head);
    fa_wait_prior_grid(); /* the split-KV forward before it wrote the partials */
    /* The device check found the sequence bad: nothing written. Nothing read either (its
     * partials were never written, and a varlen sequence's cu_seqlens_q may be anything),
     * unless the forward wrote them (verdict_late): then the verdict, a dependent load at
     * the head of a short kernel, is read beside the loads and gates only the writes. */
    if (args.seq_ok && !args.verdict_late && !args.seq_ok[batch])
        return;
    const int write = !args.verdict_late || args.seq_ok[batch];
    long long row0 = 0, rows = args.rows;
    if (args.cu_seqlens_q) {
        row0 = args.cu_seqlens_q[batch];
        rows = args.cu_seqlens_q[batch + 1] - row0;
    }
    const long long items = rows * args.heads;
    if (first_item >= items) /* the whole block past the sequence's rows */
        return;
    const int valid = item_id < items;
    const long long row = row0 + row_in_seq;
    /* Read ahead: the first round of chunks (every round up to d256: 32 chunk lanes). */
    fa_combine_ahead ahead;
    const int chunk = lane & ((1 << args.chunk_lanes_log2) - 1), share = lane >> args.chunk_lanes_log2;
    const int shares = 1 << (args.lanes_log2 - args.chunk_lanes_log2);
    const int ahead_ok = args.read_ahead && valid && chunk < args.head_dim >> 3;
    if (ahead_ok)
        fa_combine_load_ahead(&args, fa_row_at(&args.part_out_layout, batch, row, head) + 8LL * chunk, share,
                              shares, &ahead);
    fa_combine_item item;
    item.lse_at = fa_lse_at(&args.part_lse_layout, batch, head, row);
    fa_combine_lse(&args, valid, lane, &item);
    if (args.read_ahead)
        fa_combine_ahead_weights(&args, valid, &item, share, shares, ahead.w);
    fa_combine_row(&args, valid, write, batch, row, head, lane, &item, ahead_ok, &ahead, &sm);
    if (valid && write && lane == 0 && args.lse)
        args.lse[fa_lse_at(&args.lse_layout, batch, head, row)] = item.lse;
}

#endif /* FA_ATTN_COMBINE_H */
