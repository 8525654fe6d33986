/*
 * flashattn.h - the whole public C API of flashattn (C99).
 *
 * NAME
 *   flashattn - exact, IO-aware attention (FlashAttention) for NVIDIA GPUs, AMD GPUs
 *   and the CPU, with one set of semantics on every backend.
 *
 * SYNOPSIS
 *   fa_context *ctx;
 *   fa_create(&ctx, FA_BACKEND_AUTO, 0);
 *   fa_params p; fa_params_init(&p); p.causal = 1;
 *   fa_tensor q = fa_tensor_bshd(q_ptr, FA_DTYPE_BF16, b, s_q, h, d);   (likewise k, v, out)
 *   fa_status st = fa_fwd(ctx, &q, &k, &v, &p, &out, &lse, NULL, 0);
 *   if (st != FA_OK) fprintf(stderr, "%s: %s\n", fa_status_string(st), fa_last_error(ctx));
 *   fa_destroy(ctx);
 *
 * LAYOUT
 *   q [b, s_q, h, d], k and v [b, s_k, h_k, d], out like q (FlashAttention's BSHD).
 *   Strides are in elements; any strides for the outer three dims, the last dim must be
 *   contiguous (stride 1). Outputs (out, lse, dq, dk, dv) must not overlap themselves:
 *   taken in order of stride, each stride of a dim of extent > 1 must reach past what the
 *   smaller ones span (else FA_ERR_BAD_STRIDE); inputs may (stride-0 broadcasts). Varlen (params.cu_seqlens_q/k set): q [total_q, h, d],
 *   k and v [total_k, h_k, d], out like q; sequence i of the batch is rows
 *   cu_seqlens[i] .. cu_seqlens[i+1]-1.
 *   LSE (optional): fp32, [b, h, s_q] (varlen: [h, total_q]), any strides, natural log.
 *   Paged K/V (params.block_table set): see PAGED KV CACHE.
 *   Pointers (tensors, cu_seqlens, seqused_k, alibi_slopes) live where the context's
 *   backend computes: host memory for FA_BACKEND_CPU, device memory for CUDA/HIP.
 *
 * SEMANTICS (identical on every backend)
 *   S[i][j] = softmax_scale * (q_i . k_j); softmax_scale 0 means 1/sqrt(d).
 *   softcap > 0: S = softcap * tanh(S / softcap).
 *   The backends fold these into fp32 constants: softmax_scale * log2(e), and with softcap
 *   softmax_scale / softcap and 2 * softcap * log2(e) must be normal fp32 numbers (else
 *   FA_ERR_BAD_PARAM); the scores themselves must be finite in fp32.
 *   ALiBi: S[i][j] -= slope[head] * |i + s_k - s_q - j|.
 *   causal (bottom-right aligned, as FlashAttention >= 2.1): key j is visible to query i
 *   iff j <= i + s_k - s_q. Sliding window (window_left, window_right; -1 = unbounded):
 *   visible iff i + s_k - s_q - window_left <= j <= i + s_k - s_q + window_right.
 *   causal is the same as window_right = 0.
 *   GQA/MQA: h % h_k == 0; query head i reads kv head i / (h / h_k).
 *   out_i = sum_j softmax(S_i)_j v_j over visible j; LSE_i = log(sum_j exp(S[i][j])).
 *   A query row with no visible key gets out_i = 0 and LSE_i = -inf, never NaN.
 *
 * DTYPES AND SIZES
 *   fp16 and bf16 everywhere (fp32 accumulation); fp32 on the CPU backend only.
 *   Head dims: every multiple of 8 from 8 to 256. q, k, v, out share one dtype.
 *   Sizes: heads and head_dim >= 1; batch, seqlens and varlen totals may be 0, every dim
 *   <= INT32_MAX, and every element offset of a tensor (and of the ALiBi slopes) must be
 *   addressable in int64 bytes (else FA_ERR_BAD_SIZE).
 *
 * EMPTY PROBLEMS
 *   Valid calls that return FA_OK after the same checks as any other: b = 0, s_q = 0,
 *   s_k = 0, varlen_batch = 0 (cu_seqlens [0]) or varlen totals of 0. A tensor's data may
 *   be NULL exactly when it has no elements (PyTorch passes NULL for empty tensors).
 *   A forward without query rows, or a backward without query and key rows, writes
 *   nothing and launches nothing; its plan names kernel "none" and its workspace is 0.
 *   Without keys every query row gets out 0 and LSE -inf, and the backward dq 0; a
 *   backward without queries writes dk = dv = 0.
 *
 * PAGED KV CACHE (fa_fwd with params.block_table set; the forward only)
 *   k and v are page pools [num_pages, page_block_size, h_k, d] (4-D whatever q's rank;
 *   any outer strides, last dim contiguous; v shaped like k); q and out are [b, s_q, h, d]
 *   or varlen [total_q, h, d] as usual. block_table: int32 [b, block_table_width] of page
 *   ids in backend memory, row i at i * block_table_batch_stride (>= block_table_width).
 *   page_block_size P: a multiple of 16 in 16..1024 (vLLM uses 16, FlashAttention-2
 *   needs 256).
 *   The keys of batch entry i: fixed length: s_k = block_table_width * P for every entry;
 *   varlen: cu_seqlens_k[i+1] - cu_seqlens_k[i] (cu_seqlens_k then gives lengths only, it
 *   indexes no rows; max_seqlen_k <= block_table_width * P); seqused_k cuts them further
 *   as usual. Logical key r of entry i is row r % P of page
 *   block_table[i * block_table_batch_stride + r / P], in k and in v. Pages may be shared
 *   between sequences and appear in any order; only the entries that cover a sequence's
 *   keys are read (the rest of a row may hold anything). Masks, ALiBi and the LSE see the
 *   logical keys: the results equal those of the contiguous k and v the pages spell.
 *   Checked on the host (named errors, nothing written): P's range and multiple, width
 *   >= 1, batch stride >= width, the pools' shapes (rows per page == P, v like k), width *
 *   P <= INT32_MAX, max_seqlen_k (varlen), the table's offsets in int64. Without
 *   block_table the other three fields must be 0 (FA_ERR_BAD_PARAM). The page ids (in
 *   0 .. num_pages - 1 for every entry a sequence's keys use) are device data: the CPU
 *   backend checks them when the call runs, before writing anything (FA_ERR_BAD_SEQLENS);
 *   plans and workspace queries do not read them; GPU backends check them on the device
 *   (DEVICE-CHECKED INDICES below). The backward refuses paging (FA_ERR_UNSUPPORTED).
 *   GPU backends read pages with their decode kernels (fa_plan_fwd names a "dec" kernel
 *   for every paged call), at any query length; a device without one for its wave size
 *   returns FA_ERR_UNSUPPORTED.
 *
 * KV CACHE (fa_fwd_kvcache: append new keys to a cache, then attend over it): see
 *   fa_kvcache_params below.
 *
 * ERRORS
 *   Every entry point returns an fa_status. On any error nothing is written to the
 *   outputs, fa_last_error(ctx) says what was wrong, and no memory is leaked.
 *   Unsupported combinations return FA_ERR_UNSUPPORTED with the reason.
 *
 * DEVICE-CHECKED INDICES (GPU backends)
 *   No GPU call synchronises with the host, and with the workspace passed in a call
 *   allocates nothing: calls can be captured in a CUDA graph (HIP graph) and replayed with
 *   new contents of every array they read. So arrays of indices that live in device memory
 *   (cu_seqlens_q/k, seqused_k, and for paged and appending calls block_table,
 *   cache_seqlens, cache_batch_idx) are never read by the host; their values are checked
 *   on the device, by a check kernel that runs ahead of the attention in the call's stream
 *   (for a fixed-length fa_fwd, beside it: the attention reads seqused_k and page ids
 *   clamped into the tensors until the check's verdict, which it waits for before writing;
 *   a fixed-length fa_fwd on the decode kernels whose block_table rows are short (up to 4
 *   entries per thread of a block) has no check kernel: its attention blocks make the same
 *   checks themselves, and write out only once they have).
 *   On the host, before anything launches (errors as usual, nothing written): every shape,
 *   stride, dtype and scalar, varlen_batch and max_seqlen_q/k >= 0 (grids are sized from
 *   max_seqlen_q/k, capped at the tensors' rows, never from the arrays).
 *   On the device, per call:
 *     cu_seqlens_q/k: [0] == 0, non-decreasing, [varlen_batch] == the tensor's rows (not
 *       for a paged call's cu_seqlens_k, which gives lengths only) (else every sequence
 *       of the call is bad); each length <= max_seqlen_q/k (else that sequence is bad).
 *     seqused_k[i] in 0 .. the keys of sequence i.
 *     Paged and appending calls (their own sections say which arrays they take):
 *     cache_seqlens[i] >= 0 and cache_seqlens[i] + the new keys <= the cache's capacity;
 *     cache_batch_idx[i] in 0 .. the cache's batch - 1; with rotary, cache_seqlens[i] + the
 *     new keys >= s_q; the keys of sequence i fit its block_table row (<=
 *     block_table_width * page_block_size), and each of the row's entries that covers a
 *     key is a page in 0 .. num_pages - 1.
 *   A bad sequence writes nothing at all (no out, lse, dq, dk, dv, cache rows; the other
 *   sequences of the call are computed as usual) and the first violation found is kept in
 *   the context's device-check record: which check, the call, the sequence, the entry,
 *   its value and the limit it broke. Later violations are not recorded until the record
 *   has been read (their sequences still write nothing); when several are found at once
 *   (blocks of one call run in parallel), which of them is kept is not specified.
 *   The report: every later fa_fwd, fa_bwd, fa_fwd_kvcache, fa_combine and workspace or plan query on the
 *   context reads the record first (one host load, no synchronisation) and, when it is
 *   set, returns FA_ERR_DEVICE_CHECK without doing anything else, fa_last_error naming
 *   the check and the values; reading it clears the record. This is best effort: the
 *   record is set only once the offending check has run, so a call issued before
 *   that still succeeds. fa_device_error(ctx, 1) is deterministic: it waits for the
 *   context's stream first. A CPU context checks the same conditions on the host (its
 *   arrays are host memory) and fails the offending call itself with FA_ERR_BAD_SEQLENS
 *   (or its named error), writing nothing; its fa_device_error always returns FA_OK.
 *   A captured graph holds the context's record (and its kernels): destroy the context
 *   only after its graphs.
 *   HIP: a call that allocates its workspace drains the stream before freeing it (ROCm
 *   5.2 has no stream-ordered free): pass the workspace in for graph capture.
 *
 * THREADS
 *   A context may be used by one thread at a time. Distinct contexts are independent.
 */
#ifndef FLASHATTN_H
#define FLASHATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHATTN_VERSION_MAJOR 0
#define FLASHATTN_VERSION_MINOR 1
#define FLASHATTN_VERSION_PATCH 0
#define FLASHATTN_VERSION \
    (FLASHATTN_VERSION_MAJOR * 10000 + FLASHATTN_VERSION_MINOR * 100 + FLASHATTN_VERSION_PATCH)

/* Symbols of the shared library: the build hides everything else. */
#if defined(_WIN32) && defined(FLASHATTN_BUILDING_SHARED)
#define FA_API __declspec(dllexport)
#elif defined(__GNUC__)
#define FA_API __attribute__((visibility("default")))
#else
#define FA_API
#endif

/* Largest head dim any backend accepts; every multiple of 8 up to it is supported. */
#define FA_MAX_HEAD_DIM 256

typedef enum fa_status {
    FA_OK = 0,
    FA_ERR_NULL_POINTER,         /* a required pointer argument or tensor data is NULL      */
    FA_ERR_BAD_RANK,             /* a tensor has the wrong number of dims for the call       */
    FA_ERR_BAD_SIZE,             /* a dim out of range, or a size/offset overflows int64     */
    FA_ERR_SHAPE_MISMATCH,       /* tensors disagree (batch, seqlen, heads, head dim, out)   */
    FA_ERR_BAD_HEAD_DIM,         /* head dim not a multiple of 8, or > FA_MAX_HEAD_DIM       */
    FA_ERR_BAD_GQA,              /* h % h_k != 0                                             */
    FA_ERR_BAD_STRIDE,           /* last dim not contiguous, or a negative stride            */
    FA_ERR_BAD_DTYPE,            /* unknown dtype, dtypes differ, or LSE not fp32           */
    FA_ERR_BAD_SEQLENS,          /* cu_seqlens not non-decreasing from 0, or exceed totals   */
    FA_ERR_BAD_PARAM,            /* a scalar parameter is out of range (window, softcap...)  */
    FA_ERR_BAD_BACKEND,          /* unknown backend enum, or a device index out of range    */
    FA_ERR_BAD_TILE_OVERRIDE,    /* FLASHATTN_FORCE_TILE is malformed or names no config    */
    FA_ERR_WORKSPACE_TOO_SMALL,  /* workspace given but smaller than the query returned     */
    FA_ERR_UNSUPPORTED,          /* a valid request this backend/build cannot serve         */
    FA_ERR_NO_DEVICE,            /* the backend's runtime finds no usable device             */
    FA_ERR_OUT_OF_MEMORY,        /* an internal allocation failed                            */
    FA_ERR_DEVICE_RUNTIME,       /* the CUDA/HIP runtime reported an error                   */
    FA_ERR_DEVICE_CHECK,         /* an earlier call's device-resident indices were out of    */
                                 /* range (DEVICE-CHECKED INDICES below); its sequences wrote */
                                 /* nothing                                                    */
    FA_STATUS_COUNT
} fa_status;

typedef enum fa_backend {
    FA_BACKEND_AUTO = 0,  /* best present: CUDA, then HIP, then CPU */
    FA_BACKEND_CPU = 1,
    FA_BACKEND_CUDA = 2,
    FA_BACKEND_HIP = 3
} fa_backend;

typedef enum fa_dtype {
    FA_DTYPE_F32 = 0,
    FA_DTYPE_F16 = 1,
    FA_DTYPE_BF16 = 2
} fa_dtype;

/* A strided view of memory. shape/stride entries past ndim are ignored. */
typedef struct fa_tensor {
    void *data;
    fa_dtype dtype;
    int ndim;
    int64_t shape[4];
    int64_t stride[4]; /* in elements */
} fa_tensor;

/* Contiguous [b, s, h, d] (row-major) tensor. */
FA_API fa_tensor fa_tensor_bshd(void *data, fa_dtype dtype, int64_t b, int64_t s, int64_t h, int64_t d);
/* Contiguous [total, h, d] tensor for varlen. */
FA_API fa_tensor fa_tensor_thd(void *data, fa_dtype dtype, int64_t total, int64_t h, int64_t d);
/* Contiguous fp32 LSE: [b, h, s_q] (fa_tensor_lse) or [h, total_q] (fa_tensor_lse_varlen). */
FA_API fa_tensor fa_tensor_lse(float *data, int64_t b, int64_t h, int64_t s_q);
FA_API fa_tensor fa_tensor_lse_varlen(float *data, int64_t h, int64_t total_q);

typedef struct fa_params {
    float softmax_scale;          /* 0: 1/sqrt(head_dim)                                      */
    int causal;                   /* bottom-right aligned                                     */
    int window_left;              /* -1: unbounded                                            */
    int window_right;             /* -1: unbounded (0 with causal)                            */
    float softcap;                /* 0: off; > 0: softcap * tanh(S / softcap)                 */
    const float *alibi_slopes;    /* NULL or fp32 [h] (alibi_batch_stride 0) or [b, h]        */
    int64_t alibi_batch_stride;   /* elements between batches of slopes; 0: shared            */
    /* Varlen: both NULL, or both set with varlen_batch + 1 int32 entries each. */
    const int32_t *cu_seqlens_q;
    const int32_t *cu_seqlens_k;
    int varlen_batch;             /* b when varlen (0: no sequences, cu_seqlens [0])          */
    int max_seqlen_q;             /* varlen: an upper bound of the per-sequence lengths       */
    int max_seqlen_k;
    const int32_t *seqused_k;     /* NULL or int32 [b]: only the first seqused_k[i] keys count */
    int num_splits;               /* 0: let the dispatcher choose; 1: no split-KV; n: force n */
    int deterministic;            /* bitwise reproducible results (backward)                  */
    /* Paged K/V (PAGED KV CACHE above): NULL, or int32 [b, block_table_width] page ids. */
    const int32_t *block_table;
    int64_t block_table_batch_stride; /* entries between rows (>= block_table_width)      */
    int page_block_size;          /* keys per page: a multiple of 16 in 16..1024            */
    int block_table_width;        /* entries per row of block_table (>= 1)                 */
    int reserved[7];              /* must be zero */
} fa_params;

/* Defaults: scale 0 (1/sqrt(d)), no mask, no softcap, no ALiBi, no varlen, auto splits. */
FA_API void fa_params_init(fa_params *params);

typedef struct fa_context fa_context;

/* Create a context on a backend and device index. FA_BACKEND_AUTO picks the best backend
 * compiled in and present. Errors: FA_ERR_BAD_BACKEND, FA_ERR_NO_DEVICE,
 * FA_ERR_UNSUPPORTED (backend not compiled in), FA_ERR_OUT_OF_MEMORY. On error *ctx is
 * NULL; fa_create_error() then tells why. */
FA_API fa_status fa_create(fa_context **ctx, fa_backend backend, int device);
/* The reason the last failed fa_create on this thread failed ("" if none). */
FA_API const char *fa_create_error(void);
FA_API void fa_destroy(fa_context *ctx);

FA_API fa_backend fa_context_backend(const fa_context *ctx);
/* cudaStream_t / hipStream_t on GPU backends (NULL = default stream); CPU: must be NULL. */
FA_API fa_status fa_set_stream(fa_context *ctx, void *stream);
/* CPU backend: worker threads (0 = all online cores). Ignored on GPU backends. */
FA_API fa_status fa_set_num_threads(fa_context *ctx, int num_threads);

/* The context's device-check record (DEVICE-CHECKED INDICES above): FA_OK when no
 * violation is recorded, else FA_ERR_DEVICE_CHECK with fa_last_error naming the check,
 * the call, the sequence, the entry, its value and the limit; reading it clears it.
 * wait = 0 reads what the device has written so far; wait = 1 first waits for all work
 * queued on the context's stream, and returns FA_ERR_UNSUPPORTED (record untouched) while
 * that stream is being captured into a graph, where waiting is not allowed. CPU
 * contexts: always FA_OK. Errors: FA_ERR_NULL_POINTER, FA_ERR_BAD_PARAM (wait not 0 or
 * 1), FA_ERR_DEVICE_RUNTIME. */
FA_API fa_status fa_device_error(fa_context *ctx, int wait);

/* Last error message of this context ("" after success). Valid until the next call. */
FA_API const char *fa_last_error(const fa_context *ctx);
/* Name of a status ("FA_ERR_BAD_HEAD_DIM"); "FA_STATUS_UNKNOWN" for other values. */
FA_API const char *fa_status_string(fa_status status);
FA_API const char *fa_backend_name(fa_backend backend);
FA_API const char *fa_dtype_name(fa_dtype dtype);

/* Bytes of workspace the forward needs for these arguments (0 is possible). It depends
 * on the shape, the mask and the device, not only on the sizes: split-KV partials, the
 * device check's per-sequence flags, and on sm_90 a 256-byte tile counter for masked
 * calls whose query tiles (over all heads, batch entries and splits) outnumber the SMs.
 * Query it for each shape a buffer will serve. */
FA_API fa_status fa_fwd_workspace_size(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                                const fa_tensor *v, const fa_params *params, size_t *bytes);

/* Forward attention. lse may be NULL. workspace may be NULL (the library then allocates
 * what it needs for the call) or point to workspace_bytes >= fa_fwd_workspace_size()
 * bytes of backend memory, 16-byte aligned (else FA_ERR_UNSUPPORTED). GPU backends run
 * asynchronously on the context's stream. */
FA_API fa_status fa_fwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                 const fa_params *params, fa_tensor *out, fa_tensor *lse,
                 void *workspace, size_t workspace_bytes);

/* Backward: the gradients of the forward's out with respect to q, k and v.
 *   Inputs: q, k, v and params as given to fa_fwd; out and lse as that forward wrote them
 *   (lse required: fp32 [b, h, s_q], varlen [h, total_q]); dout, the gradient of out,
 *   shaped like out.
 *   Outputs: dq shaped like q; dk and dv shaped like k, each summed over the h / h_k
 *   query heads of its GQA/MQA group. Every element is written: keys no query sees
 *   (masks, past seqused_k) get 0, and rows with no visible key (LSE -inf) give zero
 *   gradients, never NaN. Under softcap the gradient flows through softcap * tanh.
 *   dtypes: dout, dq, dk and dv have q's dtype (fp16 or bf16; fp32 on the CPU backend
 *   only); accumulation is fp32.
 *   workspace: fp32 scratch and accumulation buffers, as for fa_fwd: NULL (the library
 *   allocates for the call) or workspace_bytes >= fa_bwd_workspace_size() bytes of
 *   16-byte aligned backend memory.
 *   params.deterministic: dq, dk and dv are bitwise identical run to run (otherwise a
 *   backend may accumulate with atomics; the CPU backend is deterministic either way,
 *   for any thread count). params.num_splits is ignored.
 *   Errors as fa_fwd, plus FA_ERR_UNSUPPORTED where a backend or build has no backward
 *   for the request. GPU backends run asynchronously on the context's stream. */
FA_API fa_status fa_bwd_workspace_size(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                                const fa_tensor *v, const fa_params *params, size_t *bytes);
FA_API fa_status fa_bwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                 const fa_tensor *out, const fa_tensor *lse, const fa_tensor *dout,
                 const fa_params *params, fa_tensor *dq, fa_tensor *dk, fa_tensor *dv,
                 void *workspace, size_t workspace_bytes);

/* KV cache: append this step's keys and values to a cache, then attend over it (in the
 * spirit of FlashAttention-2's flash_attn_with_kvcache).
 *   q [b, s_q, h, d] (no varlen); k_cache and v_cache either contiguous caches
 *   [b_cache, s_max, h_k, d] (b_cache == b unless kv->cache_batch_idx is set) or, with
 *   params->block_table, page pools [num_pages, page_block_size, h_k, d] addressed as in
 *   PAGED KV CACHE; k_new and v_new both NULL (no append) or both [b, s_new, h_k, d]; out
 *   like q; lse NULL or fp32 [b, h, s_q]. All tensors share q's dtype; any outer strides.
 *   The capacity of a cache row is s_max, or block_table_width * page_block_size.
 * SEMANTICS, for batch entry i with n_i = kv->cache_seqlens[i]:
 *   1. Row j of k_new/v_new (j < s_new) is written to key n_i + j of the cache row
 *      (cache row kv->cache_batch_idx[i], or i; through the block table when paged).
 *      With rotary (kv->rotary_cos set) k_new row j is rotated at position n_i + j before
 *      it is written; v is never rotated.
 *   2. out and lse are the attention of q over keys 0 .. n_i + s_new - 1 of that cache row,
 *      exactly fa_fwd with s_k = n_i + s_new: masks bottom-right aligned to n_i + s_new,
 *      ALiBi, softcap, windows as fa_fwd. With rotary, q row t is rotated at position
 *      n_i + s_new - s_q + t: the key a causal q row is aligned with (for s_q == s_new,
 *      n_i + t, the position of its own new key). FlashAttention-2 uses the same positions
 *      when causal or windowed, but rotates every q row at n_i otherwise; here the position
 *      does not depend on the mask. q itself is not modified (the rotated copy lives in
 *      the workspace).
 *   Rotary: cos and sin [rotary_seqlen, rotary_dim / 2] in q's dtype, contiguous, backend
 *   memory; the pair (x, y) of dims (2t, 2t+1) when rotary_interleaved (GPT-J), else
 *   (t, t + rotary_dim / 2) (GPT-NeoX), becomes (x cos - y sin, x sin + y cos) with
 *   cos[pos][t], sin[pos][t]; dims from rotary_dim on are copied. rotary_dim: a multiple of
 *   16 in 16..d (FlashAttention-2's rule: the second half of the non-interleaved pairs
 *   then starts on a 16-byte boundary, which the GPU append kernel's vector loads need);
 *   rotary_seqlen >= the capacity (checked on the host, so every position n_i + j < n_i +
 *   s_new <= capacity is in the table). Computed in fp32, rounded to the dtype once.
 *   Without rotary_cos: rotary_sin NULL and rotary_dim, rotary_interleaved,
 *   rotary_seqlen 0.
 * CHECKED ON THE HOST (named errors, nothing written, the cache included): shapes, dtypes,
 *   strides, every fa_params rule of fa_fwd; kv->reserved zero; s_new <= capacity;
 *   params->cu_seqlens_q/k and seqused_k must be NULL (FA_ERR_UNSUPPORTED: the cache
 *   lengths come from cache_seqlens); cache_batch_idx with block_table is
 *   FA_ERR_UNSUPPORTED (as FlashAttention-2); when appending, k_cache and v_cache are
 *   outputs and must not overlap themselves.
 * DEVICE DATA (cache_seqlens, cache_batch_idx, block_table): 0 <= n_i, n_i + s_new <=
 *   capacity, cache_batch_idx[i] in 0..b_cache - 1, page ids in 0..num_pages - 1 for the
 *   keys 0 .. n_i + s_new - 1, and with rotary n_i + s_new >= s_q (no q row before
 *   position 0). The CPU backend checks them on the host before writing anything
 *   (FA_ERR_BAD_SEQLENS). GPU backends read them only on the device: the device check
 *   runs first, and an entry that breaks them gets no cache row written and no out or lse
 *   (the report as in DEVICE-CHECKED INDICES).
 * GPU backends (no host synchronisation, capturable): the device check, one append kernel
 *   (which also writes the rotated q and n_i + s_new into the workspace), then the
 *   forward; paged caches and cache_batch_idx are read by the decode kernels.
 *   workspace: as fa_fwd, sized by fa_fwd_kvcache_workspace_size. */
typedef struct fa_kvcache_params {
    const int32_t *cache_seqlens;   /* int32 [b], backend memory: keys already in each row  */
    const int32_t *cache_batch_idx; /* NULL or int32 [b]: the cache row of each entry;      */
                                    /* contiguous caches only                              */
    const void *rotary_cos;         /* NULL (no rotary) or [rotary_seqlen, rotary_dim / 2] */
    const void *rotary_sin;         /* like rotary_cos                                     */
    int rotary_dim;                 /* dims rotated: a multiple of 16, <= d                */
    int rotary_interleaved;         /* 1: pairs (2t, 2t+1); 0: (t, t + rotary_dim / 2)     */
    int64_t rotary_seqlen;          /* rows of cos and sin (>= the cache capacity)         */
    int reserved[8];                /* must be zero                                        */
} fa_kvcache_params;

/* Defaults: everything NULL / 0 (no cache_batch_idx, no rotary). */
FA_API void fa_kvcache_params_init(fa_kvcache_params *kv);

FA_API fa_status fa_fwd_kvcache_workspace_size(fa_context *ctx, const fa_tensor *q,
                                               const fa_tensor *k_cache, const fa_tensor *v_cache,
                                               const fa_tensor *k_new, const fa_tensor *v_new,
                                               const fa_kvcache_params *kv,
                                               const fa_params *params, size_t *bytes);
FA_API fa_status fa_fwd_kvcache(fa_context *ctx, const fa_tensor *q, fa_tensor *k_cache,
                                fa_tensor *v_cache, const fa_tensor *k_new,
                                const fa_tensor *v_new, const fa_kvcache_params *kv,
                                const fa_params *params, fa_tensor *out, fa_tensor *lse,
                                void *workspace, size_t workspace_bytes);

/* Merging partial results: n forward results for the same queries over disjoint sets of
 * keys (the pieces of a cascade, or of context-parallel attention), each out_i with its
 * lse_i, combine into the attention over the union of the keys, per row and head:
 *   lse = log(sum_i exp(lse_i)),   out = sum_i exp(lse_i - lse) * out_i
 * partial_out[i]: [b, s_q, h, d] (varlen: [total_q, h, d]), all of out's shape and dtype,
 * last dim contiguous; partial_lse[i]: f32 [b, h, s_q] ([h, total_q]), as fa_fwd writes
 * them. A partial whose lse is -inf saw no key and contributes nothing: its out is not
 * read. So is one whose lse is +inf (what FlashAttention-2 writes for such rows). A row
 * with no contributing partial gets out 0 and lse -inf; a NaN lse gives NaN. lse may be
 * NULL. 1 <= n <= FA_MAX_COMBINE_PARTIALS; out and lse must not overlap the partials or
 * each other (FA_ERR_BAD_STRIDE). Every backend; the GPU backends (f16, bf16) run
 * asynchronously on the context's stream, need no workspace, and read every partial_out
 * through one layout and every partial_lse through one (all n with the strides of the
 * first; out and lse may differ) and rows of 16 bytes (head_dim a multiple of 8, out and
 * partial_out pointers 16-byte aligned, their outer strides multiples of 8 elements):
 * otherwise FA_ERR_UNSUPPORTED, with the reason. */
#define FA_MAX_COMBINE_PARTIALS 128
FA_API fa_status fa_combine(fa_context *ctx, int n, const fa_tensor *partial_out,
                            const fa_tensor *partial_lse, fa_tensor *out, fa_tensor *lse);

/* Which kernel and tiles a forward with these arguments would run, and why. Runs the same
 * checks and the same selection as fa_fwd, so a plan that succeeds is a call that runs. */
typedef struct fa_plan {
    fa_backend backend;
    char arch[16];          /* table row used: "sm_90", "gfx942", "cpu", ...           */
    char kernel[64];        /* instance name                                             */
    int head_dim_instance;  /* head dim of the compiled instance (>= the problem's)      */
    int tile_m, tile_n;     /* query rows x key rows per block iteration                 */
    int threads;            /* per block (GPU) or worker threads (CPU)                   */
    int stages;             /* K/V pipeline depth                                        */
    int smem_bytes;         /* shared memory / LDS per block; CPU: per-thread tile bytes */
    int blocks_per_sm;      /* occupancy the selection assumed                           */
    int num_splits;         /* split-KV factor (1: none)                                 */
    size_t workspace_bytes;
    char reason[256];       /* why this config won, in words                             */
} fa_plan;

FA_API fa_status fa_plan_fwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                      const fa_tensor *v, const fa_params *params, fa_plan *plan);

/* The same for a backward (fa_bwd) with these inputs: its kernel and tiles (tile_n key rows
 * stay per block, tile_m query rows stream past), and workspace_bytes, which on GPUs
 * includes the fp32 dQ accumulator unless params.deterministic is set (then dQ has its
 * own pass and no atomics). num_splits is always 1. */
FA_API fa_status fa_plan_bwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                      const fa_tensor *v, const fa_params *params, fa_plan *plan);

/* The device the context runs on and the architecture table row the dispatcher uses. */
typedef struct fa_device_info {
    fa_backend backend;
    char device_name[128];   /* as the runtime names it ("NVIDIA H200", "CPU")           */
    char arch[16];           /* "sm_90", "gfx942", "cpu"; the table row's name           */
    int row_from_table;      /* 1: a table row; 0: built from the device's own limits   */
    int wave_size;
    int smem_per_block;      /* bytes, opt-in maximum                                    */
    int smem_per_sm;         /* bytes                                                    */
    int regs_per_sm;         /* 32-bit registers                                         */
    int max_threads_per_block;
    int sm_count;            /* multiprocessors / compute units (CPU: cores used)        */
    char matrix_unit[16];    /* "mma.sync", "mfma", "wmma", "none"                       */
} fa_device_info;

FA_API fa_status fa_get_device_info(fa_context *ctx, fa_device_info *info);

/* The public structs by name, for fa_struct_size. */
typedef enum fa_struct_id {
    FA_STRUCT_TENSOR = 0,       /* fa_tensor      */
    FA_STRUCT_PARAMS = 1,       /* fa_params      */
    FA_STRUCT_PLAN = 2,         /* fa_plan        */
    FA_STRUCT_DEVICE_INFO = 3,  /* fa_device_info */
    FA_STRUCT_KVCACHE_PARAMS = 4, /* fa_kvcache_params */
    FA_STRUCT_COUNT
} fa_struct_id;

/* sizeof the struct as this library was compiled; 0 for any other value of `which`.
 * For bindings that mirror the structs instead of compiling this header (python/flashattn
 * compares its ctypes layouts at load): a size that differs from the mirror's means the
 * mirror is out of date and calls through it would read or write the wrong bytes. */
FA_API size_t fa_struct_size(fa_struct_id which);

/* Environment:
 *   FLASHATTN_FORCE_TILE=MxN or MxN:S (e.g. "128x64" or "128x64:2") forces the forward
 *   tile (and stages) for tuning; it must name a compiled config that fits the device,
 *   else calls fail with FA_ERR_BAD_TILE_OVERRIDE. FLASHATTN_FORCE_BWD_TILE does the same
 *   for the backward (M query rows x N keys). */

#ifdef __cplusplus
}
#endif

#endif /* FLASHATTN_H */
