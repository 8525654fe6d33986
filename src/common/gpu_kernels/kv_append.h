/*
 * kv_append.h - the kvcache append kernel, written once for every vendor: for each batch
 * entry b and row j of k_new / v_new, writes them to cache key n_b + j (n_b =
 * cache_seqlens[b]) of the entry's cache row or page, k rotated at that position when
 * rotary is set; copies q rotated at n_b + s_new - s_q + t into the workspace for the
 * attention; and writes seqused[b] = n_b + s_new, the attention's per-entry keys.
 * Block (x, pair): row x of entry b (the (1, batch) pairs of launch_grid.h), its threads
 * over (head, 8-element chunk); x spans max(s_new, s_q when rotating q). The element type
 * is a run-time flag. The device check (seq_check.h) runs first and holds every
 * device-data rule (lengths, capacity, q positions, cache rows, page ids): an entry it
 * marks bad in seq_ok writes no cache row and gets seqused 0 (its q copy is unrotated),
 * so nothing outside the cache is ever written. Included once by the vendor's
 * shared-kernels translation unit.
 */
#ifndef FA_KV_APPEND_H
#define FA_KV_APPEND_H

#include "fa_device.h"
#include "gpu_kernels/append_args.h"
#include "gpu_kernels/attn_sequence.h"

FA_DEVICE float fa_load_half(const unsigned short *p, int bf16)
{
    return bf16 ? fa_unpack2_bf16(*p).x : fa_unpack2_f16(*p).x;
}

/* Element offset of key `key` of entry b, head h, in a cache laid out as `layout` (the
 * entry's page ids were checked by the device check). */
FA_DEVICE long long fa_cache_row(const fa_append_args *a, const fa_operand_layout *layout, int b,
                                 long long key, int h)
{
    if (!a->block_table)
        return fa_row_at(layout, b, key, h);
    const int page = a->block_table[(long long)b * a->block_table_stride + key / a->page_size];
    return fa_row_at(layout, page, key % a->page_size, h);
}

/* Chunk c (8 elements) of a head row from src to dst, rotated at pos when rotate is
 * set: interleaved pairs lie inside the chunk; the other layout pairs chunk c with the
 * one rotary_dim / 2 away (a whole chunk: rotary_dim % 16 == 0). Rotated in fp32,
 * rounded once. */
FA_DEVICE void fa_rotate_chunk(const fa_append_args *a, unsigned short *dst, const unsigned short *src,
                               int c, long long pos, int rotate)
{
    const int e0 = c * 8, half = a->rotary_dim / 2;
    uint4 own = *(const uint4 *)(src + e0);
    if (!rotate || e0 >= a->rotary_dim) {
        *(uint4 *)(dst + e0) = own;
        return;
    }
    const unsigned short *cos_row = (const unsigned short *)a->rotary_cos + pos * half;
    const unsigned short *sin_row = (const unsigned short *)a->rotary_sin + pos * half;
    const int second = !a->rotary_interleaved && e0 >= half;
    uint4 mate = own;
    if (!a->rotary_interleaved)
        mate = *(const uint4 *)(src + (second ? e0 - half : e0 + half));
    const uint32_t xs[4] = {own.x, own.y, own.z, own.w}, ms[4] = {mate.x, mate.y, mate.z, mate.w};
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 x = a->bf16 ? fa_unpack2_bf16(xs[i]) : fa_unpack2_f16(xs[i]);
        float2 m = a->bf16 ? fa_unpack2_bf16(ms[i]) : fa_unpack2_f16(ms[i]);
        float lo, hi;
        if (a->rotary_interleaved) { /* the pair (x.x, x.y) at t = e0 / 2 + i */
            const int t = e0 / 2 + i;
            const float cs = fa_load_half(cos_row + t, a->bf16), sn = fa_load_half(sin_row + t, a->bf16);
            lo = x.x * cs - x.y * sn;
            hi = x.x * sn + x.y * cs;
        } else { /* elements e = e0 + 2i, e + 1, each paired with m's */
            const int t = (second ? e0 - half : e0) + 2 * i;
            const float c0 = fa_load_half(cos_row + t, a->bf16), s0 = fa_load_half(sin_row + t, a->bf16);
            const float c1 = fa_load_half(cos_row + t + 1, a->bf16), s1 = fa_load_half(sin_row + t + 1, a->bf16);
            lo = second ? m.x * s0 + x.x * c0 : x.x * c0 - m.x * s0;
            hi = second ? m.y * s1 + x.y * c1 : x.y * c1 - m.y * s1;
        }
        out[i] = a->bf16 ? fa_pack2_bf16(lo, hi) : fa_pack2_f16(lo, hi);
    }
    *(uint4 *)(dst + e0) = make_uint4(out[0], out[1], out[2], out[3]);
}

/* Row j of k_new / v_new of entry b into the cache, every kv head. */
FA_DEVICE void fa_append_row(const fa_append_args *a, int b, int j, long long key)
{
    const int chunks = a->head_dim / 8;
    for (int i = threadIdx.x; i < a->heads_k * chunks; i += blockDim.x) {
        const int h = i / chunks, c = i % chunks;
        const long long k_at = fa_cache_row(a, &a->k_cache_layout, b, key, h);
        const long long v_at = fa_cache_row(a, &a->v_cache_layout, b, key, h);
        fa_rotate_chunk(a, (unsigned short *)a->k_cache + k_at,
                        (const unsigned short *)a->k_new + fa_row_at(&a->k_new_layout, b, j, h), c, key,
                        a->rotary_cos != 0);
        fa_rotate_chunk(a, (unsigned short *)a->v_cache + v_at,
                        (const unsigned short *)a->v_new + fa_row_at(&a->v_new_layout, b, j, h), c, key, 0);
    }
}

/* Row t of q of entry b into its rotated copy, every head. */
FA_DEVICE void fa_rotate_q_row(const fa_append_args *a, int b, int t, long long pos, int rotate)
{
    const int chunks = a->head_dim / 8;
    for (int i = threadIdx.x; i < a->heads * chunks; i += blockDim.x) {
        const int h = i / chunks, c = i % chunks;
        fa_rotate_chunk(a, (unsigned short *)a->q_rot + fa_row_at(&a->q_rot_layout, b, t, h),
                        (const unsigned short *)a->q + fa_row_at(&a->q_layout, b, t, h), c, pos, rotate);
    }
}

extern "C" FA_GLOBAL void FA_CAT(FA_KERNEL_PREFIX, kv_append)(fa_append_args args)
{
    unsigned unused, batch_u;
    fa_wait_prior_grid(); /* the device check before it wrote seq_ok */
    fa_allow_next_grid();
    fa_block_pair(1, args.batch, &unused, &batch_u);
    if (batch_u == (unsigned)args.batch) /* past the last pair */
        return;
    const int b = (int)batch_u, row = blockIdx.x;
    const long long n = args.cache_seqlens[b];
    const int ok = args.seq_ok[b];
    if (row == 0 && threadIdx.x == 0)
        args.seqused[b] = ok ? (int)(n + args.seqlen_new) : 0;
    if (ok && row < args.seqlen_new)
        fa_append_row(&args, b, row, n + row);
    if (args.q_rot && row < args.seqlen_q)
        fa_rotate_q_row(&args, b, row, n + args.seqlen_new - args.seqlen_q + row, ok);
}

#endif /* FA_KV_APPEND_H */
