/*
 * fuzz_api.c - libFuzzer target over the whole argument checking of flashattn on the CPU
 * backend: fa_fwd, fa_bwd, fa_plan_fwd, fa_plan_bwd, fa_fwd_workspace_size,
 * fa_bwd_workspace_size and the tensor constructors, with shapes, strides, dtypes, every
 * fa_params field, the contents of cu_seqlens / seqused_k, workspaces and NULL pointers
 * drawn from the input.
 *
 * An input describes one small base request (usually valid) followed by a list of
 * mutations that break it in targeted ways; the format is below and
 * tests/fuzz/make_corpus.py writes inputs in it. Every tensor gets a real allocation of
 * exactly its span (smallest to largest element offset), so AddressSanitizer sees any
 * access outside it. Views are written into memory filled with 0xFF bytes (a NaN in
 * fp32, fp16 and bf16), so a read of a gap between view elements poisons the result and
 * a write to one is visible.
 *
 * The target aborts (message on stderr, then abort()) when the library breaks its
 * contract:
 *   - a returned status outside fa_status, or one fa_status_string calls unknown;
 *   - an error with an empty fa_last_error(ctx), or success with a non-empty one;
 *   - any byte of an output (out, lse, dq, dk, dv, the plan, the workspace size) changed
 *     by a call that failed; any byte of an input (q, k, v, dout; out and lse in the
 *     backward; the tensor descriptors and params) changed by any call;
 *   - on success: a write outside an output's view; a non-finite out/dq/dk/dv element or
 *     a NaN / +inf LSE when the numbers are sane (bounded inputs, moderate scale, softcap
 *     and slopes; the backward also needs the forward of the same input to have
 *     succeeded, so out and lse are real); with sane numbers, out and LSE that differ
 *     from a double-precision reference of the header's semantics (fp32 1e-5, fp16 5e-4,
 *     bf16 4e-3 absolute; LSE 1e-5 relative), and dq, dk, dv that differ from a reference
 *     backward by more than a bound that follows the conditioning (a multiple of the
 *     dtype's roundoff times the magnitude of each element's terms, check_reference_bwd),
 *     for views without aliased elements;
 *   - success of a request the header says must fail (rule_violated() lists them: offsets
 *     that overflow int64, unknown dtypes, wrong ranks, shapes that disagree, bad scalars,
 *     invalid cu_seqlens / seqused_k contents, non-zero reserved fields, paged fields that
 *     break the paging rules (the mutations never set block_table_width), NULL
 *     where a pointer is required, a too small or misaligned workspace);
 *   - plans and workspace queries that disagree with each other or with the call;
 *   - crashes, sanitizer reports, leaks (LeakSanitizer).
 * Error codes themselves are never checked: only that an error is reported. Successful
 * paged calls and fa_fwd_kvcache are fuzz_paged.c's.
 *
 * Only the queries run when some buffer would exceed CAP_BYTES or the problem is large
 * (its memory may be small through zero strides); nothing runs when cu_seqlens or
 * seqused_k (which validation reads) would exceed MAX_INTS entries.
 *
 * INPUT FORMAT (all integers little endian)
 *   INT   one byte c: c < 0x80: the value c - 16; c < 0x80 + N: k_int_special[c - 0x80];
 *         c == 0xFE: a raw int32 follows (4 bytes); c == 0xFF: a raw int64 follows;
 *         other c: k_int_special[(c - 0x80) % N].
 *   FLOAT one byte c: c < 0x80: (c - 16) / 8; c < 0x80 + M: k_float_special[c - 0x80];
 *         c == 0xFF: raw float bits follow (4 bytes); other c: k_float_special[(c-0x80)%M].
 *   DIM   one byte v: v < 0xF0: a small value (below); else an INT follows.
 *   A read past the end of the input yields 0 bytes.
 *
 *   byte  calls   bit0 fa_fwd, bit1 fa_bwd (runs fa_fwd first to produce out and lse),
 *                 bit2 fa_plan_fwd, bit3 fa_plan_bwd, bit4 fa_fwd_workspace_size,
 *                 bit5 fa_bwd_workspace_size, bit6 NULL-context and small-call probes,
 *                 bit7 two worker threads (else one)
 *   byte  layout  bits0-1 dtype (0 f32, 1 f16, 2 bf16, 3: an INT follows the params
 *                 byte), bit2 varlen, bit3 explicit strides (one pad byte per tensor,
 *                 below; else the fa_tensor_* constructors), bit4 the forward gets lse,
 *                 bit5 seqused_k, bit6 ALiBi, bit7 caller workspace
 *   byte  params  bit0 causal, bit1 window_left, bit2 window_right, bit3 softcap,
 *                 bit4 softmax_scale, bit5 deterministic, bit6 num_splits,
 *                 bit7 per-batch ALiBi slopes (alibi_batch_stride)
 *   [INT]         dtype, if layout bits0-1 == 3
 *   6 DIM         b (v % 5), s_q (v % 65), s_k (v % 65), h_k (1 + v % 4),
 *                 group (1 + v % (4 / h_k) for h_k in 1..4, else 1; h = h_k * group),
 *                 d (8 + 8 * (v % 8))
 *   byte          seed of the data values
 *   [INT]         window_left (params bit1); [INT] window_right (bit2);
 *   [FLOAT]       softcap (bit3); [FLOAT] softmax_scale (bit4); [INT] num_splits (bit6)
 *   ALiBi (layout bit6): byte mode (bit0: every slope is the FLOAT that follows; else
 *                 bounded values from the seed), [INT] alibi_batch_stride (params bit7)
 *   varlen (layout bit2): for each of the first min(b, 64) sequences a byte len_q
 *                 (% 65) and a byte len_k (% 65); then a byte e: max_seqlen_q = the
 *                 longest len_q + (e & 3), max_seqlen_k = longest len_k + (e >> 2 & 3).
 *                 varlen_batch = b; sequences past 64 are empty.
 *   seqused_k (layout bit5): for each of the first min(batch, 64) sequences a byte u:
 *                 seqused_k = u % (keys + 1); later sequences use all their keys
 *   explicit strides (layout bit3): 9 bytes p, for q k v out lse dout dq dk dv:
 *                 [b, s, h, d] ([s, h, d] varlen): head stride d + 8 * (p & 3), row
 *                 stride h * head + 4 * (p >> 2 & 3), batch stride s * row +
 *                 16 * (p >> 4 & 7); with p bit7 heads-major instead: row stride
 *                 d + 8 * (p & 3), head stride s * row + 4 * (p >> 2 & 3), batch stride
 *                 h * head + 16 * (p >> 4 & 7). lse [b, h, s] ([h, s] varlen): row stride
 *                 1 + (p & 3), head stride s * row + (p >> 2 & 3), batch stride
 *                 h * head + 16 * (p >> 4 & 7).
 *   workspace (layout bit7): byte mode % 8: 0 the size the query gives, 1 one byte less,
 *                 2 100 more, 3 zero bytes, 4 exact but 4-byte misaligned, 5 exact but
 *                 8-byte misaligned, 6 an INT size, 7 4096 more
 *   then mutations until the input ends, each a byte op (% 122) and its operands:
 *     op < 90: tensor op / 10 (q k v out lse dout dq dk dv), field op % 10:
 *       0 ndim = INT; 1..4 shape[i] = INT; 5..8 stride[i] = INT;
 *       9 byte s % 8: 0 data NULL, 1 descriptor NULL, 2 dtype = INT, 3 dtype = the next
 *         valid one, 4 data non-NULL, 5 descriptor back, 6 swap dims (byte: i = v & 3,
 *         j = v >> 2 & 3), 7 every stride 0 except the last
 *     90 softmax_scale = FLOAT   91 causal = INT         92 window_left = INT
 *     93 window_right = INT      94 softcap = FLOAT      95 toggle alibi_slopes
 *     96 alibi_batch_stride = INT                        97 toggle cu_seqlens_q
 *     98 toggle cu_seqlens_k     99 varlen_batch = INT   100 max_seqlen_q = INT
 *     101 max_seqlen_k = INT     102 toggle seqused_k    103 num_splits = INT
 *     104 deterministic = INT    105 block_table non-NULL
 *     106 block_table_batch_stride = INT                 107 page_block_size = INT
 *     108 reserved[byte % 7] = INT                       109 cu_seqlens_q[byte] = INT
 *     110 cu_seqlens_k[byte] = INT                       111 seqused_k[byte] = INT
 *     112 alibi_slopes[byte] = FLOAT                     113 params NULL
 *     114 ctx NULL               115 plan NULL           116 bytes (size result) NULL
 *     117 workspace size = INT   118 cu_seqlens_q and _k both NULL
 *     119 dtype of q k v out dout dq dk dv = INT
 *     120 FLASHATTN_FORCE_TILE, 121 FLASHATTN_FORCE_BWD_TILE = a byte n % 16 and n bytes
 *         (a NUL ends the text early; set for this input only)
 *   (indices of 109..112 are taken modulo the array's length.)
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"
#define FUZZ_TARGET_NAME "fuzz_api"
#include "fuzz_common.h"

#define CAP_BYTES ((int64_t)4 << 20) /* largest buffer the harness backs for real */
#define MAX_ELEMS ((int64_t)1 << 18) /* view elements per tensor of a computed call */
#define MAX_WORK ((int64_t)1 << 22)  /* q elements x key rows of a computed call */
#define MAX_INTS ((int64_t)1 << 20)  /* cu_seqlens / seqused_k entries backed */
#define MAX_SEQ 64                   /* sequences whose lengths the input gives */
#define MAX_EDITS 16
#define POISON 0xFF

/* ------------------------------------------------------------------------------------ */
/* Reading the input                                                                    */
/* ------------------------------------------------------------------------------------ */

static const int64_t k_int_special[] = {
    0, 1, -1, 2, 7, 8, 9, 16, 63, 64, 65, 127, 128, 255, 256, 257, 1023, 1024, 4096,
    65535, 65536, 55108, 55109, 2097151, 2097152, (1 << 20), (1 << 20) + 1,
    2147483646LL, 2147483647LL, 2147483648LL, -2147483647LL - 1, -2147483649LL,
    4294967295LL, 4294967296LL, 4294967297LL, 3037000499LL, 3037000500LL,
    (int64_t)1 << 40, (int64_t)1 << 47, (int64_t)1 << 48, (int64_t)1 << 53,
    (int64_t)1 << 61, (int64_t)1 << 62, ((int64_t)1 << 62) + 1, INT64_MAX / 16,
    INT64_MAX / 8, INT64_MAX / 4, INT64_MAX / 3, INT64_MAX / 2, INT64_MAX / 2 + 1,
    INT64_MAX - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1, -2, -8, -64, -1024,
    -((int64_t)1 << 62), 2147483640LL, 268435456LL, 33554432LL, 16777216LL,
};
#define N_INT_SPECIAL ((int)(sizeof k_int_special / sizeof k_int_special[0]))

#define rd_int(r) rd_int_in((r), k_int_special, N_INT_SPECIAL)
#define rd_int32(r) rd_int32_in((r), k_int_special, N_INT_SPECIAL)

static float float_special(int i)
{
    switch (i) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return 1.0f;
    case 3: return -1.0f;
    case 4: return 0.5f;
    case 5: return 0.125f;
    case 6: return 8.0f;
    case 7: return 30.0f;
    case 8: return 1e-3f;
    case 9: return 1e-30f;
    case 10: return float_of_bits(0x00800000u); /* FLT_MIN */
    case 11: return float_of_bits(0x00000001u); /* smallest denormal */
    case 12: return 1e30f;
    case 13: return 1e38f;
    case 14: return float_of_bits(0x7f7fffffu); /* FLT_MAX */
    case 15: return -float_of_bits(0x7f7fffffu);
    case 16: return INFINITY;
    case 17: return -INFINITY;
    case 18: return float_of_bits(0x7fc00000u); /* NaN */
    case 19: return float_of_bits(0xffc00001u); /* negative NaN */
    case 20: return 2.35e38f;                   /* FLT_MAX / log2(e) */
    case 21: return 1e-20f;
    case 22: return 1e6f;
    default: return 50.0f;
    }
}
#define N_FLOAT_SPECIAL 24

static float rd_float(reader *r)
{
    uint8_t c = rd_u8(r);
    if (c < 0x80)
        return ((float)c - 16.0f) / 8.0f;
    if (c == 0xFF)
        return float_of_bits((uint32_t)rd_raw(r, 4));
    return float_special((c - 0x80) % N_FLOAT_SPECIAL);
}

static int64_t rd_dim(reader *r, int64_t modulo, int64_t base, int64_t scale)
{
    uint8_t v = rd_u8(r);
    if (v >= 0xF0)
        return rd_int(r);
    return base + scale * (v % modulo);
}

/* ------------------------------------------------------------------------------------ */
/* Small helpers                                                                        */
/* ------------------------------------------------------------------------------------ */

/* Wrapping int64 arithmetic without undefined behaviour in the harness itself. */
static int64_t wrap_mul(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

static int64_t wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int dtype_known(int64_t dt)
{
    return dt == FA_DTYPE_F32 || dt == FA_DTYPE_F16 || dt == FA_DTYPE_BF16;
}

static int64_t element_bytes(fa_dtype dt)
{
    return dt == FA_DTYPE_F16 || dt == FA_DTYPE_BF16 ? 2 : 4; /* unknown: the largest */
}

HOT static int all_poison(const unsigned char *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i] != POISON)
            return 0;
    return 1;
}

/* Bits of k / 64 (|k| <= 32) in a dtype: exact in all three. */
HOT static void store_value(unsigned char *at, fa_dtype dt, int k)
{
    float f = (float)k / 64.0f;
    uint32_t bits = bits_of_float(f);
    if (dt == FA_DTYPE_F32) {
        memcpy(at, &bits, 4);
    } else if (dt == FA_DTYPE_BF16) {
        uint16_t b = (uint16_t)(bits >> 16);
        memcpy(at, &b, 2);
    } else {
        uint16_t h = 0;
        if (k != 0) {
            uint32_t sign = bits >> 31, exp = (bits >> 23) & 0xff, mant = bits & 0x7fffff;
            /* f32 exponent e - 127 = f16 exponent E - 15; k / 64 is normal in fp16 */
            h = (uint16_t)((sign << 15) | ((exp - 127 + 15) << 10) | (mant >> 13));
        }
        memcpy(at, &h, 2);
    }
}

HOT static int is_finite_at(const unsigned char *at, fa_dtype dt)
{
    if (dt == FA_DTYPE_F32) {
        uint32_t b;
        memcpy(&b, at, 4);
        return (b & 0x7f800000u) != 0x7f800000u;
    } else {
        uint16_t b;
        memcpy(&b, at, 2);
        return dt == FA_DTYPE_F16 ? (b & 0x7c00u) != 0x7c00u : (b & 0x7f80u) != 0x7f80u;
    }
}

/* ------------------------------------------------------------------------------------ */
/* The request                                                                          */
/* ------------------------------------------------------------------------------------ */

enum { T_Q, T_K, T_V, T_OUT, T_LSE, T_DOUT, T_DQ, T_DK, T_DV, T_COUNT };
static const char *const k_tname[T_COUNT] = {"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"};

typedef struct slot {
    fa_tensor t;
    int present;       /* 0: the call gets a NULL descriptor */
    int null_data;
    int ctor_overflow; /* built by a constructor whose dims put offsets past int64 */
    int mutated;
    /* Memory, from the final descriptor: */
    int rank_ok;       /* ndim in 0..4 and no negative dim */
    int empty;         /* rank_ok and some dim is 0 */
    int overflow;      /* nonempty and an element offset overflows int64 */
    int real;          /* data points into an allocation of exactly the span */
    int enumerable;    /* nonempty, real and at most MAX_ELEMS elements */
    int injective;     /* enumerable and no two elements share an address */
    int64_t elements;  /* Π shape (valid when enumerable) */
    int64_t min_off;   /* element offsets of the view relative to data */
    unsigned char *alloc;
    size_t alloc_bytes;
    unsigned char *expect; /* what alloc must hold after the next call (real only) */
} slot;

typedef struct edit {
    int index;
    int64_t value;
    float fvalue;
} edit;

typedef struct request {
    unsigned calls;
    int threads;
    int64_t dtype;
    int varlen, explicit_strides, lse_fwd, seqused, alibi, workspace;
    int64_t b, s_q, s_k, h_k, h, d;
    uint32_t seed;
    fa_params params;
    int alibi_wild;
    float alibi_value;
    int64_t len_q[MAX_SEQ], len_k[MAX_SEQ], used[MAX_SEQ];
    int64_t max_len_q, max_len_k;
    uint8_t pad[T_COUNT];
    int ws_mode;
    int ws_size_set;
    int64_t ws_size;
    slot ts[T_COUNT];
    /* pointers the mutations switch */
    int has_alibi, has_cu_q, has_cu_k, has_seqused, has_block_table;
    int ctx_null, params_null, plan_null, bytes_null;
    char force_tile[2][16]; /* FLASHATTN_FORCE_TILE, FLASHATTN_FORCE_BWD_TILE ("" unset) */
    edit cu_q_edits[MAX_EDITS], cu_k_edits[MAX_EDITS], used_edits[MAX_EDITS];
    edit slope_edits[MAX_EDITS];
    int n_cu_q_edits, n_cu_k_edits, n_used_edits, n_slope_edits;
    /* buffers */
    int32_t *cu_q, *cu_k, *seqused_k, *block_table;
    int64_t cu_count, used_count; /* entries backed */
    int ints_ok;                  /* cu_seqlens and seqused_k backed exactly */
    float *slopes;
    int64_t slopes_count;
    int slopes_real;              /* covers every slope a valid request reads */
    int slopes_overflow;          /* (batch - 1) * stride + h - 1 overflows int64 */
    int slopes_sane;
} request;

static char g_marker; /* data placeholder before allocation */

/* ------------------------------------------------------------------------------------ */
/* Constructors                                                                         */
/* ------------------------------------------------------------------------------------ */

/* Checks what a constructor returned against its arguments; returns 1 when the true
 * offsets of the (nonempty) tensor overflow int64. */
static int check_constructed(const char *what, const fa_tensor *t, void *data, fa_dtype dt,
                             int ndim, const int64_t *shape)
{
    int64_t stride = 1;
    int overflow = 0, any_zero = 0, any_negative = 0;
    int i;
    if (t->data != data || t->dtype != dt || t->ndim != ndim)
        fail("%s: data/dtype/ndim not as given (ndim %d, want %d)", what, t->ndim, ndim);
    for (i = 0; i < ndim; i++) {
        if (t->shape[i] != shape[i])
            fail("%s: shape[%d] = %lld, given %lld", what, i, (long long)t->shape[i],
                 (long long)shape[i]);
        if (shape[i] == 0)
            any_zero = 1;
        if (shape[i] < 0)
            any_negative = 1;
    }
    if (t->stride[ndim - 1] != 1)
        fail("%s: last stride %lld, must be 1", what, (long long)t->stride[ndim - 1]);
    /* Contiguous strides where the products fit; no claim where they do not. */
    for (i = ndim - 1; i >= 0; i--) {
        if (!overflow && t->stride[i] != stride && !any_negative && !any_zero)
            fail("%s: stride[%d] = %lld, contiguous is %lld", what, i, (long long)t->stride[i],
                 (long long)stride);
        if (!overflow && __builtin_mul_overflow(stride, shape[i], &stride))
            overflow = 1;
    }
    /* With contiguous strides the largest offset is (product of the dims) - 1. */
    if (any_zero || any_negative)
        return 0;
    if (!overflow)
        return 0;
    {
        unsigned __int128 prod = 1;
        for (i = 0; i < ndim; i++) {
            prod *= (unsigned __int128)shape[i];
            if (prod > ((unsigned __int128)1 << 64))
                return 1;
        }
        return prod - 1 > (unsigned __int128)INT64_MAX;
    }
}

static void make_qlike(request *rq, int which, int64_t rows_b, int64_t s, int64_t h)
{
    slot *sl = &rq->ts[which];
    fa_dtype dt = (fa_dtype)rq->dtype;
    int64_t shape[4];
    sl->present = 1;
    if (rq->varlen) {
        shape[0] = s;
        shape[1] = h;
        shape[2] = rq->d;
        sl->t = fa_tensor_thd(&g_marker, dt, s, h, rq->d);
        sl->ctor_overflow = check_constructed("fa_tensor_thd", &sl->t, &g_marker, dt, 3, shape);
    } else {
        shape[0] = rows_b;
        shape[1] = s;
        shape[2] = h;
        shape[3] = rq->d;
        sl->t = fa_tensor_bshd(&g_marker, dt, rows_b, s, h, rq->d);
        sl->ctor_overflow = check_constructed("fa_tensor_bshd", &sl->t, &g_marker, dt, 4, shape);
    }
}

static void make_lse(request *rq, int64_t total_q)
{
    slot *sl = &rq->ts[T_LSE];
    int64_t shape[3];
    sl->present = 1;
    if (rq->varlen) {
        shape[0] = rq->h;
        shape[1] = total_q;
        sl->t = fa_tensor_lse_varlen((float *)&g_marker, rq->h, total_q);
        sl->ctor_overflow =
            check_constructed("fa_tensor_lse_varlen", &sl->t, &g_marker, FA_DTYPE_F32, 2, shape);
    } else {
        shape[0] = rq->b;
        shape[1] = rq->h;
        shape[2] = rq->s_q;
        sl->t = fa_tensor_lse((float *)&g_marker, rq->b, rq->h, rq->s_q);
        sl->ctor_overflow =
            check_constructed("fa_tensor_lse", &sl->t, &g_marker, FA_DTYPE_F32, 3, shape);
    }
}

/* Explicit strides from a pad byte (see the format); wrapping arithmetic. */
static void make_strided(request *rq, int which, int64_t rows_b, int64_t s, int64_t h)
{
    slot *sl = &rq->ts[which];
    uint8_t p = rq->pad[which];
    fa_tensor *t = &sl->t;
    memset(t, 0, sizeof *t);
    sl->present = 1;
    t->data = &g_marker;
    if (which == T_LSE) {
        int64_t row = 1 + (p & 3);
        t->dtype = FA_DTYPE_F32;
        if (rq->varlen) {
            t->ndim = 2;
            t->shape[0] = rq->h;
            t->shape[1] = s;
            t->stride[1] = row;
            t->stride[0] = wrap_add(wrap_mul(s, row), (p >> 2) & 3);
        } else {
            t->ndim = 3;
            t->shape[0] = rows_b;
            t->shape[1] = rq->h;
            t->shape[2] = s;
            t->stride[2] = row;
            t->stride[1] = wrap_add(wrap_mul(s, row), (p >> 2) & 3);
            t->stride[0] = wrap_add(wrap_mul(rq->h, t->stride[1]), 16 * ((p >> 4) & 7));
        }
        return;
    }
    {
        int64_t d = rq->d, head, row, batch;
        t->dtype = (fa_dtype)rq->dtype;
        if (p & 0x80) { /* heads-major: rows inside heads */
            row = wrap_add(d, 8 * (p & 3));
            head = wrap_add(wrap_mul(s, row), 4 * ((p >> 2) & 3));
            batch = wrap_add(wrap_mul(h, head), 16 * ((p >> 4) & 7));
        } else {
            head = wrap_add(d, 8 * (p & 3));
            row = wrap_add(wrap_mul(h, head), 4 * ((p >> 2) & 3));
            batch = wrap_add(wrap_mul(s, row), 16 * ((p >> 4) & 7));
        }
        if (rq->varlen) {
            t->ndim = 3;
            t->shape[0] = s;
            t->shape[1] = h;
            t->shape[2] = d;
            t->stride[0] = row;
            t->stride[1] = head;
            t->stride[2] = 1;
        } else {
            t->ndim = 4;
            t->shape[0] = rows_b;
            t->shape[1] = s;
            t->shape[2] = h;
            t->shape[3] = d;
            t->stride[0] = batch;
            t->stride[1] = row;
            t->stride[2] = head;
            t->stride[3] = 1;
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* Parsing                                                                              */
/* ------------------------------------------------------------------------------------ */

static int64_t seq_keys(const request *rq, int64_t i)
{
    if (rq->varlen)
        return i < MAX_SEQ ? rq->len_k[i] : 0;
    return rq->s_k;
}

static void add_edit(edit *list, int *n, int index, int64_t value, float fvalue)
{
    if (*n >= MAX_EDITS)
        return;
    list[*n].index = index;
    list[*n].value = value;
    list[*n].fvalue = fvalue;
    (*n)++;
}

static void mutate_tensor(request *rq, reader *r, int which, int field)
{
    slot *sl = &rq->ts[which];
    fa_tensor *t = &sl->t;
    if (field <= 8)
        sl->mutated = 1; /* shape or strides no longer the constructor's */
    if (field == 0) {
        t->ndim = rd_int32(r);
    } else if (field <= 4) {
        t->shape[field - 1] = rd_int(r);
    } else if (field <= 8) {
        t->stride[field - 5] = rd_int(r);
    } else {
        uint8_t s = rd_u8(r) % 8;
        switch (s) {
        case 0: sl->null_data = 1; break;
        case 1: sl->present = 0; break;
        case 2: t->dtype = (fa_dtype)rd_int32(r); break;
        case 3: t->dtype = (fa_dtype)(((unsigned)t->dtype + 1u) % 3u); break;
        case 4: sl->null_data = 0; break;
        case 5: sl->present = 1; break;
        case 6: {
            uint8_t v = rd_u8(r);
            sl->mutated = 1;
            int i = v & 3, j = (v >> 2) & 3;
            int64_t x = t->shape[i];
            t->shape[i] = t->shape[j];
            t->shape[j] = x;
            x = t->stride[i];
            t->stride[i] = t->stride[j];
            t->stride[j] = x;
            break;
        }
        default: {
            int i;
            sl->mutated = 1;
            for (i = 0; i + 1 < t->ndim && i < 4; i++)
                t->stride[i] = 0;
            break;
        }
        }
    }
}

static void mutate_params(request *rq, reader *r, int op)
{
    fa_params *p = &rq->params;
    switch (op) {
    case 90: p->softmax_scale = rd_float(r); break;
    case 91: p->causal = rd_int32(r); break;
    case 92: p->window_left = rd_int32(r); break;
    case 93: p->window_right = rd_int32(r); break;
    case 94: p->softcap = rd_float(r); break;
    case 95: rq->has_alibi = !rq->has_alibi; break;
    case 96: p->alibi_batch_stride = rd_int(r); break;
    case 97: rq->has_cu_q = !rq->has_cu_q; break;
    case 98: rq->has_cu_k = !rq->has_cu_k; break;
    case 99: p->varlen_batch = rd_int32(r); break;
    case 100: p->max_seqlen_q = rd_int32(r); break;
    case 101: p->max_seqlen_k = rd_int32(r); break;
    case 102: rq->has_seqused = !rq->has_seqused; break;
    case 103: p->num_splits = rd_int32(r); break;
    case 104: p->deterministic = rd_int32(r); break;
    case 105: rq->has_block_table = 1; break;
    case 106: p->block_table_batch_stride = rd_int(r); break;
    case 107: p->page_block_size = rd_int32(r); break;
    case 108: {
        int i = rd_u8(r) % 7;
        p->reserved[i] = rd_int32(r);
        break;
    }
    case 109: {
        int i = rd_u8(r);
        add_edit(rq->cu_q_edits, &rq->n_cu_q_edits, i, rd_int32(r), 0.0f);
        break;
    }
    case 110: {
        int i = rd_u8(r);
        add_edit(rq->cu_k_edits, &rq->n_cu_k_edits, i, rd_int32(r), 0.0f);
        break;
    }
    case 111: {
        int i = rd_u8(r);
        add_edit(rq->used_edits, &rq->n_used_edits, i, rd_int32(r), 0.0f);
        break;
    }
    case 112: {
        int i = rd_u8(r);
        add_edit(rq->slope_edits, &rq->n_slope_edits, i, 0, rd_float(r));
        break;
    }
    case 113: rq->params_null = 1; break;
    case 114: rq->ctx_null = 1; break;
    case 115: rq->plan_null = 1; break;
    case 116: rq->bytes_null = 1; break;
    case 117:
        rq->ws_size_set = 1;
        rq->ws_size = rd_int(r);
        break;
    case 118: rq->has_cu_q = rq->has_cu_k = 0; break;
    case 120:
    case 121: {
        char *text = rq->force_tile[op - 120];
        int n = rd_u8(r) % 16, i;
        for (i = 0; i < n; i++)
            text[i] = (char)rd_u8(r);
        text[n] = '\0';
        break;
    }
    default: { /* 119 */
        fa_dtype dt = (fa_dtype)rd_int32(r);
        int i;
        for (i = 0; i < T_COUNT; i++)
            if (i != T_LSE)
                rq->ts[i].t.dtype = dt;
        break;
    }
    }
}

static void parse(request *rq, const uint8_t *data, size_t size)
{
    reader r = {data, size};
    uint8_t layout, pflags;
    int64_t i, n_seq, total_q = 0, total_k = 0;
    int w;

    memset(rq, 0, sizeof *rq);
    rq->calls = rd_u8(&r);
    rq->threads = rq->calls & 0x80 ? 2 : 1;
    layout = rd_u8(&r);
    pflags = rd_u8(&r);
    rq->dtype = layout & 3;
    if ((layout & 3) == 3)
        rq->dtype = rd_int32(&r);
    rq->varlen = (layout >> 2) & 1;
    rq->explicit_strides = (layout >> 3) & 1;
    rq->lse_fwd = (layout >> 4) & 1;
    rq->seqused = (layout >> 5) & 1;
    rq->alibi = (layout >> 6) & 1;
    rq->workspace = (layout >> 7) & 1;
    if (rq->calls & 0x02)
        rq->lse_fwd = 1; /* the backward needs the forward's lse */

    rq->b = rd_dim(&r, 5, 0, 1);
    rq->s_q = rd_dim(&r, 65, 0, 1);
    rq->s_k = rd_dim(&r, 65, 0, 1);
    rq->h_k = rd_dim(&r, 4, 1, 1);
    {
        /* a small group keeps h = h_k * group <= 4 */
        int64_t small = rq->h_k >= 1 && rq->h_k <= 4 ? 4 / rq->h_k : 1;
        int64_t group = rd_dim(&r, small, 1, 1);
        rq->h = wrap_mul(rq->h_k, group);
    }
    rq->d = rd_dim(&r, 8, 8, 8);
    rq->seed = rd_u8(&r);

    fa_params_init(&rq->params);
    rq->params.causal = pflags & 1;
    if (pflags & 2)
        rq->params.window_left = rd_int32(&r);
    if (pflags & 4)
        rq->params.window_right = rd_int32(&r);
    if (pflags & 8)
        rq->params.softcap = rd_float(&r);
    if (pflags & 16)
        rq->params.softmax_scale = rd_float(&r);
    rq->params.deterministic = (pflags >> 5) & 1;
    if (pflags & 64)
        rq->params.num_splits = rd_int32(&r);
    if (rq->alibi) {
        uint8_t mode = rd_u8(&r);
        rq->has_alibi = 1;
        rq->alibi_wild = mode & 1;
        if (rq->alibi_wild)
            rq->alibi_value = rd_float(&r);
        if (pflags & 128)
            rq->params.alibi_batch_stride = rd_int(&r);
    }

    n_seq = rq->b < 0 ? 0 : rq->b > MAX_SEQ ? MAX_SEQ : rq->b;
    for (i = 0; i < MAX_SEQ; i++) {
        rq->len_q[i] = rq->varlen ? 0 : rq->s_q;
        rq->len_k[i] = rq->varlen ? 0 : rq->s_k;
    }
    if (rq->varlen) {
        uint8_t e;
        for (i = 0; i < n_seq; i++) {
            rq->len_q[i] = rd_u8(&r) % 65;
            rq->len_k[i] = rd_u8(&r) % 65;
            total_q += rq->len_q[i];
            total_k += rq->len_k[i];
            if (rq->len_q[i] > rq->max_len_q)
                rq->max_len_q = rq->len_q[i];
            if (rq->len_k[i] > rq->max_len_k)
                rq->max_len_k = rq->len_k[i];
        }
        e = rd_u8(&r);
        rq->has_cu_q = rq->has_cu_k = 1;
        rq->params.varlen_batch = (int)(int32_t)(uint32_t)(uint64_t)rq->b;
        rq->params.max_seqlen_q = (int)(rq->max_len_q + (e & 3));
        rq->params.max_seqlen_k = (int)(rq->max_len_k + ((e >> 2) & 3));
    }
    for (i = 0; i < MAX_SEQ; i++)
        rq->used[i] = seq_keys(rq, i);
    if (rq->seqused) {
        rq->has_seqused = 1;
        for (i = 0; i < n_seq; i++) {
            int64_t keys = seq_keys(rq, i);
            uint8_t u = rd_u8(&r);
            rq->used[i] = keys >= 0 && keys < 255 ? u % (keys + 1) : u;
        }
    }
    if (rq->explicit_strides)
        for (w = 0; w < T_COUNT; w++)
            rq->pad[w] = rd_u8(&r);
    if (rq->workspace)
        rq->ws_mode = rd_u8(&r) % 8;

    /* The base tensors. */
    {
        int64_t sq = rq->varlen ? total_q : rq->s_q, sk = rq->varlen ? total_k : rq->s_k;
        static const int qlike[] = {T_Q, T_OUT, T_DOUT, T_DQ};
        static const int klike[] = {T_K, T_V, T_DK, T_DV};
        for (w = 0; w < 4; w++) {
            if (rq->explicit_strides) {
                make_strided(rq, qlike[w], rq->b, sq, rq->h);
                make_strided(rq, klike[w], rq->b, sk, rq->h_k);
            } else {
                make_qlike(rq, qlike[w], rq->b, sq, rq->h);
                make_qlike(rq, klike[w], rq->b, sk, rq->h_k);
            }
        }
        if (rq->explicit_strides)
            make_strided(rq, T_LSE, rq->b, sq, rq->h);
        else
            make_lse(rq, sq);
    }

    /* Mutations. */
    while (r.n > 0) {
        int op = rd_u8(&r) % 122;
        if (op < 90)
            mutate_tensor(rq, &r, op / 10, op % 10);
        else
            mutate_params(rq, &r, op);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Memory                                                                               */
/* ------------------------------------------------------------------------------------ */

static void *small_dummy(size_t *bytes)
{
    *bytes = 64;
    return malloc(64);
}

/* Enumerates the element offsets of a view (relative to element 0) as runs along the
 * last dim: fn(arg, first offset, count, step). */
typedef void (*visit_fn)(void *arg, int64_t offset, int64_t count, int64_t step);

HOT static void visit_view(const fa_tensor *t, visit_fn fn, void *arg)
{
    int64_t idx[3] = {0, 0, 0};
    int outer = t->ndim - 1, i;
    for (;;) {
        int64_t off = 0;
        for (i = 0; i < outer; i++)
            off += idx[i] * t->stride[i];
        fn(arg, off, t->shape[outer], t->stride[outer]);
        for (i = outer - 1; i >= 0; i--) {
            if (++idx[i] < t->shape[i])
                break;
            idx[i] = 0;
        }
        if (i < 0)
            return;
    }
}

typedef struct fill_arg {
    slot *sl;
    rng *g;
    unsigned char *mask; /* one byte per element of the allocation, or NULL */
    int repeated;        /* an element address was visited twice */
} fill_arg;

HOT static void fill_visit(void *a, int64_t off, int64_t count, int64_t step)
{
    fill_arg *f = a;
    slot *sl = f->sl;
    int64_t es = element_bytes(sl->t.dtype), c;
    for (c = 0; c < count; c++) {
        int64_t at = off - sl->min_off + c * step; /* an element of the span: no overflow */
        if (f->g)
            store_value(sl->alloc + at * es, sl->t.dtype, (int)(rng_next(f->g) % 65) - 32);
        if (f->mask) {
            f->repeated |= f->mask[at];
            f->mask[at] = 1;
        }
    }
}

/* Sizes a tensor from its final descriptor and backs it with memory. */
static void lay_out(slot *sl)
{
    fa_tensor *t = &sl->t;
    int i;
    __int128 lo = 0, hi = 0;
    int64_t es = element_bytes(t->dtype);
    int overflow = 0;
    unsigned __int128 elems = 1;

    sl->alloc = NULL;
    sl->alloc_bytes = 0;
    if (!sl->present)
        return;
    sl->rank_ok = t->ndim >= 1 && t->ndim <= 4;
    for (i = 0; sl->rank_ok && i < t->ndim; i++) {
        if (t->shape[i] < 0)
            sl->rank_ok = 0;
        else if (t->shape[i] == 0)
            sl->empty = 1;
    }
    if (sl->rank_ok && !sl->empty) {
        const __int128 huge = (__int128)1 << 120; /* 4 terms of this still fit */
        for (i = 0; i < t->ndim; i++) {
            /* |shape - 1| < 2^63, |stride| <= 2^63: the product fits in 127 bits */
            __int128 term = (__int128)(t->shape[i] - 1) * (__int128)t->stride[i];
            term = term > huge ? huge : term < -huge ? -huge : term;
            if (term > 0)
                hi += term;
            else
                lo += term;
            if (elems <= ((unsigned __int128)1 << 64)) /* saturates past 2^64 */
                elems *= (unsigned __int128)t->shape[i];
        }
        overflow = hi > INT64_MAX || lo < INT64_MIN;
        sl->overflow = overflow;
    }
    if (sl->null_data) {
        t->data = NULL;
        return;
    }
    if (sl->rank_ok && sl->empty) {
        sl->alloc = malloc(0);
        if (!sl->alloc)
            sl->alloc = malloc(1);
        t->data = sl->alloc;
        return;
    }
    if (sl->rank_ok && !overflow && (hi - lo + 1) * es <= CAP_BYTES) {
        sl->alloc_bytes = (size_t)((hi - lo + 1) * es);
        sl->alloc = malloc(sl->alloc_bytes);
        memset(sl->alloc, POISON, sl->alloc_bytes);
        sl->min_off = (int64_t)lo;
        t->data = sl->alloc - (int64_t)lo * es;
        sl->real = 1;
        sl->elements = elems > (unsigned __int128)MAX_ELEMS ? MAX_ELEMS + 1 : (int64_t)elems;
        sl->enumerable = sl->elements <= MAX_ELEMS;
        return;
    }
    sl->alloc = small_dummy(&sl->alloc_bytes);
    memset(sl->alloc, POISON, sl->alloc_bytes);
    t->data = sl->alloc;
}

static int64_t nominal_batch(const request *rq)
{
    const fa_tensor *q = &rq->ts[T_Q].t;
    if (rq->has_cu_q || rq->has_cu_k)
        return rq->params.varlen_batch;
    if (rq->ts[T_Q].present && q->ndim == 4)
        return q->shape[0];
    return rq->b;
}

static int64_t nominal_heads(const request *rq)
{
    const fa_tensor *q = &rq->ts[T_Q].t;
    if (rq->ts[T_Q].present && q->ndim >= 2 && q->ndim <= 4)
        return q->shape[q->ndim - 2];
    return rq->h;
}

static int32_t *alloc_ints(int64_t count)
{
    int32_t *p = malloc(count > 0 ? (size_t)count * sizeof(int32_t) : 0);
    if (!p)
        p = malloc(1);
    return p;
}

static void build_cu(request *rq, int32_t *cu, int64_t count, const int64_t *len, int64_t dflt,
                     const edit *edits, int n_edits)
{
    int64_t i, acc = 0;
    for (i = 0; i < count; i++) {
        cu[i] = (int32_t)(uint32_t)(uint64_t)acc;
        acc = wrap_add(acc, i < MAX_SEQ ? len[i] : dflt);
    }
    for (i = 0; i < n_edits && count > 0; i++)
        cu[edits[i].index % count] = (int32_t)edits[i].value;
    (void)rq;
}

static void lay_out_all(request *rq)
{
    int w;
    rng g;
    int64_t batch = nominal_batch(rq), heads = nominal_heads(rq);

    for (w = 0; w < T_COUNT; w++)
        lay_out(&rq->ts[w]);
    g.state = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)rq->seed << 32);
    for (w = 0; w < T_COUNT; w++) {
        slot *sl = &rq->ts[w];
        int input = w == T_Q || w == T_K || w == T_V || w == T_DOUT;
        if (!sl->real)
            continue;
        if (sl->enumerable && (w == T_LSE || w == T_OUT || w >= T_DQ)) { /* numeric checks */
            fill_arg f = {sl, NULL, NULL, 0};
            f.mask = calloc(sl->alloc_bytes / (size_t)element_bytes(sl->t.dtype), 1);
            visit_view(&sl->t, fill_visit, &f);
            sl->injective = !f.repeated;
            free(f.mask);
        }
        if (input) {
            if (sl->enumerable) {
                fill_arg f = {sl, &g, NULL, 0};
                visit_view(&sl->t, fill_visit, &f);
            } else { /* too many (aliased) elements to visit: values everywhere */
                int64_t es = element_bytes(sl->t.dtype), n = (int64_t)sl->alloc_bytes / es, i;
                for (i = 0; i < n; i++)
                    store_value(sl->alloc + i * es, sl->t.dtype, (int)(rng_next(&g) % 65) - 32);
            }
        }
    }

    for (w = 0; w < T_COUNT; w++) {
        slot *sl = &rq->ts[w];
        if (sl->real) {
            sl->expect = malloc(sl->alloc_bytes);
            memcpy(sl->expect, sl->alloc, sl->alloc_bytes);
        }
    }

    /* cu_seqlens: varlen_batch + 1 entries each; seqused_k: batch entries. */
    rq->ints_ok = 1;
    if (rq->has_cu_q || rq->has_cu_k) {
        int64_t count = (int64_t)rq->params.varlen_batch + 1;
        if (count > MAX_INTS)
            rq->ints_ok = 0;
        if (count < 0)
            count = 0;
        if (rq->ints_ok) {
            rq->cu_count = count;
            if (rq->has_cu_q) {
                rq->cu_q = alloc_ints(count);
                build_cu(rq, rq->cu_q, count, rq->len_q, rq->varlen ? 0 : rq->s_q,
                         rq->cu_q_edits, rq->n_cu_q_edits);
            }
            if (rq->has_cu_k) {
                rq->cu_k = alloc_ints(count);
                build_cu(rq, rq->cu_k, count, rq->len_k, rq->varlen ? 0 : rq->s_k,
                         rq->cu_k_edits, rq->n_cu_k_edits);
            }
        }
    }
    if (rq->has_seqused) {
        int64_t count = batch, i;
        if (count > MAX_INTS)
            rq->ints_ok = 0;
        if (count < 0)
            count = 0;
        if (rq->ints_ok) {
            rq->used_count = count;
            rq->seqused_k = alloc_ints(count);
            for (i = 0; i < count; i++)
                rq->seqused_k[i] = (int32_t)(i < MAX_SEQ ? rq->used[i] : seq_keys(rq, i));
            for (i = 0; i < rq->n_used_edits && count > 0; i++)
                rq->seqused_k[rq->used_edits[i].index % count] = (int32_t)rq->used_edits[i].value;
        }
    }
    if (rq->has_block_table)
        rq->block_table = alloc_ints(16);

    /* ALiBi slopes: (batch - 1) * stride + heads entries (heads when shared). */
    if (rq->has_alibi) {
        int64_t stride = rq->params.alibi_batch_stride, i;
        __int128 last = 0;
        if (batch > 0 && heads > 0)
            last = (__int128)(batch - 1) * stride + heads - 1;
        rq->slopes_overflow = batch > 0 && heads > 0 && stride >= 0 && last > INT64_MAX;
        rq->slopes_sane = !rq->alibi_wild || (isfinite(rq->alibi_value) &&
                                              fabsf(rq->alibi_value) <= 16.0f);
        if (!rq->slopes_overflow && last >= 0 && (last + 1) * 4 <= CAP_BYTES) {
            rq->slopes_count = (int64_t)last + 1;
            rq->slopes_real = 1;
        } else {
            rq->slopes_count = 16;
        }
        rq->slopes = malloc((size_t)rq->slopes_count * sizeof(float));
        for (i = 0; i < rq->slopes_count; i++)
            rq->slopes[i] = rq->alibi_wild ? rq->alibi_value
                                           : (float)((int)(rng_next(&g) % 49) - 16) / 16.0f;
        for (i = 0; i < rq->n_slope_edits; i++) {
            float v = rq->slope_edits[i].fvalue;
            rq->slopes[rq->slope_edits[i].index % rq->slopes_count] = v;
            if (!isfinite(v) || fabsf(v) > 16.0f)
                rq->slopes_sane = 0;
        }
    }

    rq->params.alibi_slopes = rq->has_alibi ? rq->slopes : NULL;
    rq->params.cu_seqlens_q = rq->has_cu_q ? rq->cu_q : NULL;
    rq->params.cu_seqlens_k = rq->has_cu_k ? rq->cu_k : NULL;
    rq->params.seqused_k = rq->has_seqused ? rq->seqused_k : NULL;
    rq->params.block_table = rq->has_block_table ? rq->block_table : NULL;
}

static void free_all(request *rq)
{
    int w;
    for (w = 0; w < T_COUNT; w++) {
        free(rq->ts[w].alloc);
        free(rq->ts[w].expect);
    }
    free(rq->cu_q);
    free(rq->cu_k);
    free(rq->seqused_k);
    free(rq->block_table);
    free(rq->slopes);
}

/* ------------------------------------------------------------------------------------ */
/* What the header says must fail                                                       */
/* ------------------------------------------------------------------------------------ */

typedef enum call_kind { C_FWD, C_BWD, C_PLAN_FWD, C_PLAN_BWD, C_WS_FWD, C_WS_BWD } call_kind;
static const char *const k_call_name[] = {"fa_fwd", "fa_bwd", "fa_plan_fwd", "fa_plan_bwd",
                                          "fa_fwd_workspace_size", "fa_bwd_workspace_size"};

static char g_reason[256];

static const char *because(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *because(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(g_reason, sizeof g_reason, fmt, args);
    va_end(args);
    return g_reason;
}

static int tensor_nonempty(const slot *sl)
{
    return sl->rank_ok && !sl->empty;
}

/* A tensor's own rules; rank is the expected ndim, last_unit: last dim must be stride 1. */
static const char *tensor_rule(const slot *sl, const char *name, int rank, int lse)
{
    const fa_tensor *t = &sl->t;
    int i;
    if (t->ndim != rank)
        return because("%s has %d dims, expected %d", name, t->ndim, rank);
    if (!dtype_known(t->dtype))
        return because("%s dtype %d is unknown", name, (int)t->dtype);
    if (lse && t->dtype != FA_DTYPE_F32)
        return because("%s dtype %d is not f32", name, (int)t->dtype);
    for (i = 0; i < rank; i++)
        if (t->shape[i] < 0)
            return because("%s shape[%d] = %lld is negative", name, i, (long long)t->shape[i]);
    if (!tensor_nonempty(sl))
        return NULL;
    for (i = 0; i < rank; i++) {
        if (t->shape[i] > 2147483647LL)
            return because("%s shape[%d] = %lld exceeds int32", name, i, (long long)t->shape[i]);
        if (t->stride[i] < 0)
            return because("%s stride[%d] = %lld is negative", name, i, (long long)t->stride[i]);
    }
    if (sl->overflow)
        return because("%s element offsets overflow int64", name);
    if (sl->ctor_overflow && !sl->mutated)
        return because("%s (from a constructor) has offsets past int64", name);
    if (t->data == NULL)
        return because("%s data is NULL and it has elements", name);
    if (!lse && t->stride[rank - 1] != 1)
        return because("%s head_dim stride %lld != 1", name, (long long)t->stride[rank - 1]);
    return NULL;
}

static const char *same_shape(const fa_tensor *a, const char *an, const fa_tensor *b,
                              const char *bn, int rank)
{
    int i;
    if (a->dtype != b->dtype)
        return because("%s dtype %d != %s dtype %d", an, (int)a->dtype, bn, (int)b->dtype);
    for (i = 0; i < rank; i++)
        if (a->shape[i] != b->shape[i])
            return because("%s shape[%d] %lld != %s %lld", an, i, (long long)a->shape[i], bn,
                           (long long)b->shape[i]);
    return NULL;
}

static const char *cu_rule(const int32_t *cu, int64_t batch, int64_t total, int max_len,
                           const char *name)
{
    int64_t i;
    if (cu[0] != 0)
        return because("%s[0] = %d != 0", name, cu[0]);
    for (i = 0; i < batch; i++) {
        int64_t len = (int64_t)cu[i + 1] - cu[i];
        if (len < 0)
            return because("%s decreases at %lld", name, (long long)i);
        if (len > max_len)
            return because("%s length %lld > max %d", name, (long long)len, max_len);
    }
    if (cu[batch] != total)
        return because("%s[%lld] = %d != total rows %lld", name, (long long)batch, cu[batch],
                       (long long)total);
    return NULL;
}

/* The override grammar of flashattn.h, "MxN" or "MxN:S" with positive decimal numbers:
 * 1 and the numbers (saturated) when text is well formed, else 0. */
static int parse_tile(const char *text, long *m, long *n, long *stages)
{
    long *field[3];
    int i = 0;
    field[0] = m;
    field[1] = n;
    field[2] = stages;
    *stages = 0;
    for (;;) {
        long v = 0;
        if (*text < '0' || *text > '9')
            return 0;
        while (*text >= '0' && *text <= '9') {
            v = v > 100000000 ? v : v * 10 + (*text - '0');
            text++;
        }
        if (v < 1)
            return 0;
        *field[i] = v;
        if (*text == '\0')
            return i >= 1;
        if ((i == 0 && *text != 'x') || (i == 1 && *text != ':') || i == 2)
            return 0;
        text++;
        i++;
    }
}

static int backward_pass(call_kind kind)
{
    return kind == C_BWD || kind == C_PLAN_BWD || kind == C_WS_BWD;
}

/* The first rule the request breaks for this call (NULL: none). */
static const char *rule_violated(const request *rq, call_kind kind, const void *ws,
                                 size_t ws_bytes, int needed_known, size_t needed)
{
    const fa_params *p = &rq->params;
    const slot *ts = rq->ts;
    int fwd = kind == C_FWD, bwd = kind == C_BWD;
    int varlen = p->cu_seqlens_q != NULL;
    int qrank = varlen ? 3 : 4, lrank = varlen ? 2 : 3;
    int use[T_COUNT] = {1, 1, 1, 0, 0, 0, 0, 0, 0};
    const char *why;
    int w, i;

    if (rq->ctx_null)
        return "ctx is NULL";
    {
        const char *tile = rq->force_tile[backward_pass(kind)];
        long m, n, st;
        if (tile[0] != '\0' && !parse_tile(tile, &m, &n, &st))
            return because("the tile override \"%s\" is malformed", tile);
    }
    if (rq->params_null)
        return "params is NULL";
    if ((kind == C_PLAN_FWD || kind == C_PLAN_BWD) && rq->plan_null)
        return "plan is NULL";
    if ((kind == C_WS_FWD || kind == C_WS_BWD) && rq->bytes_null)
        return "bytes is NULL";
    if (fwd) {
        use[T_OUT] = 1;
        use[T_LSE] = rq->lse_fwd && ts[T_LSE].present; /* lse is optional here */
    }
    if (bwd)
        for (w = T_OUT; w < T_COUNT; w++)
            use[w] = 1;
    for (w = 0; w < T_COUNT; w++)
        if (use[w] && !ts[w].present)
            return because("%s descriptor is NULL", k_tname[w]);
    if ((p->cu_seqlens_q != NULL) != (p->cu_seqlens_k != NULL))
        return "only one of cu_seqlens_q/k is set";
    if (varlen && (p->varlen_batch < 0 || p->max_seqlen_q < 0 || p->max_seqlen_k < 0))
        return "varlen_batch or a max_seqlen is negative";
    for (w = 0; w < T_COUNT; w++)
        if (use[w] && (why = tensor_rule(&ts[w], k_tname[w], w == T_LSE ? lrank : qrank,
                                         w == T_LSE)) != NULL)
            return why;
    {
        const fa_tensor *q = &ts[T_Q].t, *k = &ts[T_K].t;
        int hd = qrank - 1, hh = qrank - 2;
        if (k->dtype != q->dtype)
            return "k dtype != q dtype";
        if ((why = same_shape(&ts[T_V].t, "v", k, "k", qrank)) != NULL)
            return why;
        if (!varlen && k->shape[0] != q->shape[0])
            return "k batch != q batch";
        if (k->shape[hd] != q->shape[hd])
            return "k head_dim != q head_dim";
        if (q->shape[hd] % 8 != 0 || q->shape[hd] > 256)
            return because("head_dim %lld is not a multiple of 8 in 8..256",
                           (long long)q->shape[hd]);
        if (k->shape[hh] > 0 && q->shape[hh] % k->shape[hh] != 0)
            return "q heads is not a multiple of k heads";
        if (use[T_OUT] && (why = same_shape(&ts[T_OUT].t, "out", q, "q", qrank)) != NULL)
            return why;
        if (bwd) {
            if ((why = same_shape(&ts[T_DOUT].t, "dout", q, "q", qrank)) != NULL)
                return why;
            if ((why = same_shape(&ts[T_DQ].t, "dq", q, "q", qrank)) != NULL)
                return why;
            if ((why = same_shape(&ts[T_DK].t, "dk", k, "k", qrank)) != NULL)
                return why;
            if ((why = same_shape(&ts[T_DV].t, "dv", k, "k", qrank)) != NULL)
                return why;
        }
        if (use[T_LSE]) {
            const fa_tensor *l = &ts[T_LSE].t;
            if (varlen && (l->shape[0] != q->shape[1] || l->shape[1] != q->shape[0]))
                return "lse is not [h, total_q]";
            if (!varlen && (l->shape[0] != q->shape[0] || l->shape[1] != q->shape[2] ||
                            l->shape[2] != q->shape[1]))
                return "lse is not [b, h, s_q]";
        }
    }
    if (!isfinite(p->softmax_scale) || p->softmax_scale < 0.0f)
        return "softmax_scale not finite and >= 0";
    if (!isfinite(p->softcap) || p->softcap < 0.0f)
        return "softcap not finite and >= 0";
    if (p->window_left < -1 || p->window_right < -1)
        return "a window bound < -1";
    if (p->num_splits < 0)
        return "num_splits < 0";
    if (p->alibi_batch_stride < 0)
        return "alibi_batch_stride < 0";
    for (i = 0; i < 7; i++)
        if (p->reserved[i] != 0)
            return "reserved[] not zero";
    /* Paged K/V (flashattn.h, PAGED KV CACHE): the fields are 0 without a table, and a
     * table needs a page size that is a multiple of 16 in 16..1024, a width of at least
     * one entry and a stride of at least the width; the backward refuses paging. The
     * mutations never set block_table_width, so every paged request here must fail, on
     * one of these rules or on a shape the pools break. */
    if (p->block_table == NULL &&
        (p->block_table_batch_stride != 0 || p->page_block_size != 0 || p->block_table_width != 0))
        return "paged KV fields set without block_table";
    if (p->block_table != NULL) {
        if (p->page_block_size < 16 || p->page_block_size > 1024 || p->page_block_size % 16 != 0)
            return "page_block_size not a multiple of 16 in 16..1024";
        if (p->block_table_width < 1)
            return "block_table_width < 1";
        if (p->block_table_batch_stride < p->block_table_width)
            return "block_table_batch_stride < block_table_width";
        if (backward_pass(kind))
            return "paged K/V in a backward";
    }
    if (p->alibi_slopes != NULL && rq->slopes_overflow)
        return "ALiBi slope offsets overflow int64";
    if (varlen && rq->ints_ok) {
        if ((why = cu_rule(p->cu_seqlens_q, p->varlen_batch, ts[T_Q].t.shape[0], p->max_seqlen_q,
                           "cu_seqlens_q")) != NULL)
            return why;
        if ((why = cu_rule(p->cu_seqlens_k, p->varlen_batch, ts[T_K].t.shape[0], p->max_seqlen_k,
                           "cu_seqlens_k")) != NULL)
            return why;
    }
    if (p->seqused_k != NULL && rq->ints_ok) {
        int64_t batch = varlen ? p->varlen_batch : ts[T_Q].t.shape[0];
        for (i = 0; i < batch; i++) {
            int64_t keys = varlen ? (int64_t)p->cu_seqlens_k[i + 1] - p->cu_seqlens_k[i]
                                  : ts[T_K].t.shape[1];
            if (p->seqused_k[i] < 0 || p->seqused_k[i] > keys)
                return because("seqused_k[%d] = %d outside 0..%lld", i, p->seqused_k[i],
                               (long long)keys);
        }
    }
    if ((fwd || bwd) && ws != NULL && needed_known) {
        if (ws_bytes < needed)
            return because("workspace %zu < %zu needed", ws_bytes, needed);
        if (needed > 0 && (uintptr_t)ws % 16 != 0)
            return "workspace misaligned";
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Checks around a call                                                                 */
/* ------------------------------------------------------------------------------------ */

static fa_context *g_ctx;
static int g_verbose; /* FUZZ_API_VERBOSE set: the decoded request and each status */

static void dump_request(const request *rq)
{
    const fa_params *p = &rq->params;
    int w, i;
    fprintf(stderr, "request: calls 0x%02x threads %d varlen %d\n", rq->calls, rq->threads,
            rq->varlen);
    for (w = 0; w < T_COUNT; w++) {
        const slot *sl = &rq->ts[w];
        const fa_tensor *t = &sl->t;
        if (!sl->present) {
            fprintf(stderr, "  %-4s NULL\n", k_tname[w]);
            continue;
        }
        fprintf(stderr, "  %-4s dtype %d ndim %d shape", k_tname[w], (int)t->dtype, t->ndim);
        for (i = 0; i < 4 && i < t->ndim; i++)
            fprintf(stderr, " %lld", (long long)t->shape[i]);
        fprintf(stderr, " stride");
        for (i = 0; i < 4 && i < t->ndim; i++)
            fprintf(stderr, " %lld", (long long)t->stride[i]);
        fprintf(stderr, "%s%s%s\n", sl->null_data ? " data NULL" : "",
                sl->real ? "" : " (not backed)", sl->empty ? " (empty)" : "");
    }
    fprintf(stderr,
            "  scale %g causal %d window %d,%d softcap %g alibi %s stride %lld varlen_batch %d"
            " max_seqlen %d,%d seqused %s splits %d det %d\n",
            (double)p->softmax_scale, p->causal, p->window_left, p->window_right,
            (double)p->softcap, p->alibi_slopes ? "yes" : "no", (long long)p->alibi_batch_stride,
            p->varlen_batch, p->max_seqlen_q, p->max_seqlen_k, p->seqused_k ? "yes" : "no",
            p->num_splits, p->deterministic);
    if (p->cu_seqlens_q && rq->cu_count <= 16)
        for (i = 0; i < rq->cu_count; i++)
            fprintf(stderr, "  cu[%d] = %d, %d\n", i, p->cu_seqlens_q[i],
                    p->cu_seqlens_k ? p->cu_seqlens_k[i] : -1);
    if (p->seqused_k && rq->used_count <= 16)
        for (i = 0; i < rq->used_count; i++)
            fprintf(stderr, "  seqused_k[%d] = %d\n", i, p->seqused_k[i]);
    if (rq->force_tile[0][0] || rq->force_tile[1][0])
        fprintf(stderr, "  FORCE_TILE \"%s\" FORCE_BWD_TILE \"%s\"\n", rq->force_tile[0],
                rq->force_tile[1]);
}

typedef struct snapshot {
    fa_tensor desc[T_COUNT];
    fa_params params;
} snapshot;

static void take_snapshot(const request *rq, snapshot *s)
{
    int w;
    for (w = 0; w < T_COUNT; w++)
        s->desc[w] = rq->ts[w].t;
    s->params = rq->params;
}

static void check_status(call_kind kind, fa_status st)
{
    const char *name = fa_status_string(st);
    if (g_verbose)
        fprintf(stderr, "%s -> %s %s\n", k_call_name[kind], name ? name : "(null)",
                st != FA_OK && g_ctx ? fa_last_error(g_ctx) : "");
    if ((int)st < 0 || (int)st >= FA_STATUS_COUNT)
        fail("%s returned status %d outside fa_status", k_call_name[kind], (int)st);
    if (name == NULL || strcmp(name, "FA_STATUS_UNKNOWN") == 0)
        fail("%s returned status %d that fa_status_string calls unknown", k_call_name[kind],
             (int)st);
}

static void check_message(const request *rq, call_kind kind, fa_status st)
{
    const char *msg;
    if (rq->ctx_null)
        return;
    msg = fa_last_error(g_ctx);
    if (msg == NULL)
        fail("%s: fa_last_error returned NULL", k_call_name[kind]);
    if (st != FA_OK && msg[0] == '\0')
        fail("%s failed with %s and an empty fa_last_error", k_call_name[kind],
             fa_status_string(st));
    if (st == FA_OK && msg[0] != '\0')
        fail("%s succeeded but fa_last_error is \"%s\"", k_call_name[kind], msg);
}

/* Inputs never change; the outputs listed in `outputs` keep their bytes on error (and
 * take new ones on success). */
static void check_memory(request *rq, call_kind kind, fa_status st, const snapshot *s,
                         const int *outputs)
{
    int w;
    if (memcmp(&s->params, &rq->params, sizeof s->params) != 0)
        fail("%s changed params", k_call_name[kind]);
    for (w = 0; w < T_COUNT; w++) {
        slot *sl = &rq->ts[w];
        if (memcmp(&s->desc[w], &sl->t, sizeof sl->t) != 0)
            fail("%s changed the %s descriptor", k_call_name[kind], k_tname[w]);
        if (!sl->real)
            continue;
        if (outputs[w] && st == FA_OK) {
            memcpy(sl->expect, sl->alloc, sl->alloc_bytes);
        } else if (memcmp(sl->expect, sl->alloc, sl->alloc_bytes) != 0) {
            if (outputs[w])
                fail("%s failed (%s: %s) but wrote %s", k_call_name[kind], fa_status_string(st),
                     rq->ctx_null ? "" : fa_last_error(g_ctx), k_tname[w]);
            fail("%s changed %s, which it may not write", k_call_name[kind], k_tname[w]);
        }
    }
}

typedef struct check_arg {
    const slot *sl;
    unsigned char *mask;
    int lse;
    int sane;
    const char *call;
    const char *name;
} check_arg;

HOT static void output_visit(void *a, int64_t off, int64_t count, int64_t step)
{
    check_arg *c = a;
    const slot *sl = c->sl;
    int64_t es = element_bytes(sl->t.dtype), i;
    for (i = 0; i < count; i++) {
        int64_t rel = off - sl->min_off + i * step, element = off + i * step;
        const unsigned char *at = sl->alloc + rel * es;
        c->mask[rel] = 1;
        if (!c->sane)
            continue;
        if (c->lse) {
            float v;
            memcpy(&v, at, 4);
            if (isnan(v) || v == INFINITY)
                fail("%s succeeded with LSE %g at element offset %lld of %s", c->call,
                     (double)v, (long long)element, c->name);
        } else if (!is_finite_at(at, sl->t.dtype)) {
            fail("%s succeeded with a non-finite value at element offset %lld of %s", c->call,
                 (long long)element, c->name);
        }
    }
}

/* On success: every byte outside the view still poison; every element finite (sane). */
HOT static void check_output(const request *rq, int which, const char *call, int sane)
{
    const slot *sl = &rq->ts[which];
    int64_t es = element_bytes(sl->t.dtype), n, i;
    check_arg c;
    if (!sl->enumerable)
        return;
    n = (int64_t)sl->alloc_bytes / es;
    c.sl = sl;
    c.mask = calloc((size_t)n, 1);
    c.lse = which == T_LSE;
    c.sane = sane;
    c.call = call;
    c.name = k_tname[which];
    visit_view(&sl->t, output_visit, &c);
    for (i = 0; i < n; i++)
        if (!c.mask[i] && !all_poison(sl->alloc + i * es, (size_t)es))
            fail("%s wrote element offset %lld of %s, outside its view", call,
                 (long long)(i + sl->min_off), k_tname[which]);
    free(c.mask);
}

/* A softcap small enough to amplify the fp32 rounding of q.k beyond linear error
 * bounds (tanh flips between saturated and not) makes a reference comparison moot. */
static int reference_conditioned(const request *rq)
{
    return rq->params.softcap == 0.0f || rq->params.softcap >= 1e-3f;
}

/* Bounded inputs, moderate scale, softcap and slopes: a valid computation is finite. */
static int numbers_sane(const request *rq, int backward)
{
    const fa_params *p = &rq->params;
    const fa_tensor *q = &rq->ts[T_Q].t, *k = &rq->ts[T_K].t;
    int rank = q->ndim;
    double d = (double)q->shape[rank - 1];
    double scale = p->softmax_scale == 0.0f ? 1.0 / sqrt(d) : (double)p->softmax_scale;
    if (scale > 8.0)
        return 0;
    if (p->softcap != 0.0f && (p->softcap < 1e-30f || p->softcap > 1e30f))
        return 0;
    if (p->alibi_slopes != NULL && !rq->slopes_sane)
        return 0;
    if (backward && q->dtype == FA_DTYPE_F16) {
        double rows = (double)q->shape[rank == 4 ? 1 : 0];
        double group = (double)q->shape[rank - 2] / (double)k->shape[rank - 2];
        if (rows * group * d * scale > (double)(1 << 18))
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* Reference forward                                                                    */
/* ------------------------------------------------------------------------------------ */

HOT static double load_value(const slot *sl, int64_t off)
{
    int64_t es = element_bytes(sl->t.dtype);
    const unsigned char *at = sl->alloc + (off - sl->min_off) * es;
    uint32_t bits;
    if (sl->t.dtype == FA_DTYPE_F32) {
        memcpy(&bits, at, 4);
    } else {
        uint16_t h;
        memcpy(&h, at, 2);
        if (sl->t.dtype == FA_DTYPE_BF16) {
            bits = (uint32_t)h << 16;
        } else {
            double mag = (h & 0x7c00u) == 0 ? ldexp((double)(h & 0x3ffu), -24)
                                            : ldexp((double)((h & 0x3ffu) | 0x400u),
                                                    (int)((h >> 10) & 0x1fu) - 25);
            if ((h & 0x7c00u) == 0x7c00u)
                return NAN;
            return h & 0x8000u ? -mag : mag;
        }
    }
    return (double)float_of_bits(bits);
}

/* Element offset of (batch, row, head, c) of a q-like tensor (varlen: row is global). */
static int64_t at_qlike(const fa_tensor *t, int64_t b, int64_t row, int64_t head, int64_t c)
{
    if (t->ndim == 3)
        return row * t->stride[0] + head * t->stride[1] + c * t->stride[2];
    return b * t->stride[0] + row * t->stride[1] + head * t->stride[2] + c * t->stride[3];
}

static int64_t at_lse(const fa_tensor *t, int64_t b, int64_t head, int64_t row)
{
    if (t->ndim == 2)
        return head * t->stride[0] + row * t->stride[1];
    return b * t->stride[0] + head * t->stride[1] + row * t->stride[2];
}

/* out and LSE of a successful forward against the semantics of flashattn.h in double. */
HOT static void check_reference(const request *rq, int with_lse)
{
    const fa_params *p = &rq->params;
    const slot *qs = &rq->ts[T_Q], *ks = &rq->ts[T_K], *vs = &rq->ts[T_V], *os = &rq->ts[T_OUT];
    const slot *ls = &rq->ts[T_LSE];
    const fa_tensor *q = &qs->t, *k = &ks->t;
    int varlen = p->cu_seqlens_q != NULL, rank = q->ndim;
    int64_t batch = varlen ? p->varlen_batch : q->shape[0];
    int64_t heads = q->shape[rank - 2], heads_k = k->shape[rank - 2], d = q->shape[rank - 1];
    double scale = p->softmax_scale != 0.0f ? (double)p->softmax_scale : 1.0 / sqrt((double)d);
    double tol = q->dtype == FA_DTYPE_F32 ? 1e-5 : q->dtype == FA_DTYPE_F16 ? 5e-4 : 4e-3;
    int left = p->window_left, right = p->causal ? 0 : p->window_right;
    int64_t b, h, i, j, c;
    double *score, *acc;
    /* No query rows, no output to compare (and a batch of 2^29 empty sequences is long). */
    if (batch <= 0 || heads <= 0 || heads_k <= 0 || qs->empty)
        return;
    score = malloc(sizeof(double) * (size_t)(varlen ? k->shape[0] : k->shape[1]) + 8);
    acc = malloc(sizeof(double) * (size_t)d);
    for (b = 0; b < batch; b++) {
        int64_t row0_q = varlen ? p->cu_seqlens_q[b] : 0, row0_k = varlen ? p->cu_seqlens_k[b] : 0;
        int64_t sq = varlen ? p->cu_seqlens_q[b + 1] - row0_q : q->shape[1];
        int64_t sk = varlen ? p->cu_seqlens_k[b + 1] - row0_k : k->shape[1];
        if (p->seqused_k && p->seqused_k[b] < sk)
            sk = p->seqused_k[b];
        for (h = 0; h < heads; h++) {
            int64_t hk = h / (heads / heads_k);
            double slope = p->alibi_slopes ? (double)p->alibi_slopes[b * p->alibi_batch_stride + h]
                                           : 0.0;
            for (i = 0; i < sq; i++) {
                int64_t diag = i + sk - sq, lo = left < 0 ? 0 : diag - left;
                int64_t hi = right < 0 ? sk - 1 : diag + right;
                double max = -INFINITY, sum = 0.0, lse, smax = 0.0, row_tol;
                if (lo < 0)
                    lo = 0;
                if (hi > sk - 1)
                    hi = sk - 1;
                for (j = lo; j <= hi; j++) {
                    double dot = 0.0;
                    for (c = 0; c < d; c++)
                        dot += load_value(qs, at_qlike(q, b, row0_q + i, h, c)) *
                               load_value(ks, at_qlike(k, b, row0_k + j, hk, c));
                    dot *= scale;
                    if (p->softcap > 0.0f)
                        dot = p->softcap * tanh(dot / p->softcap);
                    dot -= slope * fabs((double)(diag - j));
                    score[j] = dot;
                    if (dot > max)
                        max = dot;
                    if (fabs(dot) > smax)
                        smax = fabs(dot);
                }
                for (c = 0; c < d; c++)
                    acc[c] = 0.0;
                for (j = lo; j <= hi; j++) {
                    double e = exp(score[j] - max);
                    sum += e;
                    for (c = 0; c < d; c++)
                        acc[c] += e * load_value(vs, at_qlike(&vs->t, b, row0_k + j, hk, c));
                }
                lse = sum > 0.0 ? max + log(sum) : -INFINITY;
                /* fp32 scores and LSE of magnitude smax give P a relative error ~ u smax */
                row_tol = tol + 20.0 * 6e-8 * (smax + (sum > 0.0 ? fabs(lse) : 0.0)) * 0.5;
                if (os->injective)
                    for (c = 0; c < d; c++) {
                        double want = sum > 0.0 ? acc[c] / sum : 0.0;
                        double got = load_value(os, at_qlike(&os->t, b, row0_q + i, h, c));
                        if (!(fabs(got - want) <= row_tol) || (sum == 0.0 && got != 0.0))
                            fail("fa_fwd: out[b %lld, row %lld, head %lld, %lld] = %.6g, the "
                                 "reference gives %.6g (visible keys %lld..%lld of %lld)",
                                 (long long)b, (long long)i, (long long)h, (long long)c, got,
                                 want, (long long)lo, (long long)hi, (long long)sk);
                    }
                if (with_lse && ls->injective) {
                    double got = load_value(ls, at_lse(&ls->t, b, h, row0_q + i));
                    if (sum == 0.0 ? got != -INFINITY
                                   : !(fabs(got - lse) <= 1e-5 * (1.0 + fabs(lse))))
                        fail("fa_fwd: lse[b %lld, head %lld, row %lld] = %.7g, the reference "
                             "gives %.7g", (long long)b, (long long)h, (long long)i, got, lse);
                }
            }
        }
    }
    free(score);
    free(acc);
}

/* Reference gradients in double, rows numbered as in the tensors (fixed length:
 * b * seqlen + row), with the magnitude of each element's terms (|terms| summed, and
 * dS = P (dP - D) counted as P (|dP| + |dO| . |O|), since dP and D cancel), so the
 * tolerance follows the conditioning: out is stored in q's dtype, D inherits its rounding
 * and the difference can be far smaller than its error. */
static double *grad_at(double *base, int64_t row, int64_t heads, int64_t head, int64_t d)
{
    return base + (row * heads + head) * d;
}

HOT static void compare_grad(const request *rq, int which, const double *want,
                             const double *mag, int64_t rows, int64_t heads, int64_t d,
                             int64_t per_batch)
{
    const slot *sl = &rq->ts[which];
    const fa_tensor *t = &sl->t;
    fa_dtype dt = rq->ts[T_Q].t.dtype;
    /* unit roundoff of the stored values, and a multiple of it for the terms */
    double u = dt == FA_DTYPE_F32 ? 6e-8 : dt == FA_DTYPE_F16 ? 4.9e-4 : 3.9e-3;
    double k_terms = dt == FA_DTYPE_F32 ? 20.0 : 0.75; /* measured worst: 5.0, 0.17, 0.17 */
    int64_t r, h, c;
    if (!sl->injective)
        return;
    for (r = 0; r < rows; r++)
        for (h = 0; h < heads; h++)
            for (c = 0; c < d; c++) {
                int64_t b = t->ndim == 4 ? r / per_batch : 0, row = t->ndim == 4 ? r % per_batch : r;
                int64_t i = (r * heads + h) * d + c;
                double got = load_value(sl, at_qlike(t, b, row, h, c));
                double tol = k_terms * u * mag[i] + 2.0 * u * fabs(want[i]) + 1e-7;
                if (!(fabs(got - want[i]) <= tol))
                    fail("fa_bwd: %s[row %lld, head %lld, %lld] = %.6g, the reference gives %.6g "
                         "(terms of magnitude %.3g)", k_tname[which], (long long)r, (long long)h,
                         (long long)c, got, want[i], mag[i]);
            }
}

HOT static void check_reference_bwd(const request *rq)
{
    const fa_params *p = &rq->params;
    const slot *qs = &rq->ts[T_Q], *ks = &rq->ts[T_K], *vs = &rq->ts[T_V], *dos = &rq->ts[T_DOUT];
    const fa_tensor *q = &qs->t, *k = &ks->t;
    int varlen = p->cu_seqlens_q != NULL, rank = q->ndim;
    int64_t batch = varlen ? p->varlen_batch : q->shape[0];
    int64_t heads = q->shape[rank - 2], heads_k = k->shape[rank - 2], d = q->shape[rank - 1];
    int64_t rows_q = varlen ? q->shape[0] : q->shape[0] * q->shape[1];
    int64_t rows_k = varlen ? k->shape[0] : k->shape[0] * k->shape[1];
    int64_t per_q = varlen ? 1 : q->shape[1], per_k = varlen ? 1 : k->shape[1];
    double scale = p->softmax_scale != 0.0f ? (double)p->softmax_scale : 1.0 / sqrt((double)d);
    int left = p->window_left, right = p->causal ? 0 : p->window_right;
    double *dq, *dk, *dv, *mq, *mk, *mv, *pr, *tn, *xm, *sm, *o, *om;
    int64_t b, h, i, j, c, keys_max = varlen ? k->shape[0] : k->shape[1];
    if (batch <= 0 || heads <= 0 || heads_k <= 0 || rows_q <= 0)
        return;
    dq = calloc((size_t)(rows_q * heads * d), sizeof(double));
    dk = calloc((size_t)(rows_k * heads_k * d + 1), sizeof(double));
    dv = calloc((size_t)(rows_k * heads_k * d + 1), sizeof(double));
    mq = calloc((size_t)(rows_q * heads * d), sizeof(double));
    mk = calloc((size_t)(rows_k * heads_k * d + 1), sizeof(double));
    mv = calloc((size_t)(rows_k * heads_k * d + 1), sizeof(double));
    om = malloc(sizeof(double) * (size_t)d);
    pr = malloc(sizeof(double) * (size_t)(keys_max + 1));
    tn = malloc(sizeof(double) * (size_t)(keys_max + 1));
    xm = malloc(sizeof(double) * (size_t)(keys_max + 1));
    sm = malloc(sizeof(double) * (size_t)(keys_max + 1));
    o = malloc(sizeof(double) * (size_t)d);
    for (b = 0; b < batch; b++) {
        int64_t row0_q = varlen ? p->cu_seqlens_q[b] : b * per_q;
        int64_t row0_k = varlen ? p->cu_seqlens_k[b] : b * per_k;
        int64_t sq = varlen ? p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b] : per_q;
        int64_t sk = varlen ? p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b] : per_k;
        int64_t tb = varlen ? 0 : b, tq = varlen ? row0_q : 0, tk = varlen ? row0_k : 0;
        if (p->seqused_k && p->seqused_k[b] < sk)
            sk = p->seqused_k[b];
        for (h = 0; h < heads; h++) {
            int64_t hk = h / (heads / heads_k);
            double slope = p->alibi_slopes ? (double)p->alibi_slopes[b * p->alibi_batch_stride + h]
                                           : 0.0;
            for (i = 0; i < sq; i++) {
                int64_t diag = i + sk - sq, lo = left < 0 ? 0 : diag - left;
                int64_t hi = right < 0 ? sk - 1 : diag + right;
                double max = -INFINITY, sum = 0.0, delta = 0.0, delta_mag = 0.0;
                if (lo < 0)
                    lo = 0;
                if (hi > sk - 1)
                    hi = sk - 1;
                for (j = lo; j <= hi; j++) {
                    double dot = 0.0, dot_mag = 0.0;
                    for (c = 0; c < d; c++) {
                        double t = load_value(qs, at_qlike(q, tb, tq + i, h, c)) *
                                   load_value(ks, at_qlike(k, tb, tk + j, hk, c));
                        dot += t;
                        dot_mag += fabs(t);
                    }
                    dot *= scale;
                    xm[j] = p->softcap > 0.0f ? scale * dot_mag / p->softcap : 0.0;
                    tn[j] = 0.0;
                    if (p->softcap > 0.0f) {
                        tn[j] = tanh(dot / p->softcap);
                        dot = p->softcap * tn[j];
                    }
                    pr[j] = dot - slope * fabs((double)(diag - j));
                    if (pr[j] > max)
                        max = pr[j];
                }
                for (j = lo; j <= hi; j++)
                    sum += exp(pr[j] - max);
                for (c = 0; c < d; c++)
                    o[c] = 0.0;
                for (j = lo; j <= hi; j++) {
                    /* P = exp(S - LSE) from fp32 S and LSE: relative error ~ u (|S| + |LSE|) */
                    sm[j] = 1.0 + fabs(pr[j]) + fabs(max + log(sum));
                    pr[j] = exp(pr[j] - max) / sum;
                    for (c = 0; c < d; c++)
                        o[c] += pr[j] * load_value(vs, at_qlike(&vs->t, tb, tk + j, hk, c));
                }
                for (c = 0; c < d; c++) {
                    om[c] = load_value(dos, at_qlike(&dos->t, tb, tq + i, h, c));
                    delta += o[c] * om[c];
                    delta_mag += fabs(o[c] * om[c]);
                }
                for (j = lo; j <= hi; j++) {
                    double dp = 0.0, dp_mag = 0.0, ds, ds_mag;
                    for (c = 0; c < d; c++) {
                        double t = om[c] * load_value(vs, at_qlike(&vs->t, tb, tk + j, hk, c));
                        dp += t;
                        dp_mag += fabs(t);
                    }
                    ds = pr[j] * (dp - delta);
                    ds_mag = pr[j] * sm[j] * (dp_mag + delta_mag);
                    if (p->softcap > 0.0f) {
                        /* 1 - t^2 in fp32: absolute error ~3 roundoffs, and t follows
                         * the rounding of the scaled dot (magnitude xm, in cap units) */
                        double f = 1.0 - tn[j] * tn[j];
                        ds *= f;
                        ds_mag *= f + 3.0 + 2.0 * fabs(tn[j]) * f * xm[j];
                    }
                    for (c = 0; c < d; c++) {
                        double kv = load_value(ks, at_qlike(k, tb, tk + j, hk, c));
                        double qv = load_value(qs, at_qlike(q, tb, tq + i, h, c));
                        grad_at(dq, row0_q + i, heads, h, d)[c] += scale * ds * kv;
                        grad_at(mq, row0_q + i, heads, h, d)[c] += scale * ds_mag * fabs(kv);
                        grad_at(dk, row0_k + j, heads_k, hk, d)[c] += scale * ds * qv;
                        grad_at(mk, row0_k + j, heads_k, hk, d)[c] += scale * ds_mag * fabs(qv);
                        grad_at(dv, row0_k + j, heads_k, hk, d)[c] += pr[j] * om[c];
                        grad_at(mv, row0_k + j, heads_k, hk, d)[c] += pr[j] * sm[j] * fabs(om[c]);
                    }
                }
            }
        }
    }
    compare_grad(rq, T_DQ, dq, mq, rows_q, heads, d, per_q);
    compare_grad(rq, T_DK, dk, mk, rows_k, heads_k, d, per_k);
    compare_grad(rq, T_DV, dv, mv, rows_k, heads_k, d, per_k);
    free(dq);
    free(dk);
    free(dv);
    free(mq);
    free(mk);
    free(mv);
    free(om);
    free(pr);
    free(tn);
    free(xm);
    free(sm);
    free(o);
}

/* ------------------------------------------------------------------------------------ */
/* Running one input                                                                    */
/* ------------------------------------------------------------------------------------ */

static const fa_tensor *desc(request *rq, int w)
{
    return rq->ts[w].present ? &rq->ts[w].t : NULL;
}

static fa_tensor *desc_mut(request *rq, int w)
{
    return rq->ts[w].present ? &rq->ts[w].t : NULL;
}

static fa_context *ctx_of(const request *rq)
{
    return rq->ctx_null ? NULL : g_ctx;
}

static const fa_params *params_of(const request *rq)
{
    return rq->params_null ? NULL : &rq->params;
}

typedef struct query_result {
    int called;
    fa_status st;
    size_t bytes;
    fa_plan plan;
} query_result;

static void run_workspace_query(request *rq, call_kind kind, query_result *res)
{
    static const int no_outputs[T_COUNT];
    snapshot s;
    size_t bytes;
    fa_status st;
    memset(&bytes, POISON, sizeof bytes);
    take_snapshot(rq, &s);
    st = (kind == C_WS_FWD ? fa_fwd_workspace_size : fa_bwd_workspace_size)(
        ctx_of(rq), desc(rq, T_Q), desc(rq, T_K), desc(rq, T_V), params_of(rq),
        rq->bytes_null ? NULL : &bytes);
    check_status(kind, st);
    check_message(rq, kind, st);
    check_memory(rq, kind, st, &s, no_outputs);
    if (st != FA_OK) {
        size_t poison;
        memset(&poison, POISON, sizeof poison);
        if (memcmp(&poison, &bytes, sizeof bytes) != 0)
            fail("%s failed but wrote *bytes", k_call_name[kind]);
    } else {
        const char *why = rule_violated(rq, kind, NULL, 0, 0, 0);
        if (why)
            fail("%s accepted a request that must fail: %s", k_call_name[kind], why);
    }
    res->called = !rq->bytes_null;
    res->st = st;
    res->bytes = bytes;
}

static int cstring_in(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

static void run_plan(request *rq, call_kind kind, query_result *res)
{
    static const int no_outputs[T_COUNT];
    snapshot s;
    fa_plan plan, poison;
    fa_status st;
    memset(&plan, POISON, sizeof plan);
    memset(&poison, POISON, sizeof poison);
    take_snapshot(rq, &s);
    st = (kind == C_PLAN_FWD ? fa_plan_fwd : fa_plan_bwd)(
        ctx_of(rq), desc(rq, T_Q), desc(rq, T_K), desc(rq, T_V), params_of(rq),
        rq->plan_null ? NULL : &plan);
    check_status(kind, st);
    check_message(rq, kind, st);
    check_memory(rq, kind, st, &s, no_outputs);
    if (st != FA_OK) {
        if (memcmp(&plan, &poison, sizeof plan) != 0)
            fail("%s failed but wrote the plan", k_call_name[kind]);
    } else {
        const char *why = rule_violated(rq, kind, NULL, 0, 0, 0);
        if (why)
            fail("%s accepted a request that must fail: %s", k_call_name[kind], why);
        if (plan.backend != FA_BACKEND_CPU)
            fail("%s: plan backend %d on a CPU context", k_call_name[kind], (int)plan.backend);
        if (!cstring_in(plan.arch, sizeof plan.arch) || !cstring_in(plan.kernel, sizeof plan.kernel) ||
            !cstring_in(plan.reason, sizeof plan.reason))
            fail("%s: a plan string is not terminated", k_call_name[kind]);
        /* An empty problem (no query rows; for the backward, no query and no key rows)
         * plans kernel "none": no tiles, threads or workspace, and no override applies. */
        int no_kernel = strcmp(plan.kernel, "none") == 0;
        int empty = rq->ts[T_Q].empty && (kind == C_PLAN_FWD || rq->ts[T_K].empty);
        if (no_kernel != empty)
            fail("%s: kernel \"%s\" for a%s problem", k_call_name[kind], plan.kernel,
                 empty ? "n empty" : " non-empty");
        if (no_kernel && (plan.tile_m != 0 || plan.threads != 0 || plan.workspace_bytes != 0 ||
                          plan.num_splits != 1 || strstr(plan.reason, "empty problem") == NULL))
            fail("%s: the empty plan has tiles %dx%d, %d threads, %zu workspace bytes, reason "
                 "\"%s\"", k_call_name[kind], plan.tile_m, plan.tile_n, plan.threads,
                 plan.workspace_bytes, plan.reason);
        if (!no_kernel && (plan.tile_m <= 0 || plan.tile_n <= 0 || plan.num_splits < 1))
            fail("%s: plan tiles %dx%d splits %d", k_call_name[kind], plan.tile_m, plan.tile_n,
                 plan.num_splits);
        if (kind == C_PLAN_BWD && plan.num_splits != 1)
            fail("fa_plan_bwd: num_splits %d, documented always 1", plan.num_splits);
        if (!no_kernel) {
            const char *tile = rq->force_tile[kind == C_PLAN_BWD];
            long m, n, st;
            if (tile[0] != '\0' && parse_tile(tile, &m, &n, &st) &&
                (plan.tile_m != m || plan.tile_n != n || (st > 0 && plan.stages != st)))
                fail("%s: override \"%s\" but the plan has %dx%d:%d", k_call_name[kind], tile,
                     plan.tile_m, plan.tile_n, plan.stages);
        }
        if (!no_kernel && plan.threads != rq->threads)
            fail("%s: plan threads %d, context has %d", k_call_name[kind], plan.threads,
                 rq->threads);
    }
    res->called = !rq->plan_null;
    res->st = st;
    res->plan = plan;
}

/* The caller workspace of a forward or backward: declared bytes and the pointer, or NULL.
 * Returns 0 when the workspace cannot be backed (then the call is skipped). */
static int make_workspace(request *rq, call_kind kind, unsigned char **alloc, void **ws,
                          size_t *ws_bytes, int *needed_known, size_t *needed)
{
    size_t offset = 0;
    int64_t declared;
    fa_status st;
    *alloc = NULL;
    *ws = NULL;
    *ws_bytes = 0;
    *needed_known = 0;
    *needed = 0;
    if (!rq->workspace)
        return 1;
    st = (kind == C_FWD ? fa_fwd_workspace_size : fa_bwd_workspace_size)(
        ctx_of(rq), desc(rq, T_Q), desc(rq, T_K), desc(rq, T_V), params_of(rq), needed);
    *needed_known = st == FA_OK;
    if (!*needed_known)
        *needed = 4096;
    switch (rq->ws_mode) {
    case 0: declared = (int64_t)*needed; break;
    case 1: declared = (int64_t)*needed - 1; break;
    case 2: declared = (int64_t)*needed + 100; break;
    case 3: declared = 0; break;
    case 4: declared = (int64_t)*needed; offset = 4; break;
    case 5: declared = (int64_t)*needed; offset = 8; break;
    case 6: declared = rq->ws_size; break;
    default: declared = (int64_t)*needed + 4096; break;
    }
    if (rq->ws_size_set)
        declared = rq->ws_size;
    if (declared < 0)
        declared = 0;
    if (declared > CAP_BYTES)
        return 0;
    *alloc = malloc((size_t)declared + offset); /* ends exactly at the declared size */
    *ws = *alloc + offset;
    *ws_bytes = (size_t)declared;
    return 1;
}

static void run_forward(request *rq, int *computed_ok)
{
    int outputs[T_COUNT] = {0};
    snapshot s;
    unsigned char *ws_alloc;
    void *ws;
    size_t ws_bytes, needed;
    int needed_known;
    int lse_passed = rq->lse_fwd && rq->ts[T_LSE].present;
    fa_status st;
    *computed_ok = 0;
    if (!make_workspace(rq, C_FWD, &ws_alloc, &ws, &ws_bytes, &needed_known, &needed))
        return;
    outputs[T_OUT] = 1;
    outputs[T_LSE] = lse_passed;
    take_snapshot(rq, &s);
    st = fa_fwd(ctx_of(rq), desc(rq, T_Q), desc(rq, T_K), desc(rq, T_V), params_of(rq),
                desc_mut(rq, T_OUT), lse_passed ? desc_mut(rq, T_LSE) : NULL, ws, ws_bytes);
    check_status(C_FWD, st);
    check_message(rq, C_FWD, st);
    check_memory(rq, C_FWD, st, &s, outputs);
    if (st == FA_OK) {
        const char *why = rule_violated(rq, C_FWD, ws, ws_bytes, needed_known, needed);
        int sane;
        if (why)
            fail("fa_fwd accepted a request that must fail: %s", why);
        sane = numbers_sane(rq, 0);
        check_output(rq, T_OUT, "fa_fwd", sane);
        if (lse_passed)
            check_output(rq, T_LSE, "fa_fwd", sane);
        if (sane && reference_conditioned(rq))
            check_reference(rq, lse_passed);
        *computed_ok = lse_passed; /* out and lse are real for a backward */
    }
    free(ws_alloc);
}

static int run_backward(request *rq, int forward_ok)
{
    int outputs[T_COUNT] = {0};
    snapshot s;
    unsigned char *ws_alloc;
    void *ws;
    size_t ws_bytes, needed;
    int needed_known;
    fa_status st;
    if (!make_workspace(rq, C_BWD, &ws_alloc, &ws, &ws_bytes, &needed_known, &needed))
        return 0;
    outputs[T_DQ] = outputs[T_DK] = outputs[T_DV] = 1;
    take_snapshot(rq, &s);
    st = fa_bwd(ctx_of(rq), desc(rq, T_Q), desc(rq, T_K), desc(rq, T_V), desc(rq, T_OUT),
                desc(rq, T_LSE), desc(rq, T_DOUT), params_of(rq), desc_mut(rq, T_DQ),
                desc_mut(rq, T_DK), desc_mut(rq, T_DV), ws, ws_bytes);
    check_status(C_BWD, st);
    check_message(rq, C_BWD, st);
    check_memory(rq, C_BWD, st, &s, outputs);
    if (st == FA_OK) {
        const char *why = rule_violated(rq, C_BWD, ws, ws_bytes, needed_known, needed);
        int sane;
        if (why)
            fail("fa_bwd accepted a request that must fail: %s", why);
        /* out and lse hold what the forward wrote only if no two of their elements
         * share an address (D = dO.O stays bounded either way, P = exp(S - LSE) not) */
        sane = forward_ok && rq->ts[T_LSE].injective && numbers_sane(rq, 1);
        check_output(rq, T_DQ, "fa_bwd", sane);
        check_output(rq, T_DK, "fa_bwd", sane);
        check_output(rq, T_DV, "fa_bwd", sane);
        if (sane && reference_conditioned(rq) && rq->ts[T_OUT].injective)
            check_reference_bwd(rq);
    }
    free(ws_alloc);
    return st == FA_OK;
}

/* A forward or backward may run: every buffer it may touch is real and the work small. */
static int may_compute(const request *rq, int backward)
{
    int w;
    const slot *q = &rq->ts[T_Q], *k = &rq->ts[T_K];
    if (!rq->ints_ok)
        return 0;
    if (rq->has_alibi && !rq->slopes_real)
        return 0;
    for (w = 0; w < T_COUNT; w++) {
        const slot *sl = &rq->ts[w];
        int used = backward || w <= T_LSE;
        if (!used || !sl->present || sl->null_data)
            continue;
        if (!sl->rank_ok)
            return 0;
        if (!sl->empty && !sl->enumerable)
            return 0;
    }
    if (q->present && k->present && q->rank_ok && k->rank_ok && !q->empty && !k->empty) {
        int64_t key_rows = k->t.ndim >= 3 ? k->t.shape[k->t.ndim - 3] : 1;
        if ((double)q->elements * (double)key_rows > (double)MAX_WORK)
            return 0;
    }
    return 1;
}

static void probes(request *rq)
{
    fa_plan plan;
    size_t bytes;
    fa_device_info info;
    const fa_tensor *q = desc(rq, T_Q), *k = desc(rq, T_K), *v = desc(rq, T_V);
    fa_tensor *out = desc_mut(rq, T_OUT);
    const fa_params *p = &rq->params;
    int i;
    if (fa_fwd(NULL, q, k, v, p, out, NULL, NULL, 0) == FA_OK ||
        fa_bwd(NULL, q, k, v, out, desc(rq, T_LSE), desc(rq, T_DOUT), p, desc_mut(rq, T_DQ),
               desc_mut(rq, T_DK), desc_mut(rq, T_DV), NULL, 0) == FA_OK ||
        fa_plan_fwd(NULL, q, k, v, p, &plan) == FA_OK ||
        fa_plan_bwd(NULL, q, k, v, p, &plan) == FA_OK ||
        fa_fwd_workspace_size(NULL, q, k, v, p, &bytes) == FA_OK ||
        fa_bwd_workspace_size(NULL, q, k, v, p, &bytes) == FA_OK ||
        fa_set_num_threads(NULL, 1) == FA_OK || fa_get_device_info(NULL, &info) == FA_OK)
        fail("a call with a NULL context succeeded");
    if (fa_last_error(NULL) == NULL || fa_status_string((fa_status)(rq->seed - 128)) == NULL ||
        fa_dtype_name((fa_dtype)rq->dtype) == NULL ||
        fa_backend_name((fa_backend)rq->seed) == NULL)
        fail("a name function returned NULL");
    fa_params_init(NULL);
    if (fa_get_device_info(g_ctx, NULL) == FA_OK || fa_last_error(g_ctx)[0] == '\0')
        fail("fa_get_device_info(ctx, NULL) succeeded or said nothing");
    if (fa_set_stream(g_ctx, &g_marker) == FA_OK || fa_last_error(g_ctx)[0] == '\0')
        fail("fa_set_stream(non-NULL) on the CPU backend succeeded or said nothing");
    if (fa_set_num_threads(g_ctx, -1 - (int)rq->seed) == FA_OK || fa_last_error(g_ctx)[0] == '\0')
        fail("fa_set_num_threads(negative) succeeded or said nothing");
    if (fa_get_device_info(g_ctx, &info) != FA_OK || info.backend != FA_BACKEND_CPU ||
        info.sm_count != rq->threads)
        fail("fa_get_device_info on the CPU context is wrong (sm_count %d, threads %d)",
             info.sm_count, rq->threads);
    for (i = 0; i < FA_STATUS_COUNT; i++)
        if (strcmp(fa_status_string((fa_status)i), "FA_STATUS_UNKNOWN") == 0)
            fail("fa_status_string(%d) is unknown", i);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_verbose = getenv("FUZZ_API_VERBOSE") != NULL;
    if (fa_create(&g_ctx, FA_BACKEND_CPU, 0) != FA_OK) {
        fprintf(stderr, "fuzz_api: fa_create(CPU) failed: %s\n", fa_create_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static request rq;
    query_result ws_fwd, ws_bwd, plan_fwd, plan_bwd;
    int fwd_ok = 0;

    parse(&rq, data, size);
    lay_out_all(&rq);
    if (g_verbose)
        dump_request(&rq);
    memset(&ws_fwd, 0, sizeof ws_fwd);
    memset(&ws_bwd, 0, sizeof ws_bwd);
    memset(&plan_fwd, 0, sizeof plan_fwd);
    memset(&plan_bwd, 0, sizeof plan_bwd);
    if (fa_set_num_threads(g_ctx, rq.threads) != FA_OK)
        fail("fa_set_num_threads(%d) failed", rq.threads);
    if (rq.force_tile[0][0])
        setenv("FLASHATTN_FORCE_TILE", rq.force_tile[0], 1);
    if (rq.force_tile[1][0])
        setenv("FLASHATTN_FORCE_BWD_TILE", rq.force_tile[1], 1);

    if (rq.ints_ok) { /* validation reads cu_seqlens and seqused_k: only when backed */
        if (rq.calls & 0x40)
            probes(&rq);
        if (rq.calls & 0x10)
            run_workspace_query(&rq, C_WS_FWD, &ws_fwd);
        if (rq.calls & 0x04)
            run_plan(&rq, C_PLAN_FWD, &plan_fwd);
        if (rq.calls & 0x20)
            run_workspace_query(&rq, C_WS_BWD, &ws_bwd);
        if (rq.calls & 0x08)
            run_plan(&rq, C_PLAN_BWD, &plan_bwd);
        if ((rq.calls & 0x03) && may_compute(&rq, 0)) {
            run_forward(&rq, &fwd_ok);
            if (fwd_ok && plan_fwd.called && plan_fwd.st != FA_OK)
                fail("fa_fwd succeeded where fa_plan_fwd failed (%s)",
                     fa_status_string(plan_fwd.st));
            if (fwd_ok && ws_fwd.called && ws_fwd.st != FA_OK)
                fail("fa_fwd succeeded where fa_fwd_workspace_size failed (%s)",
                     fa_status_string(ws_fwd.st));
        }
        if ((rq.calls & 0x02) && may_compute(&rq, 1)) {
            int bwd_ok = run_backward(&rq, fwd_ok);
            if (bwd_ok && plan_bwd.called && plan_bwd.st != FA_OK)
                fail("fa_bwd succeeded where fa_plan_bwd failed (%s)",
                     fa_status_string(plan_bwd.st));
            if (bwd_ok && ws_bwd.called && ws_bwd.st != FA_OK)
                fail("fa_bwd succeeded where fa_bwd_workspace_size failed (%s)",
                     fa_status_string(ws_bwd.st));
        }
    }

    /* The queries agree with each other. */
    if (ws_fwd.called && plan_fwd.called) {
        if ((ws_fwd.st == FA_OK) != (plan_fwd.st == FA_OK))
            fail("fa_fwd_workspace_size %s but fa_plan_fwd %s", fa_status_string(ws_fwd.st),
                 fa_status_string(plan_fwd.st));
        if (ws_fwd.st == FA_OK && ws_fwd.bytes != plan_fwd.plan.workspace_bytes)
            fail("fa_fwd_workspace_size %zu != plan workspace_bytes %zu", ws_fwd.bytes,
                 plan_fwd.plan.workspace_bytes);
    }
    if (ws_bwd.called && plan_bwd.called) {
        if ((ws_bwd.st == FA_OK) != (plan_bwd.st == FA_OK))
            fail("fa_bwd_workspace_size %s but fa_plan_bwd %s", fa_status_string(ws_bwd.st),
                 fa_status_string(plan_bwd.st));
        if (ws_bwd.st == FA_OK && ws_bwd.bytes != plan_bwd.plan.workspace_bytes)
            fail("fa_bwd_workspace_size %zu != plan workspace_bytes %zu", ws_bwd.bytes,
                 plan_bwd.plan.workspace_bytes);
    }
    unsetenv("FLASHATTN_FORCE_TILE");
    unsetenv("FLASHATTN_FORCE_BWD_TILE");
    free_all(&rq);
    return 0;
}
