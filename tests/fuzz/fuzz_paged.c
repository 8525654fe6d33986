/*
 * fuzz_paged.c - libFuzzer target over paged K/V (fa_fwd with params.block_table) and
 * fa_fwd_kvcache (contiguous or paged caches, append, rotary, cache_batch_idx) on the CPU
 * backend. fuzz_api.c covers every other argument of the API; this target exists because
 * its requests never page successfully and never append: here the base request is always
 * valid, and mutations break it in targeted ways.
 *
 * An input gives a small valid request (page size, block table with shared pages, pages
 * in any order and garbage past each sequence's keys, partial last pages through
 * seqused_k or varlen lengths; or a cache with its lengths, new keys and rotary tables),
 * then a list of mutations. Every buffer is allocated at exactly its size, so
 * AddressSanitizer sees any access outside it; out and lse start as 0xFF bytes, and the
 * key rows no sequence may read (pages no entry needs, rows past a sequence's keys,
 * cache rows past n_i + s_new) hold NaN, so reading one poisons the result.
 *
 * expect() derives from flashattn.h whether the final request must succeed, must fail
 * (and with which named status, where the header names one and every broken rule names
 * the same), or may do either (rules the header leaves open, e.g. page ids past the
 * keys seqused_k keeps). The target aborts when:
 *   - a status is outside fa_status, fa_last_error is empty on error or set on success;
 *   - a request that must fail succeeds, one that must succeed fails, or a named status
 *     differs;
 *   - a failed call changed out, lse, the caches or any input (q, k_new, v_new, the
 *     table, the lengths, rotary tables, descriptors and params), or a successful one
 *     changed an input;
 *   - on success: out or lse has a non-finite element where a finite one is due, or
 *     differs from a double-precision reference over the logical keys (paged fwd: through
 *     the table; kvcache: the cache as the call left it, q rotated as the header says);
 *     the cache differs from the old cache with k_new / v_new appended (k rotated, within
 *     one rounding of the dtype) at keys n_i .. n_i + s_new - 1 (slots two entries write
 *     are not compared, the rest must be unchanged);
 *   - the workspace query disagrees with the call (it must fail on a host rule and
 *     succeed on a valid request), or with the call's needs (too small a workspace
 *     accepted);
 *   - crashes, sanitizer reports, leaks.
 *
 * INPUT FORMAT (INT as in fuzz_api.c: one byte c < 0x80 is c - 16, 0xFE raw int32,
 * 0xFF raw int64, else k_int_special[(c - 0x80) % N]; reads past the end give 0)
 *   byte mode   bit0 fa_fwd_kvcache (else paged fa_fwd), bits1-2 dtype (0, 3 f32; 1 f16;
 *               2 bf16), bit3 lse, bit4 causal, bit5 window_left from a byte (% 20 - 1),
 *               bit6 two threads, bit7 a workspace from the size query
 *   byte feat   paged fa_fwd: bit0 varlen, bit1 seqused_k, bit2 few pages (shared),
 *               bit3 ALiBi (slopes [h] from the seed), bit4 softcap 5;
 *               kvcache: bit0 paged cache, bit1 k_new/v_new, bit2 rotary, bit3
 *               interleaved, bit4 cache_batch_idx (contiguous caches), bit5 few pages,
 *               bit6 ALiBi, bit7 softcap 5
 *   bytes       b (1 + v % 4), s_q (v % 17), h_k (1 + v % 2), group (1 + v % 2),
 *               d (16 * (1 + v % 4)), page size (16 * (1 + v % 4); v >= 0xF8: 16 *
 *               (1 + the next byte % 64)), table width (1 + v % 4, at most 512 keys, or
 *               one page of more), extra table stride (v % 3), seed, [window_left
 *               byte (mode bit5)]
 *   paged fa_fwd: num_pages byte (few: 1 + v % 3, else b * width + v % 3); the table
 *               entries from the seed; varlen: per entry a byte len_q (% 17) and len_k
 *               (% (width * P + 1)); seqused_k: per entry a byte u (% (keys + 1))
 *   kvcache:    contiguous: s_max byte (1 + v % 48), b_cache extra byte (v % 3, with
 *               cache_batch_idx); paged: num_pages as above; s_new byte (% (min(16,
 *               capacity) + 1)); per entry a byte n (% (capacity - s_new + 1)); rotary:
 *               rotary_dim byte (16 * (1 + v % (d / 16))), rotary_seqlen extra (v % 3)
 *   then mutations until the input ends, each a byte op (% 33) and operands:
 *      0 page_block_size = INT     1 block_table_width = INT   2 table stride = INT
 *      3 table[byte] = INT         4 block_table NULL          5 seqused_k[byte] = INT
 *      6 max_seqlen_k = INT        7 cu_seqlens_k[byte] = INT  8 k shape[byte % 4] = INT
 *      9 v shape[byte % 4] = INT   10 params.reserved[byte % 7] = INT
 *     11 every table entry = num_pages                         12 cu_seqlens_q[byte] = INT
 *     13 cache_seqlens[byte] = INT 14 cache_batch_idx[byte] = INT
 *     15 rotary_dim = INT          16 rotary_seqlen = INT      17 rotary_interleaved = INT
 *     18 rotary_sin NULL           19 k_new shape[1] = INT     20 v_new shape[1] = INT
 *     21 k_new NULL                22 toggle cache_batch_idx   23 kv.reserved[byte % 8] = INT
 *     24 seqused_k on a kvcache call                           25 k_cache shape[0] = byte % 8
 *     26 workspace one byte short  27 rotary_cos NULL          28 table[byte] = -1 - byte
 *     29 num_splits = byte % 5      30 kv.cache_seqlens NULL    31 out shape[byte % 4] = INT
 *     32 lse shape[byte % 3] = INT
 *   (indices taken modulo the array's length; a mutation that does not apply is skipped.)
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"
#define FUZZ_TARGET_NAME "fuzz_paged"
#include "fuzz_common.h"

#define MAX_B 4
#define CAP_ELEMS ((int64_t)1 << 20) /* largest pool, cache or table the harness backs */
#define POISON 0xFF
#define MAX_WORK ((int64_t)1 << 21) /* multiply-adds of a compared reference */

/* ------------------------------------------------------------------------------------ */
/* Reading the input (the INT encoding of fuzz_api.c)                                   */
/* ------------------------------------------------------------------------------------ */

static const int64_t k_int_special[] = {
    0, 1, -1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 48, 63, 64, 65, 255, 256, 257, 1008, 1023,
    1024, 1025, 1040, 4096, 65536, 2147483646LL, 2147483647LL, 2147483648LL,
    -2147483647LL - 1, 4294967296LL, (int64_t)1 << 40, (int64_t)1 << 61, (int64_t)1 << 62,
    INT64_MAX / 8, INT64_MAX / 4, INT64_MAX / 2, INT64_MAX, INT64_MIN, -2, -16, -1024,
};
#define N_INT_SPECIAL ((int)(sizeof k_int_special / sizeof k_int_special[0]))

#define rd_int(r) rd_int_in((r), k_int_special, N_INT_SPECIAL)
#define rd_int32(r) rd_int32_in((r), k_int_special, N_INT_SPECIAL)

/* ------------------------------------------------------------------------------------ */
/* Small helpers                                                                        */
/* ------------------------------------------------------------------------------------ */

/* Small helpers those loops call per element: uninstrumented too, and inlined. */
#define QUIET __attribute__((no_sanitize("coverage")))

static int64_t element_bytes(fa_dtype dt)
{
    return dt == FA_DTYPE_F32 ? 4 : 2;
}

/* fp32 to the dtype, rounded to nearest even (the library's rounding of a stored row). */
QUIET static void store_float(unsigned char *at, fa_dtype dt, float f)
{
    if (dt == FA_DTYPE_F32) {
        memcpy(at, &f, 4);
    } else if (dt == FA_DTYPE_BF16) {
        uint32_t bits = bits_of_float(f);
        uint16_t b = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
        memcpy(at, &b, 2);
    } else {
        _Float16 h = (_Float16)f;
        memcpy(at, &h, 2);
    }
}

QUIET static double load_at(const unsigned char *at, fa_dtype dt)
{
    if (dt == FA_DTYPE_F32) {
        float f;
        memcpy(&f, at, 4);
        return f;
    } else if (dt == FA_DTYPE_BF16) {
        uint16_t b;
        memcpy(&b, at, 2);
        return float_of_bits((uint32_t)b << 16);
    } else {
        _Float16 h;
        memcpy(&h, at, 2);
        return (double)h;
    }
}

/* k / 64 for |k| <= 32: exact in all three dtypes. */
static void store_small(unsigned char *at, fa_dtype dt, rng *g)
{
    store_float(at, dt, (float)((int)(rng_next(g) % 65) - 32) / 64.0f);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (!p)
        abort();
    return p;
}

/* ------------------------------------------------------------------------------------ */
/* The request                                                                          */
/* ------------------------------------------------------------------------------------ */

/* A contiguous tensor of the harness: descriptor and its exact allocation. */
typedef struct buf {
    fa_tensor t;
    int present;
    unsigned char *alloc;
    size_t bytes;
    unsigned char *before; /* the bytes before the call */
} buf;

enum { B_Q, B_K, B_V, B_OUT, B_LSE, B_KNEW, B_VNEW, B_COUNT };
static const char *const k_bname[B_COUNT] = {"q", "k", "v", "out", "lse", "k_new", "v_new"};

typedef struct request {
    int kvcache, lse, threads, workspace, ws_short;
    fa_dtype dtype;
    int varlen, seqused, few_pages;
    int paged, append, rotary, interleaved, batch_idx, alibi;
    float slopes[8];
    int64_t b, s_q, h_k, h, d, page, width, stride_extra, num_pages;
    int64_t s_max, b_cache, s_new, capacity;
    uint32_t seed;
    int64_t len_q[MAX_B], len_k[MAX_B], used[MAX_B], cache_len[MAX_B];
    fa_params params;
    fa_kvcache_params kv;
    buf bufs[B_COUNT];
    /* arrays the call reads, with their entry counts */
    int32_t *table, *cu_q, *cu_k, *seqused_k, *cache_seqlens, *cache_idx;
    int64_t table_count;
    int has_table, has_seqused, has_idx, kv_seqused;
    int rotary_cos_null, rotary_sin_null, no_cache_seqlens;
    unsigned char *cos, *sin;
    int64_t rotary_count; /* elements of each of cos and sin */
    int rotary_unbacked;  /* the final fields describe tables too large to back */
    /* mutations that land after the arrays are built */
    struct {
        int op, index;
        int64_t value;
    } late[32];
    int n_late;
} request;

static int64_t rows_of_pool(const request *rq)
{
    return rq->paged ? rq->page : rq->s_max;
}

/* Parses the base request; mutations that touch arrays are queued for build(). */
static void parse(request *rq, const uint8_t *data, size_t size)
{
    reader r = {data, size};
    uint8_t mode, feat, v;
    int64_t i;

    memset(rq, 0, sizeof *rq);
    mode = rd_u8(&r);
    feat = rd_u8(&r);
    rq->kvcache = mode & 1;
    rq->dtype = ((mode >> 1) & 3) == 1 ? FA_DTYPE_F16 : ((mode >> 1) & 3) == 2 ? FA_DTYPE_BF16
                                                                                : FA_DTYPE_F32;
    rq->lse = (mode >> 3) & 1;
    fa_params_init(&rq->params);
    fa_kvcache_params_init(&rq->kv);
    rq->params.causal = (mode >> 4) & 1;
    rq->threads = mode & 0x40 ? 2 : 1;
    rq->workspace = mode >> 7;
    if (rq->kvcache) {
        rq->paged = feat & 1;
        rq->append = (feat >> 1) & 1;
        rq->rotary = (feat >> 2) & 1;
        rq->interleaved = (feat >> 3) & 1;
        rq->batch_idx = !rq->paged && ((feat >> 4) & 1);
        rq->few_pages = (feat >> 5) & 1;
        rq->alibi = (feat >> 6) & 1;
        rq->params.softcap = feat & 0x80 ? 5.0f : 0.0f;
    } else {
        rq->paged = 1;
        rq->varlen = feat & 1;
        rq->seqused = (feat >> 1) & 1;
        rq->few_pages = (feat >> 2) & 1;
        rq->alibi = (feat >> 3) & 1;
        rq->params.softcap = feat & 0x10 ? 5.0f : 0.0f;
    }
    rq->b = 1 + rd_u8(&r) % MAX_B;
    rq->s_q = rd_u8(&r) % 17;
    rq->h_k = 1 + rd_u8(&r) % 2;
    rq->h = rq->h_k * (1 + rd_u8(&r) % 2);
    rq->d = 16 * (1 + rd_u8(&r) % 4);
    v = rd_u8(&r);
    rq->page = v >= 0xF8 ? 16 * (1 + rd_u8(&r) % 64) : 16 * (1 + v % 4);
    rq->width = 1 + rd_u8(&r) % 4;
    if (rq->width * rq->page > 512) /* large pages: at most 1024 keys an entry */
        rq->width = rq->page >= 512 ? 1 : 512 / rq->page;
    rq->stride_extra = rd_u8(&r) % 3;
    rq->seed = rd_u8(&r);
    if (mode & 0x20)
        rq->params.window_left = rd_u8(&r) % 20 - 1;
    if (!rq->paged) {
        rq->page = rq->width = rq->stride_extra = 0;
        rq->s_max = 1 + rd_u8(&r) % 48;
        rq->b_cache = rq->b + (rq->batch_idx ? rd_u8(&r) % 3 : 0);
        rq->capacity = rq->s_max;
    } else {
        v = rd_u8(&r);
        rq->num_pages = rq->few_pages ? 1 + v % 3 : rq->b * rq->width + v % 3;
        rq->capacity = rq->width * rq->page;
        rq->params.block_table_width = (int)rq->width;
        rq->params.block_table_batch_stride = rq->width + rq->stride_extra;
        rq->params.page_block_size = (int)rq->page;
        rq->has_table = 1;
    }
    if (rq->kvcache) {
        int64_t most = rq->capacity < 16 ? rq->capacity : 16;
        rq->s_new = rq->append ? rd_u8(&r) % (most + 1) : 0;
        for (i = 0; i < rq->b; i++) {
            rq->cache_len[i] = rd_u8(&r) % (rq->capacity - rq->s_new + 1);
            rq->len_k[i] = rq->used[i] = rq->cache_len[i] + rq->s_new;
            rq->len_q[i] = rq->s_q;
        }
        if (rq->rotary) {
            rq->kv.rotary_dim = 16 * (1 + rd_u8(&r) % (rq->d / 16));
            rq->kv.rotary_interleaved = rq->interleaved;
            rq->kv.rotary_seqlen = rq->capacity + rd_u8(&r) % 3;
            /* no q row before position 0: n_i + s_new >= s_q */
            for (i = 0; i < rq->b; i++)
                if (rq->len_k[i] < rq->s_q) {
                    rq->s_q = rq->len_k[i];
                }
            for (i = 0; i < rq->b; i++)
                rq->len_q[i] = rq->s_q;
        }
        rq->has_idx = rq->batch_idx;
    } else {
        for (i = 0; i < rq->b; i++) {
            rq->len_q[i] = rq->varlen ? rd_u8(&r) % 17 : rq->s_q;
            rq->len_k[i] = rq->varlen ? rd_u8(&r) % (rq->capacity + 1) : rq->capacity;
            rq->used[i] = rq->len_k[i];
        }
        if (rq->seqused) {
            rq->has_seqused = 1;
            for (i = 0; i < rq->b; i++)
                rq->used[i] = rd_u8(&r) % (rq->len_k[i] + 1);
        }
        if (rq->varlen) {
            int64_t mq = 0, mk = 0;
            for (i = 0; i < rq->b; i++) {
                mq = rq->len_q[i] > mq ? rq->len_q[i] : mq;
                mk = rq->len_k[i] > mk ? rq->len_k[i] : mk;
            }
            rq->params.varlen_batch = (int)rq->b;
            rq->params.max_seqlen_q = (int)mq;
            rq->params.max_seqlen_k = (int)mk;
        }
    }

    /* The tensors, contiguous: q-like [b, s_q, h, d] (varlen [total_q, h, d]), pools or
     * caches [pages or b_cache, rows, h_k, d]. Mutations may change shapes afterwards. */
    {
        int64_t total_q = 0;
        fa_dtype dt = rq->dtype;
        for (i = 0; i < rq->b; i++)
            total_q += rq->len_q[i];
        if (rq->varlen) {
            rq->bufs[B_Q].t = fa_tensor_thd(NULL, dt, total_q, rq->h, rq->d);
            rq->bufs[B_LSE].t = fa_tensor_lse_varlen(NULL, rq->h, total_q);
        } else {
            rq->bufs[B_Q].t = fa_tensor_bshd(NULL, dt, rq->b, rq->s_q, rq->h, rq->d);
            rq->bufs[B_LSE].t = fa_tensor_lse(NULL, rq->b, rq->h, rq->s_q);
        }
        rq->bufs[B_OUT].t = rq->bufs[B_Q].t;
        rq->bufs[B_K].t = fa_tensor_bshd(NULL, dt, rq->paged ? rq->num_pages : rq->b_cache,
                                         rows_of_pool(rq), rq->h_k, rq->d);
        rq->bufs[B_V].t = rq->bufs[B_K].t;
        rq->bufs[B_KNEW].t = fa_tensor_bshd(NULL, dt, rq->b, rq->s_new, rq->h_k, rq->d);
        rq->bufs[B_VNEW].t = rq->bufs[B_KNEW].t;
        for (i = 0; i < B_COUNT; i++)
            rq->bufs[i].present = 1;
        rq->bufs[B_LSE].present = rq->lse;
        rq->bufs[B_KNEW].present = rq->bufs[B_VNEW].present = rq->append;
    }

    while (r.n > 0) {
        int op = rd_u8(&r) % 33, k;
        fa_params *p = &rq->params;
        switch (op) {
        case 0: p->page_block_size = rd_int32(&r); break;
        case 1: p->block_table_width = rd_int32(&r); break;
        case 2: p->block_table_batch_stride = rd_int(&r); break;
        case 4: rq->has_table = 0; break;
        case 6: p->max_seqlen_k = rd_int32(&r); break;
        case 8:
        case 9:
            k = rd_u8(&r) % 4;
            rq->bufs[op == 8 ? B_K : B_V].t.shape[k] = rd_int(&r);
            break;
        case 10: k = rd_u8(&r) % 7; p->reserved[k] = rd_int32(&r); break;
        case 15: rq->kv.rotary_dim = rd_int32(&r); break;
        case 16: rq->kv.rotary_seqlen = rd_int(&r); break;
        case 17: rq->kv.rotary_interleaved = rd_int32(&r); break;
        case 18: rq->rotary_sin_null = 1; break;
        case 19:
        case 20: rq->bufs[op == 19 ? B_KNEW : B_VNEW].t.shape[1] = rd_int(&r); break;
        case 21: rq->bufs[B_KNEW].present = 0; break;
        case 22: rq->has_idx = !rq->has_idx; break;
        case 23: k = rd_u8(&r) % 8; rq->kv.reserved[k] = rd_int32(&r); break;
        case 24: rq->kv_seqused = rq->kvcache; break;
        case 25: rq->bufs[B_K].t.shape[0] = rq->bufs[B_V].t.shape[0] = rd_u8(&r) % 8; break;
        case 26: rq->ws_short = 1; break;
        case 27: rq->rotary_cos_null = 1; break;
        case 29: p->num_splits = rd_u8(&r) % 5; break;
        case 30: rq->no_cache_seqlens = 1; break;
        case 31:
        case 32:
            k = rd_u8(&r) % (op == 31 ? 4 : 3);
            rq->bufs[op == 31 ? B_OUT : B_LSE].t.shape[k] = rd_int(&r);
            break;
        default: /* 3, 5, 7, 11, 12, 13, 14, 28: array contents */
            if (rq->n_late < 32) {
                rq->late[rq->n_late].op = op;
                rq->late[rq->n_late].index = op == 11 ? 0 : rd_u8(&r);
                rq->late[rq->n_late].value = op == 11 || op == 28 ? 0 : rd_int32(&r);
                rq->n_late++;
            }
            break;
        }
    }
    /* Strides follow the final shapes (contiguous), so a mutated shape is a real one. */
    for (i = 0; i < B_COUNT; i++) {
        fa_tensor *t = &rq->bufs[i].t;
        int64_t stride = 1;
        int j;
        for (j = t->ndim - 1; j >= 0; j--) {
            t->stride[j] = stride;
            if (t->shape[j] > 0 && stride <= CAP_ELEMS * 16)
                stride = stride * (t->shape[j] < CAP_ELEMS * 16 ? t->shape[j] : CAP_ELEMS * 16);
        }
    }
}

/* Elements of a contiguous tensor, or -1 when a dim is negative or it exceeds the cap. */
static int64_t elements_of(const fa_tensor *t)
{
    int64_t n = 1;
    int j;
    for (j = 0; j < t->ndim; j++) {
        if (t->shape[j] < 0 || t->shape[j] > CAP_ELEMS)
            return -1;
        n *= t->shape[j];
        if (n > CAP_ELEMS)
            return -1;
    }
    return n;
}

/* ------------------------------------------------------------------------------------ */
/* Arrays and memory                                                                    */
/* ------------------------------------------------------------------------------------ */

/* Never a page id: the table entries past a sequence's keys hold these. */
static const int32_t k_garbage[2] = {1 << 30, -7};

static int32_t *ints(int64_t count)
{
    return xmalloc((size_t)(count > 0 ? count : 0) * sizeof(int32_t));
}

/* Entries of the table under the final width and stride; -1 when those are invalid or
 * the table is too large to back. */
static int64_t table_entries(const request *rq)
{
    const fa_params *p = &rq->params;
    __int128 n;
    if (p->block_table_width < 1 || p->block_table_batch_stride < p->block_table_width)
        return -1;
    n = (__int128)(rq->b - 1) * p->block_table_batch_stride + p->block_table_width;
    return n > CAP_ELEMS ? -1 : (int64_t)n;
}

/* The arrays of the call, from the base request, then the queued mutations. */
static void build_arrays(request *rq, rng *g)
{
    int64_t i, j;
    int m;
    /* table: a valid page id for every entry a sequence's keys cover under the base
     * geometry (before seqused_k cuts them: whether those past it are read is left open),
     * garbage elsewhere (the gaps between rows and the entries past the keys) */
    if (rq->paged) {
        int64_t count = table_entries(rq);
        int64_t base_stride = rq->width + rq->stride_extra;
        if (count < 0)
            count = (rq->b - 1) * base_stride + rq->width;
        rq->table_count = count;
        rq->table = ints(count);
        for (j = 0; j < count; j++)
            rq->table[j] = k_garbage[j & 1];
        for (i = 0; i < rq->b; i++) {
            int64_t pages = (rq->len_k[i] + rq->page - 1) / rq->page;
            for (j = 0; j < pages; j++) {
                int64_t at = i * base_stride + j;
                if (at < count && rq->num_pages > 0)
                    rq->table[at] = (int32_t)(rng_next(g) % (uint32_t)rq->num_pages);
            }
        }
    }
    if (rq->varlen) {
        rq->cu_q = ints(rq->b + 1);
        rq->cu_k = ints(rq->b + 1);
        rq->cu_q[0] = rq->cu_k[0] = 0;
        for (i = 0; i < rq->b; i++) {
            rq->cu_q[i + 1] = rq->cu_q[i] + (int32_t)rq->len_q[i];
            rq->cu_k[i + 1] = rq->cu_k[i] + (int32_t)rq->len_k[i];
        }
    }
    rq->seqused_k = ints(rq->b);
    for (i = 0; i < rq->b; i++)
        rq->seqused_k[i] = (int32_t)rq->used[i];
    rq->cache_seqlens = ints(rq->b);
    rq->cache_idx = ints(rq->b);
    for (i = 0; i < rq->b; i++) {
        rq->cache_seqlens[i] = (int32_t)rq->cache_len[i];
        rq->cache_idx[i] = (int32_t)i;
    }
    /* cache rows in a shuffled order, each used once (b_cache >= b) */
    for (i = rq->b - 1; i > 0; i--) {
        int64_t k = rng_next(g) % (uint32_t)(i + 1);
        int32_t x = rq->cache_idx[i];
        rq->cache_idx[i] = rq->cache_idx[k];
        rq->cache_idx[k] = x;
    }
    if (rq->b_cache > rq->b)
        rq->cache_idx[rng_next(g) % (uint32_t)rq->b] = (int32_t)(rq->b_cache - 1);

    for (m = 0; m < rq->n_late; m++) {
        int idx = rq->late[m].index;
        int32_t value = (int32_t)rq->late[m].value;
        switch (rq->late[m].op) {
        case 3:
            if (rq->table)
                rq->table[idx % rq->table_count] = value;
            break;
        case 28:
            if (rq->table)
                rq->table[idx % rq->table_count] = -1 - idx;
            break;
        case 11:
            for (j = 0; rq->table && j < rq->table_count; j++)
                rq->table[j] = (int32_t)rq->bufs[B_K].t.shape[0];
            break;
        case 5: rq->seqused_k[idx % rq->b] = value; break;
        case 7:
            if (rq->cu_k)
                rq->cu_k[idx % (rq->b + 1)] = value;
            break;
        case 12:
            if (rq->cu_q)
                rq->cu_q[idx % (rq->b + 1)] = value;
            break;
        case 13: rq->cache_seqlens[idx % rq->b] = value; break;
        default: rq->cache_idx[idx % rq->b] = value; break; /* 14 */
        }
    }
}

/* Rotary tables: rotary_seqlen rows of rotary_dim / 2 in q's dtype, exactly (when the
 * final fields describe a table the harness can back; else a token allocation). */
static void build_rotary(request *rq, rng *g)
{
    int64_t rows = rq->kv.rotary_seqlen, half = rq->kv.rotary_dim / 2, i;
    int64_t es = element_bytes(rq->dtype), capacity = rq->bufs[B_K].t.shape[1];
    if (!rq->rotary)
        return;
    if (rq->has_table)
        capacity = (int64_t)rq->params.block_table_width * rq->params.page_block_size;
    /* positions stay below the capacity: rows past it are never read */
    if (capacity >= 0 && rows > capacity)
        rows = capacity;
    if (rows < 0 || half < 1 || rows > CAP_ELEMS || rows * half > CAP_ELEMS) {
        rq->rotary_unbacked = 1;
        rows = 1;
        half = 1;
    }
    rq->rotary_count = rows * half;
    rq->cos = xmalloc((size_t)(rq->rotary_count * es));
    rq->sin = xmalloc((size_t)(rq->rotary_count * es));
    for (i = 0; i < rq->rotary_count; i++) {
        store_small(rq->cos + i * es, rq->dtype, g);
        store_small(rq->sin + i * es, rq->dtype, g);
    }
    rq->kv.rotary_cos = rq->rotary_cos_null ? NULL : rq->cos;
    rq->kv.rotary_sin = rq->rotary_sin_null ? NULL : rq->sin;
}

/* Backs every present tensor with exactly its elements (or 64 bytes when a dim is
 * negative or too large: such a request must not be computed). */
static int back_tensors(request *rq, rng *g)
{
    int w, backed = 1;
    for (w = 0; w < B_COUNT; w++) {
        buf *bf = &rq->bufs[w];
        int64_t n = elements_of(&bf->t), es = w == B_LSE ? 4 : element_bytes(bf->t.dtype), i;
        if (!bf->present)
            continue;
        if (n < 0) {
            backed = 0;
            n = 16;
        }
        bf->bytes = (size_t)(n * es);
        bf->alloc = xmalloc(bf->bytes);
        bf->t.data = bf->alloc;
        if (w == B_OUT || w == B_LSE)
            memset(bf->alloc, POISON, bf->bytes);
        else
            for (i = 0; i < n; i++)
                store_small(bf->alloc + i * es, bf->t.dtype, g);
    }
    return backed;
}

/* ------------------------------------------------------------------------------------ */
/* What the header says                                                                 */
/* ------------------------------------------------------------------------------------ */

typedef struct verdict {
    int host_bad;   /* a rule checked on the host (every call, queries included) broken */
    int device_bad; /* a device-data rule broken (the call itself fails, queries do not) */
    int output_bad; /* out or lse broken (the call fails; queries do not see them) */
    int either;     /* the header leaves the outcome open */
    int named;      /* the status every broken rule names, or -1 */
    int any;        /* some rule broken */
    char why[200];
} verdict;

#define UNNAMED (-1)

static void bad(verdict *v, int host, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void bad(verdict *v, int host, int status, const char *fmt, ...)
{
    va_list args;
    if (!v->any) {
        va_start(args, fmt);
        vsnprintf(v->why, sizeof v->why, fmt, args);
        va_end(args);
        v->named = status;
    } else if (v->named != status) {
        v->named = UNNAMED;
    }
    v->any = 1;
    if (host == 2)
        v->output_bad = 1;
    else if (host)
        v->host_bad = 1;
    else
        v->device_bad = 1;
}

/* Where key r of entry i lives in the pool (or cache): row `*row` of pool entry `*page`;
 * 0 when the table or cache_batch_idx points outside the pool. */
QUIET static int key_slot(const request *rq, int64_t i, int64_t r, int64_t *page, int64_t *row)
{
    const fa_params *p = &rq->params;
    int64_t pages = rq->bufs[B_K].t.shape[0];
    if (rq->has_table) {
        int64_t P = p->page_block_size;
        int64_t at = i * p->block_table_batch_stride + r / P;
        if (at < 0 || at >= rq->table_count)
            return 0;
        *page = rq->table[at];
        *row = r % P;
    } else {
        *page = rq->kvcache && rq->has_idx ? rq->cache_idx[i] : i;
        *row = r;
    }
    return *page >= 0 && *page < pages && *row < rq->bufs[B_K].t.shape[1];
}

/* The keys entry i attends over (valid requests only). */
QUIET static int64_t keys_of(const request *rq, int64_t i)
{
    if (rq->kvcache)
        return (int64_t)rq->cache_seqlens[i] + rq->bufs[B_KNEW].t.shape[1] * rq->bufs[B_KNEW].present;
    if (rq->has_seqused)
        return rq->seqused_k[i];
    return rq->varlen ? (int64_t)rq->cu_k[i + 1] - rq->cu_k[i]
                      : (int64_t)rq->params.block_table_width * rq->params.page_block_size;
}

static void paging_rules(const request *rq, verdict *v)
{
    const fa_params *p = &rq->params;
    __int128 last;
    if (!rq->has_table) {
        if (p->block_table_batch_stride != 0 || p->page_block_size != 0 || p->block_table_width != 0)
            /* a pool read as contiguous k may break its shape rules too */
            bad(v, 1, rq->paged ? UNNAMED : FA_ERR_BAD_PARAM, "paging fields set without block_table");
        else if (rq->paged)
            v->either = 1; /* a contiguous call over the pool: not what this target models */
        return;
    }
    if (p->page_block_size < 16 || p->page_block_size > 1024 || p->page_block_size % 16 != 0)
        bad(v, 1, FA_ERR_BAD_PARAM, "page_block_size %d", p->page_block_size);
    if (p->block_table_width < 1)
        bad(v, 1, FA_ERR_BAD_PARAM, "block_table_width %d", p->block_table_width);
    if (p->block_table_batch_stride < p->block_table_width)
        bad(v, 1, FA_ERR_BAD_PARAM, "block_table_batch_stride %lld < width %d",
            (long long)p->block_table_batch_stride, p->block_table_width);
    if ((int64_t)p->block_table_width * p->page_block_size > INT32_MAX &&
        p->block_table_width > 0 && p->page_block_size > 0)
        bad(v, 1, UNNAMED, "width x page size past int32");
    /* "the table's offsets in int64": in bytes or entries is not said; the band between
     * the two is left open */
    last = (__int128)(rq->b - 1) * p->block_table_batch_stride + p->block_table_width;
    if (last > INT64_MAX / 4)
        bad(v, 1, UNNAMED, "table offsets past int64");
    else if (last > INT64_MAX / 16)
        v->either = 1;
    if (rq->varlen && p->max_seqlen_k > (int64_t)p->block_table_width * p->page_block_size)
        bad(v, 1, FA_ERR_BAD_PARAM, "max_seqlen_k %d past the row's keys", p->max_seqlen_k);
    if (!v->host_bad && table_entries(rq) < 0)
        v->either = 1; /* a valid table too large to back: not called */
}

/* k and v: pools (or caches) [entries, rows, h_k, d] with the rows a page (or cache row)
 * holds, v shaped like k. */
static void pool_rules(const request *rq, verdict *v, int64_t rows_b)
{
    const fa_tensor *k = &rq->bufs[B_K].t, *vv = &rq->bufs[B_V].t;
    int j;
    for (j = 0; j < 4; j++) {
        if (k->shape[j] < 0 || vv->shape[j] < 0)
            bad(v, 1, UNNAMED, "a pool dim is negative");
        else if (k->shape[j] > INT32_MAX || vv->shape[j] > INT32_MAX)
            bad(v, 1, UNNAMED, "a pool dim past int32");
        if (k->shape[j] != vv->shape[j])
            bad(v, 1, UNNAMED, "v shape[%d] %lld != k %lld", j, (long long)vv->shape[j],
                (long long)k->shape[j]);
    }
    if (rq->has_table && k->shape[1] != rq->params.page_block_size)
        bad(v, 1, UNNAMED, "pool rows %lld != page_block_size %d", (long long)k->shape[1],
            rq->params.page_block_size);
    if (rows_b >= 0 && k->shape[0] != rows_b)
        bad(v, 1, UNNAMED, "cache batch %lld != b %lld", (long long)k->shape[0], (long long)rows_b);
    if (k->shape[2] < 1 || rq->h % k->shape[2] != 0)
        bad(v, 1, UNNAMED, "h %lld vs pool heads %lld", (long long)rq->h, (long long)k->shape[2]);
    if (k->shape[3] != rq->d)
        bad(v, 1, UNNAMED, "pool head_dim %lld != %lld", (long long)k->shape[3], (long long)rq->d);
}

/* Entry i's page ids for its first `keys` keys (device data, FA_ERR_BAD_SEQLENS), and those
 * of keys up to `open_to`, which the header does not say are checked. */
static void page_rules(const request *rq, verdict *v, int64_t i, int64_t keys, int64_t open_to)
{
    int64_t P = rq->params.page_block_size, j;
    int64_t pages = rq->bufs[B_K].t.shape[0];
    for (j = 0; j * P < open_to; j++) {
        int64_t at = i * rq->params.block_table_batch_stride + j;
        int32_t id = rq->table[at];
        if (id >= 0 && id < pages)
            continue;
        if (j * P < keys)
            bad(v, 0, FA_ERR_BAD_SEQLENS, "block_table[%lld][%lld] = %d not a page",
                (long long)i, (long long)j, id);
        else
            v->either = 1;
    }
}

static void expect_paged_fwd(const request *rq, verdict *v)
{
    const fa_params *p = &rq->params;
    int64_t i, total_q = 0;
    paging_rules(rq, v);
    pool_rules(rq, v, -1);
    if (v->host_bad || v->either)
        return;
    if (rq->varlen) {
        /* cu_seqlens_q as usual; cu_seqlens_k gives lengths only (no total) */
        if (rq->cu_q[0] != 0 || rq->cu_k[0] != 0)
            bad(v, 1, UNNAMED, "cu_seqlens[0] != 0");
        for (i = 0; i < rq->b; i++) {
            int64_t lq = (int64_t)rq->cu_q[i + 1] - rq->cu_q[i];
            int64_t lk = (int64_t)rq->cu_k[i + 1] - rq->cu_k[i];
            if (lq < 0 || lk < 0)
                bad(v, 1, UNNAMED, "cu_seqlens decrease at %lld", (long long)i);
            if (lq > p->max_seqlen_q || lk > p->max_seqlen_k)
                bad(v, 1, UNNAMED, "a length past max_seqlen at %lld", (long long)i);
        }
        if (rq->cu_q[rq->b] != rq->bufs[B_Q].t.shape[0])
            bad(v, 1, UNNAMED, "cu_seqlens_q[b] != total_q");
        if (p->max_seqlen_k < 0)
            bad(v, 1, UNNAMED, "max_seqlen_k < 0");
    }
    if (v->host_bad)
        return;
    for (i = 0; i < rq->b; i++) {
        int64_t keys = rq->varlen ? (int64_t)rq->cu_k[i + 1] - rq->cu_k[i]
                                  : (int64_t)p->block_table_width * p->page_block_size;
        total_q += rq->varlen ? (int64_t)rq->cu_q[i + 1] - rq->cu_q[i] : rq->s_q;
        if (rq->has_seqused && (rq->seqused_k[i] < 0 || rq->seqused_k[i] > keys))
            bad(v, 1, UNNAMED, "seqused_k[%lld] = %d outside 0..%lld", (long long)i,
                rq->seqused_k[i], (long long)keys);
    }
    if (v->host_bad)
        return;
    {
        verdict pages;
        memset(&pages, 0, sizeof pages);
        for (i = 0; i < rq->b; i++) {
            int64_t keys = rq->varlen ? (int64_t)rq->cu_k[i + 1] - rq->cu_k[i]
                                      : (int64_t)p->block_table_width * p->page_block_size;
            page_rules(rq, &pages, i, keys_of(rq, i), keys);
        }
        /* a forward without query rows launches nothing, so reads no page id */
        if (pages.any && total_q == 0)
            v->either = 1;
        else if (pages.any)
            *v = pages;
        else
            v->either |= pages.either;
    }
}

static void expect_kvcache(const request *rq, verdict *v)
{
    const fa_params *p = &rq->params;
    const fa_kvcache_params *kv = &rq->kv;
    const buf *kn = &rq->bufs[B_KNEW], *vn = &rq->bufs[B_VNEW];
    int64_t i, capacity, s_new = 0;
    int rotary;
    for (i = 0; i < 8; i++)
        if (kv->reserved[i] != 0)
            bad(v, 1, FA_ERR_BAD_PARAM, "kv.reserved[%lld]", (long long)i);
    if (rq->kv_seqused)
        bad(v, 1, FA_ERR_UNSUPPORTED, "seqused_k on fa_fwd_kvcache");
    if (rq->has_idx && rq->has_table)
        bad(v, 1, FA_ERR_UNSUPPORTED, "cache_batch_idx with block_table");
    paging_rules(rq, v);
    pool_rules(rq, v, rq->has_table || rq->has_idx ? -1 : rq->b);
    if (v->host_bad || v->either)
        return;
    capacity = rq->has_table ? (int64_t)p->block_table_width * p->page_block_size
                             : rq->bufs[B_K].t.shape[1];
    if (kn->present != vn->present)
        bad(v, 1, FA_ERR_NULL_POINTER, "only one of k_new / v_new");
    if (kn->present && vn->present) {
        s_new = kn->t.shape[1];
        if (s_new < 0 || vn->t.shape[1] < 0)
            bad(v, 1, UNNAMED, "s_new negative");
        else if (vn->t.shape[1] != s_new)
            bad(v, 1, UNNAMED, "v_new s_new %lld != k_new %lld", (long long)vn->t.shape[1],
                (long long)s_new);
        else if (s_new > capacity)
            bad(v, 1, FA_ERR_SHAPE_MISMATCH, "s_new %lld > capacity %lld", (long long)s_new,
                (long long)capacity);
        if (s_new > INT32_MAX || vn->t.shape[1] > INT32_MAX)
            bad(v, 1, UNNAMED, "s_new past int32");
    }
    rotary = kv->rotary_cos != NULL;
    if ((kv->rotary_cos == NULL) != (kv->rotary_sin == NULL))
        bad(v, 1, FA_ERR_NULL_POINTER, "one of rotary_cos / rotary_sin");
    else if (!rotary && (kv->rotary_dim != 0 || kv->rotary_interleaved != 0 || kv->rotary_seqlen != 0))
        bad(v, 1, FA_ERR_BAD_PARAM, "rotary fields without rotary_cos");
    else if (rotary && (kv->rotary_dim < 16 || kv->rotary_dim % 16 != 0 || kv->rotary_dim > rq->d))
        bad(v, 1, FA_ERR_BAD_PARAM, "rotary_dim %d", kv->rotary_dim);
    else if (rotary && kv->rotary_interleaved != 0 && kv->rotary_interleaved != 1)
        bad(v, 1, FA_ERR_BAD_PARAM, "rotary_interleaved %d", kv->rotary_interleaved);
    else if (rotary && kv->rotary_seqlen < capacity)
        bad(v, 1, FA_ERR_BAD_PARAM, "rotary_seqlen %lld < capacity %lld",
            (long long)kv->rotary_seqlen, (long long)capacity);
    if (v->host_bad)
        return;
    {
        verdict dev;
        memset(&dev, 0, sizeof dev);
        for (i = 0; i < rq->b; i++) {
            int64_t n = rq->cache_seqlens[i];
            if (n < 0 || n + s_new > capacity) {
                bad(&dev, 0, FA_ERR_BAD_SEQLENS, "cache_seqlens[%lld] = %lld", (long long)i,
                    (long long)n);
                continue;
            }
            if (rq->has_idx && (rq->cache_idx[i] < 0 || rq->cache_idx[i] >= rq->bufs[B_K].t.shape[0]))
                bad(&dev, 0, FA_ERR_BAD_SEQLENS, "cache_batch_idx[%lld] = %d", (long long)i,
                    rq->cache_idx[i]);
            if (rotary && n + s_new < rq->s_q)
                bad(&dev, 0, FA_ERR_BAD_SEQLENS, "n + s_new < s_q with rotary");
            if (rq->has_table)
                page_rules(rq, &dev, i, n + s_new, n + s_new);
        }
        /* a call with neither query rows nor new keys does nothing */
        if (dev.any && rq->s_q == 0 && s_new == 0)
            v->either = 1;
        else if (dev.any)
            *v = dev;
    }
}

/* out is shaped like q, lse [b, h, s_q] ([h, total_q] varlen), as the constructors made
 * them before any mutation. */
static void output_rules(const request *rq, verdict *v)
{
    const fa_tensor *q = &rq->bufs[B_Q].t, *o = &rq->bufs[B_OUT].t, *l = &rq->bufs[B_LSE].t;
    int j;
    for (j = 0; j < q->ndim; j++)
        if (o->shape[j] != q->shape[j])
            bad(v, 2, UNNAMED, "out shape[%d] %lld != q %lld", j, (long long)o->shape[j],
                (long long)q->shape[j]);
    if (rq->bufs[B_LSE].present) {
        int64_t want[3];
        if (rq->varlen) {
            want[0] = rq->h;
            want[1] = q->shape[0];
        } else {
            want[0] = rq->b;
            want[1] = rq->h;
            want[2] = rq->s_q;
        }
        for (j = 0; j < l->ndim; j++)
            if (l->shape[j] != want[j])
                bad(v, 2, UNNAMED, "lse shape[%d] %lld != %lld", j, (long long)l->shape[j],
                    (long long)want[j]);
    }
}

static void expect(const request *rq, verdict *v)
{
    int i;
    memset(v, 0, sizeof *v);
    v->named = UNNAMED;
    for (i = 0; i < 7; i++)
        if (rq->params.reserved[i] != 0)
            bad(v, 1, FA_ERR_BAD_PARAM, "reserved[%d]", i);
    if (rq->kvcache && rq->no_cache_seqlens)
        bad(v, 1, FA_ERR_NULL_POINTER, "kv.cache_seqlens NULL");
    if (rq->kvcache)
        expect_kvcache(rq, v);
    else
        expect_paged_fwd(rq, v);
    output_rules(rq, v); /* last: the device verdicts above replace v */
}

/* ------------------------------------------------------------------------------------ */
/* Poison, snapshots                                                                    */
/* ------------------------------------------------------------------------------------ */

/* NaN in every pool (cache) row no entry may read, so a read of one shows in out. */
static void poison_unread(request *rq)
{
    const fa_tensor *k = &rq->bufs[B_K].t;
    int64_t slots = k->shape[0] * k->shape[1], row_bytes = k->shape[2] * k->shape[3] *
                                                            element_bytes(rq->dtype);
    unsigned char *needed = calloc((size_t)(slots > 0 ? slots : 1), 1);
    int64_t i, r, s;
    for (i = 0; i < rq->b; i++)
        for (r = 0; r < keys_of(rq, i); r++) {
            int64_t page, row;
            if (key_slot(rq, i, r, &page, &row))
                needed[page * k->shape[1] + row] = 1;
        }
    for (s = 0; s < slots; s++)
        if (!needed[s]) {
            memset(rq->bufs[B_K].alloc + s * row_bytes, POISON, (size_t)row_bytes);
            memset(rq->bufs[B_V].alloc + s * row_bytes, POISON, (size_t)row_bytes);
        }
    free(needed);
}

typedef struct snapshot {
    fa_tensor desc[B_COUNT];
    fa_params params;
    fa_kvcache_params kv;
    int32_t *arrays[6];
    int64_t counts[6];
    unsigned char *cos, *sin;
} snapshot;

static int32_t **array_slot(request *rq, int a, int64_t *count)
{
    switch (a) {
    case 0: *count = rq->table_count; return &rq->table;
    case 1: *count = rq->b + 1; return &rq->cu_q;
    case 2: *count = rq->b + 1; return &rq->cu_k;
    case 3: *count = rq->b; return &rq->seqused_k;
    case 4: *count = rq->b; return &rq->cache_seqlens;
    default: *count = rq->b; return &rq->cache_idx;
    }
}

static unsigned char *dup(const void *p, size_t n)
{
    unsigned char *c = xmalloc(n);
    memcpy(c, p, n);
    return c;
}

static void take_snapshot(request *rq, snapshot *s)
{
    int w, a;
    size_t rot = (size_t)(rq->rotary_count * element_bytes(rq->dtype));
    memset(s, 0, sizeof *s);
    for (w = 0; w < B_COUNT; w++) {
        s->desc[w] = rq->bufs[w].t;
        if (rq->bufs[w].alloc)
            rq->bufs[w].before = dup(rq->bufs[w].alloc, rq->bufs[w].bytes);
    }
    s->params = rq->params;
    s->kv = rq->kv;
    for (a = 0; a < 6; a++) {
        int32_t *p = *array_slot(rq, a, &s->counts[a]);
        if (p)
            s->arrays[a] = (int32_t *)dup(p, (size_t)s->counts[a] * sizeof(int32_t));
    }
    if (rq->cos) {
        s->cos = dup(rq->cos, rot);
        s->sin = dup(rq->sin, rot);
    }
}

static void free_snapshot(request *rq, snapshot *s)
{
    int w, a;
    for (w = 0; w < B_COUNT; w++) {
        free(rq->bufs[w].before);
        rq->bufs[w].before = NULL;
    }
    for (a = 0; a < 6; a++)
        free(s->arrays[a]);
    free(s->cos);
    free(s->sin);
}

/* Everything but the outputs `writable` (bit per buffer) is as the snapshot has it. */
static void check_unchanged(request *rq, const snapshot *s, const char *call, unsigned writable)
{
    int w, a;
    size_t rot = (size_t)(rq->rotary_count * element_bytes(rq->dtype));
    if (memcmp(&s->params, &rq->params, sizeof s->params) != 0)
        fail("%s changed params", call);
    if (memcmp(&s->kv, &rq->kv, sizeof s->kv) != 0)
        fail("%s changed kv", call);
    for (w = 0; w < B_COUNT; w++) {
        buf *bf = &rq->bufs[w];
        if (memcmp(&s->desc[w], &bf->t, sizeof bf->t) != 0)
            fail("%s changed the %s descriptor", call, k_bname[w]);
        if (bf->alloc && !(writable >> w & 1u) && memcmp(bf->before, bf->alloc, bf->bytes) != 0)
            fail("%s changed %s, which it may not write here", call, k_bname[w]);
    }
    for (a = 0; a < 6; a++) {
        int64_t count;
        int32_t *p = *array_slot(rq, a, &count);
        if (p && memcmp(p, s->arrays[a], (size_t)count * sizeof(int32_t)) != 0)
            fail("%s changed an index array (%d)", call, a);
    }
    if (rq->cos && (memcmp(rq->cos, s->cos, rot) != 0 || memcmp(rq->sin, s->sin, rot) != 0))
        fail("%s changed the rotary tables", call);
}

/* ------------------------------------------------------------------------------------ */
/* Reference                                                                            */
/* ------------------------------------------------------------------------------------ */

QUIET static double value(const request *rq, int w, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const fa_tensor *t = &rq->bufs[w].t;
    int64_t off = i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2];
    if (t->ndim == 4)
        off += i3 * t->stride[3];
    return load_at(rq->bufs[w].alloc + off * element_bytes(rq->dtype), rq->dtype);
}

/* Rotates the fp32 row x (d entries) at pos, as flashattn.h says, rounding each rotated
 * element to the dtype once. */
HOT static void rotate_row(const request *rq, float *x, int64_t pos)
{
    int64_t half = rq->kv.rotary_dim / 2, t, es = element_bytes(rq->dtype);
    for (t = 0; t < half; t++) {
        int64_t a = rq->kv.rotary_interleaved ? 2 * t : t;
        int64_t b = rq->kv.rotary_interleaved ? 2 * t + 1 : t + half;
        float c = (float)load_at(rq->cos + (pos * half + t) * es, rq->dtype);
        float s = (float)load_at(rq->sin + (pos * half + t) * es, rq->dtype);
        float xa = x[a], xb = x[b];
        unsigned char tmp[4];
        store_float(tmp, rq->dtype, xa * c - xb * s);
        x[a] = (float)load_at(tmp, rq->dtype);
        store_float(tmp, rq->dtype, xa * s + xb * c);
        x[b] = (float)load_at(tmp, rq->dtype);
    }
}

/* Multiply-adds of the reference (it runs instrumented, so it is bounded). */
static int64_t reference_work(const request *rq)
{
    int64_t i, work = 0;
    for (i = 0; i < rq->b; i++) {
        int64_t sq = rq->varlen ? (int64_t)rq->cu_q[i + 1] - rq->cu_q[i] : rq->s_q;
        work += sq * keys_of(rq, i) * rq->h * rq->d;
    }
    return work;
}

/* out and lse of a successful call against attention in double over the logical keys:
 * through the table (or cache rows), q rotated for a rotary kvcache call. */
HOT static void check_reference(const request *rq, const char *call)
{
    const fa_params *p = &rq->params;
    int64_t d = rq->d, group = rq->h / rq->bufs[B_K].t.shape[2];
    double scale = 1.0 / sqrt((double)d);
    double tol = rq->dtype == FA_DTYPE_F32 ? 1e-5 : rq->dtype == FA_DTYPE_F16 ? 5e-4 : 4e-3;
    int rotary = rq->kvcache && rq->kv.rotary_cos != NULL;
    double *score = NULL, *acc = xmalloc(sizeof(double) * (size_t)d);
    float *qrow = xmalloc(sizeof(float) * (size_t)d);
    int64_t i, h, t, r, c;
    for (i = 0; i < rq->b; i++) {
        int64_t row0 = rq->varlen ? rq->cu_q[i] : 0;
        int64_t sq = rq->varlen ? (int64_t)rq->cu_q[i + 1] - rq->cu_q[i] : rq->s_q;
        int64_t sk = keys_of(rq, i);
        free(score);
        score = xmalloc(sizeof(double) * (size_t)(sk + 1));
        for (h = 0; h < rq->h; h++)
            for (t = 0; t < sq; t++) {
                int64_t diag = t + sk - sq, lo = p->window_left < 0 ? 0 : diag - p->window_left;
                int64_t hi = p->causal ? diag : sk - 1;
                double max = -INFINITY, sum = 0.0, lse, smax = 0.0, row_tol;
                for (c = 0; c < d; c++)
                    qrow[c] = (float)(rq->varlen ? value(rq, B_Q, row0 + t, h, c, 0)
                                                 : value(rq, B_Q, i, t, h, c));
                if (rotary)
                    rotate_row(rq, qrow, rq->cache_seqlens[i] + rq->bufs[B_KNEW].t.shape[1] *
                                             rq->bufs[B_KNEW].present - sq + t);
                lo = lo < 0 ? 0 : lo;
                hi = hi > sk - 1 ? sk - 1 : hi;
                for (r = lo; r <= hi; r++) {
                    int64_t page, row;
                    double dot = 0.0;
                    if (!key_slot(rq, i, r, &page, &row))
                        fail("harness: key %lld of entry %lld has no slot", (long long)r,
                             (long long)i);
                    for (c = 0; c < d; c++)
                        dot += (double)qrow[c] * value(rq, B_K, page, row, h / group, c);
                    score[r] = dot * scale;
                    if (p->softcap > 0.0f)
                        score[r] = p->softcap * tanh(score[r] / p->softcap);
                    if (p->alibi_slopes)
                        score[r] -= (double)p->alibi_slopes[h] * fabs((double)(diag - r));
                    max = score[r] > max ? score[r] : max;
                    smax = fabs(score[r]) > smax ? fabs(score[r]) : smax;
                }
                for (c = 0; c < d; c++)
                    acc[c] = 0.0;
                for (r = lo; r <= hi; r++) {
                    int64_t page, row;
                    double e = exp(score[r] - max);
                    key_slot(rq, i, r, &page, &row);
                    sum += e;
                    for (c = 0; c < d; c++)
                        acc[c] += e * value(rq, B_V, page, row, h / group, c);
                }
                lse = sum > 0.0 ? max + log(sum) : -INFINITY;
                row_tol = tol + 20.0 * 6e-8 * (smax + (sum > 0.0 ? fabs(lse) : 0.0)) * 0.5;
                for (c = 0; c < d; c++) {
                    double want = sum > 0.0 ? acc[c] / sum : 0.0;
                    double got = rq->varlen ? value(rq, B_OUT, row0 + t, h, c, 0)
                                            : value(rq, B_OUT, i, t, h, c);
                    if (!(fabs(got - want) <= row_tol))
                        fail("%s: out[entry %lld, row %lld, head %lld, %lld] = %.6g, the "
                             "reference gives %.6g (keys %lld..%lld of %lld)", call,
                             (long long)i, (long long)t, (long long)h, (long long)c, got, want,
                             (long long)lo, (long long)hi, (long long)sk);
                }
                if (rq->bufs[B_LSE].present) {
                    const fa_tensor *l = &rq->bufs[B_LSE].t;
                    int64_t off = rq->varlen ? h * l->stride[0] + (row0 + t) * l->stride[1]
                                             : i * l->stride[0] + h * l->stride[1] + t * l->stride[2];
                    float got;
                    memcpy(&got, rq->bufs[B_LSE].alloc + off * 4, 4);
                    if (sum == 0.0 ? got != -INFINITY
                                   : !(fabs((double)got - lse) <= 1e-5 * (1.0 + fabs(lse))))
                        fail("%s: lse[entry %lld, head %lld, row %lld] = %.7g, the reference "
                             "gives %.7g", call, (long long)i, (long long)h, (long long)t,
                             (double)got, lse);
                }
            }
    }
    free(score);
    free(acc);
    free(qrow);
}

/* The cache after a successful append: key n_i + j of entry i holds k_new / v_new row j
 * (k rotated at that position); a slot two entries write is not compared; every other
 * byte is as before. */
HOT static void check_cache(const request *rq)
{
    const fa_tensor *k = &rq->bufs[B_K].t;
    int64_t rows = k->shape[1], slots = k->shape[0] * rows, heads = k->shape[2], d = k->shape[3];
    int64_t es = element_bytes(rq->dtype), row_bytes = heads * d * es;
    int64_t s_new = rq->bufs[B_KNEW].present ? rq->bufs[B_KNEW].t.shape[1] : 0;
    unsigned char *writers = calloc((size_t)(slots > 0 ? slots : 1), 1);
    float *x = xmalloc(sizeof(float) * (size_t)d);
    double u = rq->dtype == FA_DTYPE_F32 ? 1.2e-7 : rq->dtype == FA_DTYPE_F16 ? 9.8e-4 : 7.9e-3;
    int64_t i, j, h, c, s;
    for (i = 0; i < rq->b; i++)
        for (j = 0; j < s_new; j++) {
            int64_t page, row;
            if (!key_slot(rq, i, rq->cache_seqlens[i] + j, &page, &row))
                fail("harness: appended key of entry %lld has no slot", (long long)i);
            s = page * rows + row;
            writers[s] = writers[s] < 2 ? writers[s] + 1 : 2;
        }
    for (s = 0; s < slots; s++)
        if (writers[s] == 0 && (memcmp(rq->bufs[B_K].alloc + s * row_bytes,
                                       rq->bufs[B_K].before + s * row_bytes, (size_t)row_bytes) ||
                                memcmp(rq->bufs[B_V].alloc + s * row_bytes,
                                       rq->bufs[B_V].before + s * row_bytes, (size_t)row_bytes)))
            fail("fa_fwd_kvcache wrote cache row %lld of entry %lld, no appended key",
                 (long long)(s % rows), (long long)(s / rows));
    for (i = 0; i < rq->b; i++)
        for (j = 0; j < s_new; j++) {
            int64_t page, row, pos = rq->cache_seqlens[i] + j;
            key_slot(rq, i, pos, &page, &row);
            if (writers[page * rows + row] != 1)
                continue;
            for (h = 0; h < heads; h++) {
                for (c = 0; c < d; c++)
                    x[c] = (float)value(rq, B_KNEW, i, j, h, c);
                if (rq->kv.rotary_cos)
                    rotate_row(rq, x, pos);
                for (c = 0; c < d; c++) {
                    double got_k = value(rq, B_K, page, row, h, c);
                    double got_v = value(rq, B_V, page, row, h, c);
                    double want_v = value(rq, B_VNEW, i, j, h, c);
                    double tol_k = rq->kv.rotary_cos ? u * fabs(x[c]) + 1e-30 : 0.0;
                    if (!(fabs(got_k - x[c]) <= tol_k) || got_v != want_v)
                        fail("fa_fwd_kvcache: cache key %lld of entry %lld (head %lld, %lld): "
                             "k %.6g v %.6g, want k %.6g v %.6g", (long long)pos, (long long)i,
                             (long long)h, (long long)c, got_k, got_v, (double)x[c], want_v);
                }
            }
        }
    free(writers);
    free(x);
}

/* out and lse: finite where due (a row without keys has LSE -inf and out 0). */
HOT static void check_finite(const request *rq, const char *call)
{
    int64_t n = (int64_t)rq->bufs[B_OUT].bytes / element_bytes(rq->dtype), i;
    for (i = 0; i < n; i++) {
        double v = load_at(rq->bufs[B_OUT].alloc + i * element_bytes(rq->dtype), rq->dtype);
        if (!isfinite(v))
            fail("%s succeeded with out element %lld = %g", call, (long long)i, v);
    }
    if (rq->bufs[B_LSE].present)
        for (i = 0; i < (int64_t)rq->bufs[B_LSE].bytes / 4; i++) {
            float v;
            memcpy(&v, rq->bufs[B_LSE].alloc + i * 4, 4);
            if (isnan(v) || v == INFINITY)
                fail("%s succeeded with lse element %lld = %g", call, (long long)i, (double)v);
        }
}

/* ------------------------------------------------------------------------------------ */
/* Running one input                                                                    */
/* ------------------------------------------------------------------------------------ */

static fa_context *g_ctx;
static int g_verbose; /* FUZZ_PAGED_VERBOSE set: the decoded request and each status */

static void dump_request(const request *rq, const verdict *v)
{
    const fa_params *p = &rq->params;
    int w, j;
    int64_t i;
    fprintf(stderr, "request: %s dtype %d b %lld s_q %lld h %lld/%lld d %lld causal %d "
            "window_left %d threads %d varlen %d\n", rq->kvcache ? "fa_fwd_kvcache" : "fa_fwd",
            (int)rq->dtype, (long long)rq->b, (long long)rq->s_q, (long long)rq->h,
            (long long)rq->h_k, (long long)rq->d, p->causal, p->window_left, rq->threads,
            rq->varlen);
    for (w = 0; w < B_COUNT; w++) {
        const fa_tensor *t = &rq->bufs[w].t;
        if (!rq->bufs[w].present)
            continue;
        fprintf(stderr, "  %-5s shape", k_bname[w]);
        for (j = 0; j < t->ndim; j++)
            fprintf(stderr, " %lld", (long long)t->shape[j]);
        fprintf(stderr, "\n");
    }
    fprintf(stderr, "  table %s P %d width %d stride %lld:", rq->has_table ? "yes" : "NULL",
            p->page_block_size, p->block_table_width, (long long)p->block_table_batch_stride);
    for (i = 0; i < rq->table_count && i < 32; i++)
        fprintf(stderr, " %d", rq->table[i]);
    fprintf(stderr, "\n  per entry (cu_q cu_k seqused cache_seqlens cache_idx):");
    for (i = 0; i < rq->b; i++)
        fprintf(stderr, " [%d %d %d %d %d]", rq->cu_q ? rq->cu_q[i + 1] : -1,
                rq->cu_k ? rq->cu_k[i + 1] : -1, rq->has_seqused ? rq->seqused_k[i] : -1,
                rq->cache_seqlens[i], rq->has_idx ? rq->cache_idx[i] : -1);
    fprintf(stderr, "\n  rotary %s dim %d interleaved %d seqlen %lld; expect %s%s%s (%s, status %d)\n",
            rq->kv.rotary_cos ? "yes" : "no", rq->kv.rotary_dim, rq->kv.rotary_interleaved,
            (long long)rq->kv.rotary_seqlen, v->any ? "failure" : "success",
            v->either ? ", open" : "", v->host_bad ? ", host" : "", v->any ? v->why : "-",
            v->named);
}

static void check_status(const char *call, fa_status st)
{
    const char *name = fa_status_string(st);
    const char *msg = fa_last_error(g_ctx);
    if (g_verbose)
        fprintf(stderr, "%s -> %s %s\n", call, name ? name : "(null)", msg ? msg : "(null)");
    if ((int)st < 0 || (int)st >= FA_STATUS_COUNT || name == NULL ||
        strcmp(name, "FA_STATUS_UNKNOWN") == 0)
        fail("%s returned status %d outside fa_status", call, (int)st);
    if (msg == NULL || (st != FA_OK && msg[0] == '\0'))
        fail("%s failed with %s and an empty fa_last_error", call, name);
    if (st == FA_OK && msg[0] != '\0')
        fail("%s succeeded but fa_last_error is \"%s\"", call, msg);
}

static const fa_tensor *desc(request *rq, int w)
{
    return rq->bufs[w].present ? &rq->bufs[w].t : NULL;
}

static fa_tensor *desc_mut(request *rq, int w)
{
    return rq->bufs[w].present ? &rq->bufs[w].t : NULL;
}

/* The workspace query: it fails on a host rule, succeeds on a request whose host rules
 * hold (page ids and cache lengths are device data it does not read). */
static fa_status run_query(request *rq, const verdict *v, size_t *needed)
{
    const char *call = rq->kvcache ? "fa_fwd_kvcache_workspace_size" : "fa_fwd_workspace_size";
    snapshot s;
    fa_status st;
    take_snapshot(rq, &s);
    st = rq->kvcache ? fa_fwd_kvcache_workspace_size(g_ctx, desc(rq, B_Q), desc(rq, B_K),
                                                     desc(rq, B_V), desc(rq, B_KNEW),
                                                     desc(rq, B_VNEW), &rq->kv, &rq->params, needed)
                     : fa_fwd_workspace_size(g_ctx, desc(rq, B_Q), desc(rq, B_K), desc(rq, B_V),
                                             &rq->params, needed);
    check_status(call, st);
    check_unchanged(rq, &s, call, 0);
    free_snapshot(rq, &s);
    if (st == FA_OK && v->host_bad)
        fail("%s accepted a request that must fail: %s", call, v->why);
    if (st != FA_OK && !v->host_bad && !v->either)
        fail("%s refused a request whose host rules hold (%s): %s", call, fa_status_string(st),
             fa_last_error(g_ctx));
    return st;
}

static void run_call(request *rq, const verdict *v, int ws_known, size_t needed)
{
    const char *call = rq->kvcache ? "fa_fwd_kvcache" : "fa_fwd";
    unsigned char *ws = NULL;
    size_t ws_bytes = 0;
    int ws_bad = 0;
    unsigned writable = 1u << B_OUT | 1u << B_LSE;
    snapshot s;
    fa_status st;
    if (rq->workspace && ws_known) {
        ws_bytes = needed;
        if (rq->ws_short && needed > 0) {
            ws_bytes = needed - 1;
            ws_bad = 1;
        }
        ws = xmalloc(ws_bytes);
    }
    take_snapshot(rq, &s);
    if (rq->kvcache)
        st = fa_fwd_kvcache(g_ctx, desc(rq, B_Q), desc_mut(rq, B_K), desc_mut(rq, B_V),
                            desc(rq, B_KNEW), desc(rq, B_VNEW), &rq->kv, &rq->params,
                            desc_mut(rq, B_OUT), desc_mut(rq, B_LSE), ws, ws_bytes);
    else
        st = fa_fwd(g_ctx, desc(rq, B_Q), desc(rq, B_K), desc(rq, B_V), &rq->params,
                    desc_mut(rq, B_OUT), desc_mut(rq, B_LSE), ws, ws_bytes);
    check_status(call, st);
    if (st == FA_OK && (v->any || ws_bad))
        fail("%s accepted a request that must fail: %s", call,
             v->any ? v->why : "the workspace is one byte short");
    if (st != FA_OK && !v->any && !v->either && !ws_bad)
        fail("%s refused a valid request (%s): %s", call, fa_status_string(st),
             fa_last_error(g_ctx));
    if (st != FA_OK && v->any && !ws_bad && v->named != UNNAMED && (int)st != v->named)
        fail("%s failed with %s, the header names %s (%s)", call, fa_status_string(st),
             fa_status_string((fa_status)v->named), v->why);
    if (st == FA_OK && rq->kvcache && rq->bufs[B_KNEW].present)
        writable |= 1u << B_K | 1u << B_V;
    check_unchanged(rq, &s, call, st == FA_OK ? writable : 0u);
    if (st == FA_OK) {
        if (writable & (1u << B_K))
            check_cache(rq);
        check_finite(rq, call);
        if (!v->either && reference_work(rq) <= MAX_WORK)
            check_reference(rq, call);
    }
    free_snapshot(rq, &s);
    free(ws);
}

static void free_request(request *rq)
{
    int w, a;
    for (w = 0; w < B_COUNT; w++)
        free(rq->bufs[w].alloc);
    for (a = 0; a < 6; a++) {
        int64_t count;
        free(*array_slot(rq, a, &count));
    }
    free(rq->cos);
    free(rq->sin);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_verbose = getenv("FUZZ_PAGED_VERBOSE") != NULL;
    if (fa_create(&g_ctx, FA_BACKEND_CPU, 0) != FA_OK) {
        fprintf(stderr, "fuzz_paged: fa_create(CPU) failed: %s\n", fa_create_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static request rq;
    verdict v;
    rng g;
    int backed;
    size_t needed = 0;
    fa_status qst;

    parse(&rq, data, size);
    g.state = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)rq.seed << 32);
    build_arrays(&rq, &g);
    build_rotary(&rq, &g);
    backed = back_tensors(&rq, &g) && !rq.rotary_unbacked &&
             (!rq.has_table || table_entries(&rq) >= 0);
    rq.params.block_table = rq.has_table ? rq.table : NULL;
    if (rq.alibi) {
        int64_t hh;
        for (hh = 0; hh < rq.h; hh++) /* 0 .. 1 in steps of 1/16 */
            rq.slopes[hh] = (float)(rng_next(&g) % 17) / 16.0f;
        rq.params.alibi_slopes = rq.slopes;
    }
    rq.params.cu_seqlens_q = rq.cu_q;
    rq.params.cu_seqlens_k = rq.cu_k;
    rq.params.seqused_k = rq.has_seqused || rq.kv_seqused ? rq.seqused_k : NULL;
    rq.kv.cache_seqlens = rq.no_cache_seqlens ? NULL : rq.cache_seqlens;
    rq.kv.cache_batch_idx = rq.has_idx ? rq.cache_idx : NULL;
    expect(&rq, &v);
    if (g_verbose)
        dump_request(&rq, &v);
    if (fa_set_num_threads(g_ctx, rq.threads) != FA_OK)
        fail("fa_set_num_threads(%d) failed", rq.threads);
    if (backed && !v.any && !v.either)
        poison_unread(&rq);
    qst = run_query(&rq, &v, &needed);
    /* A request the harness cannot back runs only when a host rule refuses it anyway. */
    if (backed || v.host_bad || v.output_bad)
        run_call(&rq, &v, qst == FA_OK, needed);
    free_request(&rq);
    return 0;
}
