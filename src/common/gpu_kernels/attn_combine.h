/*
 * attn_combine.h - the combine kernel, written once for every vendor: n partial results
 * (out_i, lse_i) of the same queries over disjoint keys merged by their LSEs into out and
 * lse, for fa_combine (f16/bf16 partials) and for the split-KV forward (its fp32 partials).
 * A group of args.lanes threads takes one (row, head): it reads the n LSEs once into
 * shared memory, turns them into weights there, and reads the rows of the partials with
 * 16-byte loads, skipping those whose weight is 0 (lse -inf or +inf: no key). The group's
 * chunk lanes take turns over 8-element chunks of the row; its other lanes split the
 * partials (a small grid, decode's 32 (row, head)s, gets more loads in flight), up to a
 * whole block per (row, head). The split-KV forward's partials lie in its workspace, all
 * readable: there (args.read_ahead) a lane loads the rows of its first partials before
 * their weights are known, so the LSEs and the rows are waited for together (measured:
 * 0.3 us of decode's 6.3 at b 1, bench/NOTES.md dec5). Blocks of FA_COMBINE_THREADS
 * along x cover the rows x heads of one batch entry; batch entries lie over grid y and z
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

/* The block's shared memory: each group's weights (rows padded by one, so that the groups
 * of a warp reading weight i hit different banks), and room for the partial results of
 * the warps of a group wider than a warp. */
typedef struct fa_combine_smem {
    float weights[FA_COMBINE_GROUPS][FA_COMBINE_MAX_PARTIALS + 1];
    float spill[FA_COMBINE_THREADS][8];
} fa_combine_smem;

/* The larger of a and b, NaN when either is (fmaxf would drop it: a NaN LSE must give NaN). */
FA_DEVICE float fa_nan_max(float a, float b) { return b > a || b != b ? b : a; }

/* Reductions over the `lanes` lanes of each group (a power of two, groups aligned to it):
 * by shuffles within a warp, then, for a group wider than a warp, over its warps' results
 * through shared memory. Every thread of the block takes part (barriers). */
FA_DEVICE float fa_group_max(float x, int lanes, fa_combine_smem *sm)
{
    for (int m = 1; m < lanes && m < FA_WARP_SIZE; m <<= 1)
        x = fa_nan_max(x, fa_lane_xor(x, m));
    if (lanes <= FA_WARP_SIZE)
        return x;
    const int first = threadIdx.x / lanes * lanes;
    sm->spill[threadIdx.x][0] = x;
    fa_barrier();
    x = sm->spill[first][0];
    for (int w = FA_WARP_SIZE; w < lanes; w += FA_WARP_SIZE)
        x = fa_nan_max(x, sm->spill[first + w][0]);
    fa_barrier();
    return x;
}

/* acc summed over the lanes `from` apart and beyond (from = 1: all the group's lanes;
 * from = chunk lanes: the lanes of one chunk), `count` values per lane. */
FA_DEVICE void fa_group_sum(float *acc, int count, int from, int lanes, fa_combine_smem *sm)
{
    for (int m = from; m < lanes && m < FA_WARP_SIZE; m <<= 1)
        for (int k = 0; k < count; ++k)
            acc[k] += fa_lane_xor(acc[k], m);
    if (lanes <= FA_WARP_SIZE)
        return;
    const int first = threadIdx.x / lanes * lanes, in_warp = threadIdx.x % FA_WARP_SIZE;
    for (int k = 0; k < count; ++k)
        sm->spill[threadIdx.x][k] = acc[k];
    fa_barrier();
    for (int k = 0; k < count; ++k) {
        acc[k] = sm->spill[first + in_warp][k];
        for (int w = FA_WARP_SIZE; w < lanes; w += FA_WARP_SIZE)
            acc[k] += sm->spill[first + w + in_warp][k];
    }
    fa_barrier();
}

/* Partial i's out and LSE (attn_args.h: a pointer each, or a base and a split stride). */
FA_DEVICE const void *fa_combine_part_out(const fa_combine_args *a, int i)
{
    const int at = a->part_out_split ? 0 : i;
    const int elem = a->part_dtype == FA_DTYPE_F32 ? 4 : 2;
    return (const char *)a->part_out[at] + (long long)i * a->part_out_split * elem;
}
FA_DEVICE const float *fa_combine_part_lse(const fa_combine_args *a, int i)
{
    return a->part_lse[a->part_lse_split ? 0 : i] + (long long)i * a->part_lse_split;
}

FA_DEVICE int fa_no_key(float lse) { return fabsf(lse) == INFINITY; }

/* One (row, head): its n LSEs into w (lane by lane), the combined LSE, and w turned into
 * the weights exp(lse_i - lse), 0 for a partial that saw no key. A NaN LSE makes the LSE
 * and every other weight NaN. valid 0 (a group past the last row): no reads, but the
 * group's lanes still take part in the reductions. */
FA_DEVICE float fa_combine_weights(const fa_combine_args *a, int valid, int batch, long long row, int head,
                                   int lane, float *w, fa_combine_smem *sm)
{
    const long long at = fa_lse_at(&a->part_lse_layout, batch, head, row);
    float max = -INFINITY, sum = 0.f;
    for (int i = lane; valid && i < a->n; i += a->lanes) {
        w[i] = fa_combine_part_lse(a, i)[at];
        if (!fa_no_key(w[i]))
            max = fa_nan_max(max, w[i]);
    }
    max = fa_group_max(max, a->lanes, sm);
    for (int i = lane; valid && max != -INFINITY && i < a->n; i += a->lanes)
        if (!fa_no_key(w[i]))
            sum += expf(w[i] - max);
    fa_group_sum(&sum, 1, 1, a->lanes, sm);
    const float lse = max == -INFINITY ? -INFINITY : max + logf(sum);
    for (int i = lane; valid && i < a->n; i += a->lanes)
        w[i] = fa_no_key(w[i]) || lse == -INFINITY ? 0.f : expf(w[i] - lse);
    return lse;
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
FA_DEVICE void fa_combine_accumulate(const fa_combine_args *a, const float *w, long long off, int first,
                                     int step, int dtype, float acc[8])
{
    const long long off_bytes = off * (dtype == FA_DTYPE_F32 ? 4 : 2);
    for (int i0 = first; i0 < a->n; i0 += FA_COMBINE_UNROLL * step) {
        float wu[FA_COMBINE_UNROLL], v[FA_COMBINE_UNROLL][8] = {};
#pragma unroll
        for (int u = 0; u < FA_COMBINE_UNROLL; ++u) {
            const int i = i0 + u * step;
            wu[u] = i < a->n ? w[i] : 0.f;
            if (wu[u] != 0.f)
                fa_combine_load8(v[u], (const char *)fa_combine_part_out(a, i) + off_bytes, dtype);
        }
        /* A partial not read adds 0 * 0. */
#pragma unroll
        for (int u = 0; u < FA_COMBINE_UNROLL; ++u)
#pragma unroll
            for (int k = 0; k < 8; ++k)
                acc[k] = fmaf(wu[u], v[u][k], acc[k]);
    }
}

/* Partials per lane whose rows are loaded ahead of the weights (args.read_ahead). */
#define FA_COMBINE_AHEAD 8

typedef struct fa_combine_ahead {
    float v[FA_COMBINE_AHEAD][8];
} fa_combine_ahead;

/* The fp32 rows at element offset `off` of partials first, first + step, ... (the first
 * FA_COMBINE_AHEAD of them), whatever their weights will be: the split-KV workspace holds
 * every split's rows, written or not. */
FA_DEVICE void fa_combine_load_ahead(const fa_combine_args *a, long long off, int first, int step,
                                     fa_combine_ahead *ahead)
{
#pragma unroll
    for (int u = 0; u < FA_COMBINE_AHEAD; ++u) {
        const int i = first + u * step;
        if (i < a->n)
            fa_combine_load8(ahead->v[u], (const float *)fa_combine_part_out(a, i) + off, FA_DTYPE_F32);
        else
            for (int k = 0; k < 8; ++k)
                ahead->v[u][k] = 0.f;
    }
}

#if FA_COMBINE_AHEAD % FA_COMBINE_UNROLL != 0
#error "the rows read ahead must end where a round of fa_combine_accumulate ends"
#endif

/* acc += w_i * out_i over the rows loaded ahead, exactly as fa_combine_accumulate's rounds
 * of FA_COMBINE_UNROLL would add them, so the sums keep their bits (a -0 included): a
 * round that starts past the last partial adds nothing, the rest of one that runs past
 * it adds 0 * 0, and a row of weight 0 adds 0 * 0 (it may be a split's row nobody wrote). */
FA_DEVICE void fa_combine_add_ahead(const fa_combine_args *a, const float *w, int first, int step,
                                    const fa_combine_ahead *ahead, float acc[8])
{
#pragma unroll
    for (int u = 0; u < FA_COMBINE_AHEAD; ++u) {
        const int i = first + u * step;
        if (first + (u - u % FA_COMBINE_UNROLL) * step >= a->n)
            break;
        const float wi = i < a->n ? w[i] : 0.f;
#pragma unroll
        for (int k = 0; k < 8; ++k)
            acc[k] = fmaf(wi, wi != 0.f ? ahead->v[u][k] : 0.f, acc[k]);
    }
}

/* out's row of one (row, head) from the weights: the chunk lanes take turns over its
 * 8-element chunks, each lane of a chunk sums its share of the partials, and the shares
 * meet in fa_group_sum (every thread takes part, so the loop runs as often for all). */
FA_DEVICE void fa_combine_row(const fa_combine_args *a, int valid, int batch, long long row, int head,
                              int lane, const float *w, int read_ahead, const fa_combine_ahead *ahead,
                              fa_combine_smem *sm)
{
    const int chunks = a->head_dim / 8, chunk = lane % a->chunk_lanes, share = lane / a->chunk_lanes;
    const int shares = a->lanes / a->chunk_lanes;
    const long long part_row = fa_row_at(&a->part_out_layout, batch, row, head);
    unsigned short *out = (unsigned short *)a->out + fa_row_at(&a->out_layout, batch, row, head);
    for (int c0 = 0; c0 < chunks; c0 += a->chunk_lanes) {
        const int c = c0 + chunk, active = valid && c < chunks;
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        const long long off = part_row + 8LL * c;
        if (active && read_ahead && c0 == 0) {
            fa_combine_add_ahead(a, w, share, shares, ahead, acc);
            fa_combine_accumulate(a, w, off, share + FA_COMBINE_AHEAD * shares, shares, FA_DTYPE_F32, acc);
        } else if (active && a->part_dtype == FA_DTYPE_F32)
            fa_combine_accumulate(a, w, off, share, shares, FA_DTYPE_F32, acc);
        else if (active && a->part_dtype == FA_DTYPE_BF16)
            fa_combine_accumulate(a, w, off, share, shares, FA_DTYPE_BF16, acc);
        else if (active)
            fa_combine_accumulate(a, w, off, share, shares, FA_DTYPE_F16, acc);
        fa_group_sum(acc, 8, a->chunk_lanes, a->lanes, sm);
        if (!active || share != 0)
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

extern "C" FA_GLOBAL void __launch_bounds__(FA_COMBINE_THREADS) FA_CAT(FA_KERNEL_PREFIX, combine)(fa_combine_args args)
{
    FA_SHARED_OBJECT(fa_combine_smem, sm);
    unsigned zero, batch_u;
    fa_wait_prior_grid(); /* the split-KV forward before it wrote the partials */
    fa_block_pair(1, args.batch, &zero, &batch_u);
    if (batch_u == (unsigned)args.batch) /* past the last batch entry */
        return;
    const int batch = (int)batch_u;
    if (args.seq_ok && !args.seq_ok[batch]) /* the device check found the sequence bad */
        return;
    long long row0 = 0, rows = args.rows;
    if (args.cu_seqlens_q) {
        row0 = args.cu_seqlens_q[batch];
        rows = args.cu_seqlens_q[batch + 1] - row0;
    }
    const int groups = FA_COMBINE_THREADS / args.lanes;
    const long long items = rows * args.heads, item = (long long)blockIdx.x * groups + threadIdx.x / args.lanes;
    if ((long long)blockIdx.x * groups >= items) /* the whole block past the sequence's rows */
        return;
    const int valid = item < items, lane = threadIdx.x % args.lanes;
    const long long row = row0 + item / args.heads;
    const int head = (int)(item % args.heads);
    float *w = sm.weights[threadIdx.x / args.lanes];
    /* Read ahead: the first round of chunks (every round up to d256: 32 chunk lanes). */
    fa_combine_ahead ahead;
    const int chunk = lane % args.chunk_lanes, ahead_ok = args.read_ahead && valid && chunk < args.head_dim / 8;
    if (ahead_ok)
        fa_combine_load_ahead(&args, fa_row_at(&args.part_out_layout, batch, row, head) + 8LL * chunk,
                              lane / args.chunk_lanes, args.lanes / args.chunk_lanes, &ahead);
    const float lse = fa_combine_weights(&args, valid, batch, row, head, lane, w, &sm);
    fa_barrier(); /* the group's weights, written lane by lane, read by every lane */
    fa_combine_row(&args, valid, batch, row, head, lane, w, ahead_ok, &ahead, &sm);
    if (valid && lane == 0 && args.lse)
        args.lse[fa_lse_at(&args.lse_layout, batch, head, row)] = lse;
}

#endif /* FA_ATTN_COMBINE_H */
