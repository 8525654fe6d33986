/*
 * flashattn_bench.c - the benchmark CLI: runs one forward (or, with --backward, backward)
 * attention shape on a backend, prints the plan the dispatcher chose, the median time per
 * iteration, GFLOP/s (with FlashAttention's FLOP count; 2.5x it for the backward), extra
 * memory, and optionally checks sampled output rows (or gradient rows) against the fp64
 * reference the tests use too (tests/reference) and times an OpenBLAS SGEMM for comparison.
 * On CUDA or HIP (FA_BENCH_CUDA, FA_BENCH_HIP: bench_gpu.h) the inputs are made on the
 * host and copied to the device, calls are timed with the runtime's events, and --check
 * copies the sampled rows back. --sweep runs a preset of shapes (bench_sweep.c).
 * --decode times one query row (or --seqlen-q rows) against --seqlen-k keys and the
 * forward reports the K/V read bandwidth; --page P reads the same keys through a paged
 * K/V cache (page pools and a block table), which --check compares with the contiguous
 * reference, since the pages spell the same keys.
 *
 * Exit status: 0 success, 1 --check failed, 2 bad usage or a library error.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifdef FA_BENCH_HAVE_CBLAS
#include <cblas.h>
#endif
#include "bench_gpu.h"

#include "bench.h"
#include "flashattn.h"

/* The library's own host conversions, so inputs round exactly as its CPU backend rounds. */
#include "api/dtype.h"
#include "fa_reference.h"

#define EXIT_CHECK_FAILED 1
#define EXIT_USAGE 2
#define CHECK_SAMPLES 8

/* ------------------------------------------------------------------------------------ */
/* Options                                                                              */
/* ------------------------------------------------------------------------------------ */


static void usage(FILE *to)
{
    fprintf(to,
            "usage: flashattn_bench [options]\n"
            "  --backend auto|cpu|cuda|hip   (default auto: CUDA, then HIP, then CPU)\n"
            "  --batch N --heads N --kv-heads N --head-dim N\n"
            "  --seqlen N | --seqlen-q N --seqlen-k N\n"
            "  --decode                      s_q = 1 (unless --seqlen-q says otherwise, e.g.\n"
            "                                4 for speculative decoding) against the keys of\n"
            "                                --seqlen-k (or --seqlen)\n"
            "  --page P [--page-order identity|shuffled]\n"
            "                                read K/V through a paged cache of P keys a page\n"
            "                                (params.block_table), pages listed in a shuffled\n"
            "                                (default) or in their own order\n"
            "  --dtype f32|f16|bf16          (default f32 on the CPU, bf16 on GPUs)\n"
            "  --causal  --window L,R  --softcap X  --alibi\n"
            "  --iters N --threads N         (threads 0 = all cores)\n"
            "  --backward                    time fa_bwd (dq, dk, dv) instead of fa_fwd\n"
            "  --check                       compare sampled rows (with --backward: rows of\n"
            "                                dq, dk and dv) with an fp64 reference\n"
            "  --sgemm [--sgemm-n N]         also time cblas_sgemm N x N x N (N = 4096)\n"
            "  --json                        print one JSON object on stdout\n"
            "  --sweep PRESET [--out-json F] [--out-csv F] [--list]\n"
            "                                run a preset's shapes (smoke, training, decode,\n"
            "                                paged; see bench_sweep.c) with the device record\n"
            "                                and the ceilings measured in the same run; progress\n"
            "                                on stderr; --list prints the shapes, runs nothing\n");
}

void bench_default_options(options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = FA_BACKEND_AUTO;
    o->batch = 1;
    o->seqlen_q = o->seqlen_k = 1024;
    o->heads = 16;
    o->kv_heads = 0; /* 0: same as heads */
    o->head_dim = 128;
    o->window_left = o->window_right = -1;
    o->iters = 10;
    o->sgemm_n = 4096;
    o->page_shuffled = 1;
}

static int parse_int(const char *text, int min, int *out)
{
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < min || value > 2147483647L)
        return 0;
    *out = (int)value;
    return 1;
}

static int parse_float(const char *text, float *out)
{
    char *end;
    float value = strtof(text, &end);
    if (*text == '\0' || *end != '\0' || !(value >= 0.0f) || isinf(value))
        return 0;
    *out = value;
    return 1;
}

static int parse_backend(const char *text, fa_backend *out)
{
    static const struct { const char *name; fa_backend value; } names[] = {
        {"auto", FA_BACKEND_AUTO}, {"cpu", FA_BACKEND_CPU},
        {"cuda", FA_BACKEND_CUDA}, {"hip", FA_BACKEND_HIP}};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; ++i)
        if (strcmp(text, names[i].name) == 0) {
            *out = names[i].value;
            return 1;
        }
    return 0;
}

static int parse_dtype(const char *text, fa_dtype *out)
{
    if (strcmp(text, "f32") == 0)
        *out = FA_DTYPE_F32;
    else if (strcmp(text, "f16") == 0)
        *out = FA_DTYPE_F16;
    else if (strcmp(text, "bf16") == 0)
        *out = FA_DTYPE_BF16;
    else
        return 0;
    return 1;
}

static int parse_page_order(const char *text, int *shuffled)
{
    if (strcmp(text, "shuffled") == 0)
        *shuffled = 1;
    else if (strcmp(text, "identity") == 0)
        *shuffled = 0;
    else
        return 0;
    return 1;
}

static int parse_window(const char *text, int *left, int *right)
{
    char extra;
    return sscanf(text, "%d,%d%c", left, right, &extra) == 2 && *left >= -1 && *right >= -1;
}

/* An option that takes a value: returns 1 and sets *ok when `flag` matches argv[*i]. */
static int takes_value(int argc, char **argv, int *i, const char *flag, const char **value)
{
    if (strcmp(argv[*i], flag) != 0)
        return 0;
    *value = *i + 1 < argc ? argv[++*i] : NULL;
    return 1;
}

static int parse_valued(int argc, char **argv, int *i, options *o)
{
    const char *v = NULL;
    int seqlen;
    if (takes_value(argc, argv, i, "--backend", &v))
        return v && parse_backend(v, &o->backend);
    if (takes_value(argc, argv, i, "--batch", &v))
        return v && parse_int(v, 1, &o->batch);
    if (takes_value(argc, argv, i, "--seqlen", &v)) {
        if (!v || !parse_int(v, 1, &seqlen))
            return 0;
        o->seqlen_q = o->seqlen_k = seqlen;
        return 1;
    }
    if (takes_value(argc, argv, i, "--seqlen-q", &v))
        return v && parse_int(v, 1, &o->seqlen_q) && (o->seqlen_q_given = 1);
    if (takes_value(argc, argv, i, "--seqlen-k", &v))
        return v && parse_int(v, 1, &o->seqlen_k);
    if (takes_value(argc, argv, i, "--heads", &v))
        return v && parse_int(v, 1, &o->heads);
    if (takes_value(argc, argv, i, "--kv-heads", &v))
        return v && parse_int(v, 1, &o->kv_heads);
    if (takes_value(argc, argv, i, "--head-dim", &v))
        return v && parse_int(v, 1, &o->head_dim);
    if (takes_value(argc, argv, i, "--dtype", &v))
        return v && (o->dtype_given = parse_dtype(v, &o->dtype));
    if (takes_value(argc, argv, i, "--window", &v))
        return v && parse_window(v, &o->window_left, &o->window_right);
    if (takes_value(argc, argv, i, "--softcap", &v))
        return v && parse_float(v, &o->softcap);
    if (takes_value(argc, argv, i, "--iters", &v))
        return v && parse_int(v, 1, &o->iters);
    if (takes_value(argc, argv, i, "--threads", &v))
        return v && parse_int(v, 0, &o->threads);
    if (takes_value(argc, argv, i, "--page", &v))
        return v && parse_int(v, 1, &o->page);
    if (takes_value(argc, argv, i, "--page-order", &v))
        return v && parse_page_order(v, &o->page_shuffled);
    if (takes_value(argc, argv, i, "--sweep", &v))
        return v && (o->sweep = v) != NULL;
    if (takes_value(argc, argv, i, "--out-json", &v))
        return v && (o->json_out = v) != NULL;
    if (takes_value(argc, argv, i, "--out-csv", &v))
        return v && (o->csv_out = v) != NULL;
    if (takes_value(argc, argv, i, "--sgemm-n", &v))
        return v && parse_int(v, 1, &o->sgemm_n) && (o->sgemm = 1);
    return -1; /* not a valued option */
}

static int parse_flag(const char *arg, options *o)
{
    if (strcmp(arg, "--causal") == 0)
        o->causal = 1;
    else if (strcmp(arg, "--alibi") == 0)
        o->alibi = 1;
    else if (strcmp(arg, "--check") == 0)
        o->check = 1;
    else if (strcmp(arg, "--sgemm") == 0)
        o->sgemm = 1;
    else if (strcmp(arg, "--json") == 0)
        o->json = 1;
    else if (strcmp(arg, "--backward") == 0)
        o->backward = 1;
    else if (strcmp(arg, "--decode") == 0)
        o->decode = 1;
    else if (strcmp(arg, "--list") == 0)
        o->list = 1;
    else
        return 0;
    return 1;
}

/* 1 when the command line parsed; otherwise a message on stderr and 0. */
static int parse_args(int argc, char **argv, options *o)
{
    int i;
    bench_default_options(o);
    for (i = 1; i < argc; ++i) {
        int valued;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (parse_flag(argv[i], o))
            continue;
        valued = parse_valued(argc, argv, &i, o);
        if (valued == 1)
            continue;
        fprintf(stderr, "flashattn_bench: %s '%s'\n",
                valued == 0 ? "bad or missing value for" : "unknown option", argv[i]);
        usage(stderr);
        return 0;
    }
    if (o->kv_heads == 0)
        o->kv_heads = o->heads;
    if (o->decode && !o->seqlen_q_given)
        o->seqlen_q = 1;
    if (o->page > 0 && o->backward) {
        fprintf(stderr, "flashattn_bench: --page: paged K/V is forward-only (fa_bwd refuses it)\n");
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* Numbers: elements of any dtype, random normal inputs                                 */
/* ------------------------------------------------------------------------------------ */

static size_t dtype_bytes(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 4 : 2;
}

static void store_element(void *buf, fa_dtype dtype, size_t index, float value)
{
    if (dtype == FA_DTYPE_F32)
        ((float *)buf)[index] = value;
    else if (dtype == FA_DTYPE_F16)
        ((uint16_t *)buf)[index] = fa_f32_to_f16(value);
    else
        ((uint16_t *)buf)[index] = fa_f32_to_bf16(value);
}

static double load_element(const void *buf, fa_dtype dtype, size_t index)
{
    if (dtype == FA_DTYPE_F32)
        return ((const float *)buf)[index];
    if (dtype == FA_DTYPE_F16)
        return fa_f16_to_f32(((const uint16_t *)buf)[index]);
    return fa_bf16_to_f32(((const uint16_t *)buf)[index]);
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so the Box-Muller log is finite. */
static double uniform01(uint64_t *state)
{
    return ((double)(splitmix64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* Normal values (Box-Muller, both outputs of each pair) for the first 2^20 elements; past
 * those the same values repeat, copied: timing needs normal-like values, not 2^30
 * independent ones, and drawing each one cost minutes for the sweep's largest shapes.
 * --check compares with the reference on these same host values. */
#define FILL_PERIOD ((size_t)1 << 20)

void bench_fill_normal(void *buf, fa_dtype dtype, size_t count, uint64_t seed)
{
    const double two_pi = 6.283185307179586;
    const size_t drawn = count < FILL_PERIOD ? count : FILL_PERIOD;
    const size_t elem = dtype_bytes(dtype);
    uint64_t state = seed;
    size_t i, done;
    for (i = 0; i < drawn; i += 2) {
        double r = sqrt(-2.0 * log(uniform01(&state))), angle = two_pi * uniform01(&state);
        store_element(buf, dtype, i, (float)(r * cos(angle)));
        if (i + 1 < drawn)
            store_element(buf, dtype, i + 1, (float)(r * sin(angle)));
    }
    for (done = drawn; done < count; done += drawn < count - done ? drawn : count - done)
        memcpy((char *)buf + done * elem, buf, (drawn < count - done ? drawn : count - done) * elem);
}

/* ------------------------------------------------------------------------------------ */
/* Backend memory: the CPU computes on host buffers, CUDA on device copies of them      */
/* ------------------------------------------------------------------------------------ */

/* The context's device: CUDA buffers are allocated there. */
#define BENCH_DEVICE 0

#ifdef FA_BENCH_GPU
static int gpu_ok(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 1;
    fprintf(stderr, "flashattn_bench: %s: %s\n", what, cudaGetErrorString(err));
    return 0;
}

/* A device buffer holding a copy of `bytes` of `host`; NULL (said why) on failure. */
static void *device_copy(const void *host, size_t bytes)
{
    void *dev = NULL;
    if (!gpu_ok(cudaMalloc(&dev, bytes), "cudaMalloc"))
        return NULL;
    if (!gpu_ok(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device")) {
        cudaFree(dev);
        return NULL;
    }
    return dev;
}
#endif

/* What the library reads and writes for `host`: the host buffer itself on the CPU, a
 * device copy on CUDA. NULL stays NULL; an allocation failure gives NULL as well. */
static void *run_buffer(int on_device, void *host, size_t bytes)
{
#ifdef FA_BENCH_GPU
    if (on_device && host != NULL)
        return device_copy(host, bytes);
#endif
    (void)on_device;
    (void)bytes;
    return host;
}

/* Releases a run buffer that is not a host buffer (those go with free_buffers). */
static void free_run_buffer(int on_device, void *run)
{
#ifdef FA_BENCH_GPU
    if (on_device) {
        cudaFree(run);
        return;
    }
#endif
    (void)on_device;
    (void)run;
}

/* Copies `bytes` at byte `offset` of a run buffer back into its host buffer (a no-op
 * where they are the same memory). 1 on success. */
static int fetch_back(int on_device, void *host, const void *run, size_t offset, size_t bytes)
{
#ifdef FA_BENCH_GPU
    if (on_device)
        return gpu_ok(cudaMemcpy((char *)host + offset, (const char *)run + offset, bytes,
                                  cudaMemcpyDeviceToHost),
                       "cudaMemcpy to host");
#endif
    (void)on_device;
    (void)host;
    (void)run;
    (void)offset;
    (void)bytes;
    return 1;
}

/* Zeroed workspace where the backend computes; NULL on failure. */
static void *alloc_workspace(int on_device, size_t bytes)
{
#ifdef FA_BENCH_GPU
    void *dev = NULL;
    if (on_device) {
        if (!gpu_ok(cudaMalloc(&dev, bytes), "cudaMalloc (workspace)"))
            return NULL;
        if (!gpu_ok(cudaMemset(dev, 0, bytes), "cudaMemset (workspace)")) {
            cudaFree(dev);
            return NULL;
        }
        return dev;
    }
#endif
    (void)on_device;
    return calloc(1, bytes);
}

static void free_workspace(int on_device, void *workspace)
{
#ifdef FA_BENCH_GPU
    if (on_device) {
        cudaFree(workspace);
        return;
    }
#endif
    (void)on_device;
    free(workspace);
}

/* ------------------------------------------------------------------------------------ */
/* The problem: buffers and tensors                                                     */
/* ------------------------------------------------------------------------------------ */

typedef struct buffers {
    void *q, *k, *v, *out;
    float *lse, *slopes;
    void *dout, *dq, *dk, *dv; /* --backward only */
    /* --page only: pools [pages, P, h_k, d] spelling k and v, the block table [b, width],
     * and seqused_k [b] (s_k for every entry) where s_k is not a multiple of P. */
    void *k_pages, *v_pages;
    int32_t *block_table, *seqused;
} buffers;

typedef struct problem {
    int on_device;      /* run buffers are CUDA device memory                          */
    buffers host;       /* inputs are made here, the reference reads them, and --check */
                        /* fetches the sampled output rows back into out and lse       */
    buffers run;        /* what the library reads and writes                           */
    void *workspace;    /* run memory too                                              */
    size_t workspace_bytes;
    fa_tensor tq, tk, tv, tout, tlse;
    fa_tensor tdout, tdq, tdk, tdv;
    fa_params params;
} problem;

static size_t q_elements(const options *o)
{
    return (size_t)o->batch * o->seqlen_q * o->heads * o->head_dim;
}

static size_t kv_elements(const options *o)
{
    return (size_t)o->batch * o->seqlen_k * o->kv_heads * o->head_dim;
}

static size_t lse_elements(const options *o)
{
    return (size_t)o->batch * o->heads * o->seqlen_q;
}

/* Entries of a block table row: the pages that cover s_k keys. */
static int table_width(const options *o)
{
    return (int)(((long long)o->seqlen_k + o->page - 1) / o->page);
}

/* Every batch entry owns its own pages, so the pool holds b * width of them. */
static size_t page_count(const options *o)
{
    return (size_t)o->batch * (size_t)table_width(o);
}

static size_t pool_elements(const options *o)
{
    return page_count(o) * (size_t)o->page * o->kv_heads * o->head_dim;
}

/* Page ids 0 .. pages-1, row after row; shuffled (Fisher-Yates, fixed seed) so that
 * consecutive keys of a sequence live in scattered pages, as in a long-running cache. */
static int32_t *make_block_table(const options *o)
{
    size_t n = page_count(o), i;
    int32_t *table = (int32_t *)malloc(n * sizeof(int32_t));
    uint64_t state = 7;
    for (i = 0; table != NULL && i < n; ++i)
        table[i] = (int32_t)i;
    for (i = n; table != NULL && o->page_shuffled && i > 1; --i) {
        size_t j = (size_t)(splitmix64(&state) % (uint64_t)i);
        int32_t t = table[i - 1];
        table[i - 1] = table[j];
        table[j] = t;
    }
    return table;
}

/* Copies each key row (h_k x d values) of the contiguous [b, s_k, h_k, d] `from` to row
 * r % P of page table[entry][r / P]; the unused tail of a last page stays zero. */
static void spell_pages(const options *o, const int32_t *table, const void *from, void *pool)
{
    const size_t row_bytes = (size_t)o->kv_heads * o->head_dim * dtype_bytes(o->dtype);
    const int width = table_width(o);
    int b;
    long long r;
    for (b = 0; b < o->batch; ++b)
        for (r = 0; r < o->seqlen_k; ++r) {
            size_t page = (size_t)table[(size_t)b * width + (size_t)(r / o->page)];
            size_t to_row = page * (size_t)o->page + (size_t)(r % o->page);
            memcpy((char *)pool + to_row * row_bytes,
                   (const char *)from + ((size_t)b * o->seqlen_k + (size_t)r) * row_bytes, row_bytes);
        }
}

/* The paged copy of host k and v (--page); 1 on success. */
static int make_host_pages(const options *o, buffers *h)
{
    size_t elem = dtype_bytes(o->dtype);
    int b;
    h->block_table = make_block_table(o);
    h->k_pages = calloc(pool_elements(o), elem);
    h->v_pages = calloc(pool_elements(o), elem);
    if (!h->block_table || !h->k_pages || !h->v_pages)
        return 0;
    spell_pages(o, h->block_table, h->k, h->k_pages);
    spell_pages(o, h->block_table, h->v, h->v_pages);
    if (o->seqlen_k % o->page == 0)
        return 1;
    h->seqused = (int32_t *)malloc((size_t)o->batch * sizeof(int32_t));
    for (b = 0; h->seqused != NULL && b < o->batch; ++b)
        h->seqused[b] = o->seqlen_k;
    return h->seqused != NULL;
}

/* ALiBi slopes of the usual geometric sequence 2^(-8 (i + 1) / h). */
static float *make_slopes(int heads)
{
    float *slopes = (float *)malloc((size_t)heads * sizeof(float));
    int i;
    for (i = 0; slopes != NULL && i < heads; ++i)
        slopes[i] = (float)pow(2.0, -8.0 * (i + 1) / heads);
    return slopes;
}

/* Host buffers: inputs random normal, outputs zeroed (which also touches them, so that
 * the page faults of first use are not counted as the library's memory). */
static int make_host_buffers(const options *o, buffers *h)
{
    size_t elem = dtype_bytes(o->dtype);
    h->q = malloc(q_elements(o) * elem);
    h->k = malloc(kv_elements(o) * elem);
    h->v = malloc(kv_elements(o) * elem);
    h->out = malloc(q_elements(o) * elem);
    h->lse = (float *)malloc(lse_elements(o) * sizeof(float));
    h->slopes = o->alibi ? make_slopes(o->heads) : NULL;
    if (!h->q || !h->k || !h->v || !h->out || !h->lse || (o->alibi && !h->slopes))
        return 0;
    memset(h->out, 0, q_elements(o) * elem);
    memset(h->lse, 0, lse_elements(o) * sizeof(float));
    bench_fill_normal(h->q, o->dtype, q_elements(o), 1);
    bench_fill_normal(h->k, o->dtype, kv_elements(o), 2);
    bench_fill_normal(h->v, o->dtype, kv_elements(o), 3);
    if (o->page > 0 && !make_host_pages(o, h))
        return 0;
    if (!o->backward)
        return 1;
    h->dout = malloc(q_elements(o) * elem);
    h->dq = calloc(q_elements(o), elem);
    h->dk = calloc(kv_elements(o), elem);
    h->dv = calloc(kv_elements(o), elem);
    if (!h->dout || !h->dq || !h->dk || !h->dv)
        return 0;
    bench_fill_normal(h->dout, o->dtype, q_elements(o), 4);
    return 1;
}

/* Run buffers: copies of every host buffer (outputs included, so they start at zero).
 * With --page the library reads k and v from the page pools, so only those go there. */
static int make_run_buffers(const options *o, problem *p)
{
    size_t elem = dtype_bytes(o->dtype);
    const buffers *h = &p->host;
    buffers *r = &p->run;
    int dev = p->on_device, paged = o->page > 0;
    size_t kv_bytes = (paged ? pool_elements(o) : kv_elements(o)) * elem;
    r->q = run_buffer(dev, h->q, q_elements(o) * elem);
    r->k = run_buffer(dev, paged ? h->k_pages : h->k, kv_bytes);
    r->v = run_buffer(dev, paged ? h->v_pages : h->v, kv_bytes);
    r->out = run_buffer(dev, h->out, q_elements(o) * elem);
    r->lse = (float *)run_buffer(dev, h->lse, lse_elements(o) * sizeof(float));
    r->slopes = (float *)run_buffer(dev, h->slopes, (size_t)o->heads * sizeof(float));
    /* page_count divides by the page size: only with --page (the CUDA build evaluates the size). */
    r->block_table = (int32_t *)run_buffer(dev, h->block_table, paged ? page_count(o) * sizeof(int32_t) : 0);
    r->seqused = (int32_t *)run_buffer(dev, h->seqused, (size_t)o->batch * sizeof(int32_t));
    if (!(r->q && r->k && r->v && r->out && r->lse && (h->slopes == NULL || r->slopes)))
        return 0;
    if ((h->block_table && !r->block_table) || (h->seqused && !r->seqused))
        return 0;
    if (!o->backward)
        return 1;
    r->dout = run_buffer(dev, h->dout, q_elements(o) * elem);
    r->dq = run_buffer(dev, h->dq, q_elements(o) * elem);
    r->dk = run_buffer(dev, h->dk, kv_elements(o) * elem);
    r->dv = run_buffer(dev, h->dv, kv_elements(o) * elem);
    return r->dout && r->dq && r->dk && r->dv;
}

static void set_params(const options *o, problem *p)
{
    fa_params_init(&p->params);
    p->params.causal = o->causal;
    p->params.window_left = o->window_left;
    p->params.window_right = o->window_right;
    p->params.softcap = o->softcap;
    p->params.alibi_slopes = p->run.slopes;
    if (o->page == 0)
        return;
    p->params.block_table = p->run.block_table;
    p->params.block_table_batch_stride = table_width(o);
    p->params.block_table_width = table_width(o);
    p->params.page_block_size = o->page;
    p->params.seqused_k = p->run.seqused;
}

/* k and v are [b, s_k, h_k, d], or with --page the pools [pages, P, h_k, d]. */
static void make_tensors(const options *o, problem *p)
{
    const buffers *r = &p->run;
    const int64_t kv_outer = o->page > 0 ? (int64_t)page_count(o) : o->batch;
    const int64_t kv_rows = o->page > 0 ? o->page : o->seqlen_k;
    p->tq = fa_tensor_bshd(r->q, o->dtype, o->batch, o->seqlen_q, o->heads, o->head_dim);
    p->tk = fa_tensor_bshd(r->k, o->dtype, kv_outer, kv_rows, o->kv_heads, o->head_dim);
    p->tv = fa_tensor_bshd(r->v, o->dtype, kv_outer, kv_rows, o->kv_heads, o->head_dim);
    p->tout = fa_tensor_bshd(r->out, o->dtype, o->batch, o->seqlen_q, o->heads, o->head_dim);
    p->tlse = fa_tensor_lse(r->lse, o->batch, o->heads, o->seqlen_q);
    p->tdout = fa_tensor_bshd(r->dout, o->dtype, o->batch, o->seqlen_q, o->heads, o->head_dim);
    p->tdq = fa_tensor_bshd(r->dq, o->dtype, o->batch, o->seqlen_q, o->heads, o->head_dim);
    p->tdk = fa_tensor_bshd(r->dk, o->dtype, o->batch, o->seqlen_k, o->kv_heads, o->head_dim);
    p->tdv = fa_tensor_bshd(r->dv, o->dtype, o->batch, o->seqlen_k, o->kv_heads, o->head_dim);
}

/* 1 when every buffer exists; otherwise a message on stderr and 0 (free_problem still
 * releases what was made). */
static int make_problem(const options *o, int on_device, problem *p)
{
    memset(p, 0, sizeof *p);
    p->on_device = on_device;
#ifdef FA_BENCH_GPU
    if (on_device && !gpu_ok(cudaSetDevice(BENCH_DEVICE), "cudaSetDevice"))
        return 0;
#endif
    if (!make_host_buffers(o, &p->host)) {
        fprintf(stderr, "flashattn_bench: out of host memory for the inputs\n");
        return 0;
    }
    if (!make_run_buffers(o, p)) {
        fprintf(stderr, "flashattn_bench: cannot place the inputs on the %s backend\n",
                on_device ? "cuda" : "cpu");
        return 0;
    }
    make_tensors(o, p);
    set_params(o, p);
    return 1;
}

static void free_buffers(buffers *b)
{
    free(b->q);
    free(b->k);
    free(b->v);
    free(b->out);
    free(b->lse);
    free(b->slopes);
    free(b->dout);
    free(b->dq);
    free(b->dk);
    free(b->dv);
    free(b->k_pages);
    free(b->v_pages);
    free(b->block_table);
    free(b->seqused);
}

static void free_problem(problem *p)
{
    free_run_buffer(p->on_device, p->run.q);
    free_run_buffer(p->on_device, p->run.k);
    free_run_buffer(p->on_device, p->run.v);
    free_run_buffer(p->on_device, p->run.out);
    free_run_buffer(p->on_device, p->run.lse);
    free_run_buffer(p->on_device, p->run.slopes);
    free_run_buffer(p->on_device, p->run.dout);
    free_run_buffer(p->on_device, p->run.dq);
    free_run_buffer(p->on_device, p->run.dk);
    free_run_buffer(p->on_device, p->run.dv);
    free_run_buffer(p->on_device, p->run.block_table);
    free_run_buffer(p->on_device, p->run.seqused);
    free_workspace(p->on_device, p->workspace);
    free_buffers(&p->host);
}

/* ------------------------------------------------------------------------------------ */
/* FLOPs                                                                                */
/* ------------------------------------------------------------------------------------ */

/* Keys visible to query row i under the window (causal folded into right = 0). */
static long long visible_keys(long long i, const options *o, int right)
{
    long long diag = i + o->seqlen_k - o->seqlen_q;
    long long lo = o->window_left < 0 ? 0 : diag - o->window_left;
    long long hi = right < 0 ? o->seqlen_k - 1 : diag + right;
    if (lo < 0)
        lo = 0;
    if (hi > o->seqlen_k - 1)
        hi = o->seqlen_k - 1;
    return hi >= lo ? hi - lo + 1 : 0;
}

/* FlashAttention's count: 4 b h s_q s_k d, halved for causal with s_q == s_k; any other
 * mask counts the visible (query, key) pairs exactly. */
static double attention_flops(const options *o)
{
    int right = o->causal ? 0 : o->window_right;
    double per_pair = 4.0 * o->batch * o->heads * o->head_dim;
    long long pairs = 0, i;
    if (o->window_left < 0 && right < 0)
        return per_pair * o->seqlen_q * o->seqlen_k;
    if (o->causal && o->window_left < 0 && o->seqlen_q == o->seqlen_k)
        return per_pair * o->seqlen_q * o->seqlen_k / 2.0;
    for (i = 0; i < o->seqlen_q; ++i)
        pairs += visible_keys(i, o, right);
    return per_pair * (double)pairs;
}

double bench_flops(const options *o)
{
    return (o->backward ? 2.5 : 1.0) * attention_flops(o);
}

/* The K and V a forward must read once, the bytes that bound decode: 2 b s_k h_k d
 * elements (the same with --page: the pages hold the same keys). */
double bench_kv_read_bytes(const options *o)
{
    return 2.0 * o->batch * (double)o->seqlen_k * o->kv_heads * o->head_dim *
           (double)dtype_bytes(o->dtype);
}

/* ------------------------------------------------------------------------------------ */
/* Timing and memory                                                                    */
/* ------------------------------------------------------------------------------------ */

double bench_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long long peak_rss_bytes(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (long long)usage.ru_maxrss * 1024; /* Linux reports KiB */
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *values, int count)
{
    qsort(values, (size_t)count, sizeof *values, compare_doubles);
    return count % 2 ? values[count / 2] : 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

/* ------------------------------------------------------------------------------------ */
/* Running attention                                                                    */
/* ------------------------------------------------------------------------------------ */

/* The last library failure's text, for the sweep's report of a shape that failed. */
static char last_error[512];

const char *bench_last_error(void)
{
    return last_error;
}

static int library_error(fa_context *ctx, const char *what, fa_status status)
{
    snprintf(last_error, sizeof last_error, "%s: %s: %s", what, fa_status_string(status),
             fa_last_error(ctx));
    fprintf(stderr, "flashattn_bench: %s\n", last_error);
    return EXIT_USAGE;
}

/* The timed call: fa_fwd, or fa_bwd from the output and LSE a forward left (--backward). */
static int run_once(fa_context *ctx, const options *o, problem *p)
{
    fa_status st;
    if (o->backward) {
        st = fa_bwd(ctx, &p->tq, &p->tk, &p->tv, &p->tout, &p->tlse, &p->tdout, &p->params,
                    &p->tdq, &p->tdk, &p->tdv, p->workspace, p->workspace_bytes);
        return st == FA_OK ? 0 : library_error(ctx, "fa_bwd", st);
    }
    st = fa_fwd(ctx, &p->tq, &p->tk, &p->tv, &p->params, &p->tout, &p->tlse, p->workspace,
                p->workspace_bytes);
    return st == FA_OK ? 0 : library_error(ctx, "fa_fwd", st);
}

#ifdef FA_BENCH_GPU
/* One call timed by events around it on the stream the library launches on (the
 * default stream: the bench sets none), so the time is the device's, not the launch's. */
static int time_call_gpu(fa_context *ctx, const options *o, problem *p, double *seconds)
{
    cudaEvent_t start, stop;
    float ms = 0.0f;
    int rc = EXIT_USAGE;
    if (!gpu_ok(cudaEventCreate(&start), "cudaEventCreate"))
        return EXIT_USAGE;
    if (gpu_ok(cudaEventCreate(&stop), "cudaEventCreate")) {
        if (gpu_ok(cudaEventRecord(start, 0), "cudaEventRecord"))
            rc = run_once(ctx, o, p);
        if (rc == 0 && !(gpu_ok(cudaEventRecord(stop, 0), "cudaEventRecord") &&
                         gpu_ok(cudaEventSynchronize(stop), "the call on the device") &&
                         gpu_ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime")))
            rc = EXIT_USAGE;
        cudaEventDestroy(stop);
    }
    cudaEventDestroy(start);
    *seconds = 1e-3 * (double)ms;
    return rc;
}
#endif

/* One timed call: device events on CUDA, the monotonic clock on the CPU. */
static int time_call(fa_context *ctx, const options *o, problem *p, double *seconds)
{
    double start;
    int rc;
#ifdef FA_BENCH_GPU
    if (p->on_device)
        return time_call_gpu(ctx, o, p, seconds);
#endif
    start = bench_seconds();
    rc = run_once(ctx, o, p);
    *seconds = bench_seconds() - start;
    return rc;
}

/* One warm-up call, then `iters` timed calls; progress on stderr every few seconds. */
static int time_iterations(fa_context *ctx, const options *o, problem *p, results *r)
{
    double *times = (double *)malloc((size_t)o->iters * sizeof(double));
    double last_progress = bench_seconds();
    int i, rc;
    if (times == NULL)
        return EXIT_USAGE;
    rc = run_once(ctx, o, p);
    for (i = 0; rc == 0 && i < o->iters; ++i) {
        rc = time_call(ctx, o, p, &times[i]);
        if (bench_seconds() - last_progress > 2.0) {
            fprintf(stderr, "flashattn_bench: iteration %d/%d: %.3f ms\n", i + 1, o->iters,
                    1e3 * times[i]);
            last_progress = bench_seconds();
        }
    }
    if (rc == 0) {
        r->median_s = bench_median(times, o->iters);
        r->min_s = times[0]; /* sorted by bench_median() */
    }
    free(times);
    return rc;
}

/* Plan, workspace of the size the library asks for, then the timed loop. Peak memory
 * growth is measured around everything the library does (workspace included). */
static int run_attention(fa_context *ctx, const options *o, problem *p, results *r)
{
    long long rss_before = peak_rss_bytes();
    fa_status st;
    int rc;
    if (o->backward) {
        /* The backward's inputs: one forward, its workspace the library's own. */
        st = fa_fwd(ctx, &p->tq, &p->tk, &p->tv, &p->params, &p->tout, &p->tlse, NULL, 0);
        if (st != FA_OK)
            return library_error(ctx, "fa_fwd", st);
        st = fa_plan_bwd(ctx, &p->tq, &p->tk, &p->tv, &p->params, &r->plan);
    } else {
        st = fa_plan_fwd(ctx, &p->tq, &p->tk, &p->tv, &p->params, &r->plan);
    }
    if (st != FA_OK)
        return library_error(ctx, o->backward ? "fa_plan_bwd" : "fa_plan_fwd", st);
    p->workspace_bytes = r->plan.workspace_bytes;
    if (p->workspace_bytes > 0) {
        p->workspace = alloc_workspace(p->on_device, p->workspace_bytes);
        if (p->workspace == NULL) {
            fprintf(stderr, "flashattn_bench: out of memory for %zu bytes of workspace\n",
                    p->workspace_bytes);
            return EXIT_USAGE;
        }
    }
    rc = time_iterations(ctx, o, p, r);
    r->extra_bytes = peak_rss_bytes() - rss_before;
    r->flops = bench_flops(o);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* --check: fp64 reference of sampled rows (tests/reference, the tests' reference too)  */
/* ------------------------------------------------------------------------------------ */

typedef struct sample {
    int batch, head;
    long long row;
} sample;

/* The reference's view of the problem: the host copies of the inputs, and the params
 * with the host copy of the ALiBi slopes. Described in place (the problem points into
 * it), so it is never copied. */
typedef struct reference_inputs {
    fa_tensor q, k, v, dout;
    fa_params params;
    fa_ref_problem problem;
} reference_inputs;

static void describe_reference(const options *o, const problem *p, reference_inputs *ri)
{
    ri->q = fa_tensor_bshd(p->host.q, o->dtype, o->batch, o->seqlen_q, o->heads, o->head_dim);
    ri->k = fa_tensor_bshd(p->host.k, o->dtype, o->batch, o->seqlen_k, o->kv_heads, o->head_dim);
    ri->v = fa_tensor_bshd(p->host.v, o->dtype, o->batch, o->seqlen_k, o->kv_heads, o->head_dim);
    ri->dout = fa_tensor_bshd(p->host.dout, o->dtype, o->batch, o->seqlen_q, o->heads, o->head_dim);
    ri->params = p->params;
    ri->params.alibi_slopes = p->host.slopes;
    /* The pages spell the contiguous host k and v, of exactly s_k keys. */
    ri->params.block_table = NULL;
    ri->params.block_table_batch_stride = 0;
    ri->params.block_table_width = ri->params.page_block_size = 0;
    ri->params.seqused_k = NULL;
    fa_ref_describe(&ri->problem, &ri->q, &ri->k, &ri->v, &ri->params);
}

/* One (batch, head) of the reference with the scratch its rows need. */
typedef struct reference_head {
    fa_ref_head head;
    double *prob, *slope, *out_row; /* s_k, s_k, head_dim */
    double *dout_rows;              /* s_q x head_dim; NULL unless asked for */
} reference_head;

static void free_reference_head(reference_head *rh)
{
    fa_ref_head_free(&rh->head);
    free(rh->prob);
    free(rh->slope);
    free(rh->out_row);
    free(rh->dout_rows);
}

/* 0 when out of memory (everything already freed). */
static int load_reference_head(const options *o, const reference_inputs *ri, int batch, int head,
                               int with_dout, reference_head *rh)
{
    int ok = fa_ref_head_load(&rh->head, &ri->problem, batch, head, FA_REF_EXACT);
    rh->prob = (double *)malloc((size_t)o->seqlen_k * sizeof(double));
    rh->slope = (double *)malloc((size_t)o->seqlen_k * sizeof(double));
    rh->out_row = (double *)malloc((size_t)o->head_dim * sizeof(double));
    rh->dout_rows = ok && with_dout ? fa_ref_head_query_rows(&rh->head, &ri->dout) : NULL;
    if (ok && rh->prob && rh->slope && rh->out_row && (!with_dout || rh->dout_rows))
        return 1;
    free_reference_head(rh);
    return 0;
}

/* Probabilities, output row (rh->out_row) and LSE of query row `row`. */
static double reference_row(reference_head *rh, long long row)
{
    double lse = fa_ref_row_probabilities(&rh->head, row, rh->prob, rh->slope);
    fa_ref_row_output(&rh->head, row, rh->prob, rh->out_row);
    return lse;
}

static size_t q_index(const options *o, int b, long long row, int head)
{
    return (((size_t)b * o->seqlen_q + (size_t)row) * o->heads + head) * o->head_dim;
}

static size_t kv_index(const options *o, int b, long long row, int kv_head)
{
    return (((size_t)b * o->seqlen_k + (size_t)row) * o->kv_heads + kv_head) * o->head_dim;
}

/* Spread samples over the batch, the heads and the rows: first and last rows included. */
static void pick_samples(const options *o, sample *samples)
{
    uint64_t state = 99;
    int i;
    for (i = 0; i < CHECK_SAMPLES; ++i) {
        samples[i].batch = (int)(splitmix64(&state) % (uint64_t)o->batch);
        samples[i].head = (int)(splitmix64(&state) % (uint64_t)o->heads);
        samples[i].row = (long long)(splitmix64(&state) % (uint64_t)o->seqlen_q);
    }
    samples[0].row = 0;
    samples[1].row = o->seqlen_q - 1;
    samples[1].batch = o->batch - 1;
    samples[1].head = o->heads - 1;
}

/* Error a correct kernel stays within: the output's own rounding plus the rounding of
 * the probabilities before P.V on 16-bit GPU kernels. */
static double check_tolerance(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 2e-4 : dtype == FA_DTYPE_F16 ? 4e-3 : 3e-2;
}

/* Keeps the worst error seen; a NaN, once seen, stays. */
static void track_worst(double *worst, double err)
{
    if (isnan(err) || err > *worst)
        *worst = err;
}

static double lse_error(double ref, float got)
{
    if (ref == -INFINITY)
        return got == -INFINITY ? 0.0 : INFINITY;
    return fabs(ref - (double)got);
}

static size_t lse_index(const options *o, const sample *s)
{
    return ((size_t)s->batch * o->heads + s->head) * o->seqlen_q + (size_t)s->row;
}

/* Brings one sample's output row and LSE back from where the library wrote them. */
static int fetch_sample(const options *o, problem *p, const sample *s)
{
    size_t elem = dtype_bytes(o->dtype);
    return fetch_back(p->on_device, p->host.out, p->run.out,
                      q_index(o, s->batch, s->row, s->head) * elem, (size_t)o->head_dim * elem) &&
           fetch_back(p->on_device, p->host.lse, p->run.lse, lse_index(o, s) * sizeof(float),
                      sizeof(float));
}

/* 0 when the check could not run (out of memory, a failed copy back). */
static int check_samples(const options *o, problem *p, results *r)
{
    reference_inputs ri;
    sample samples[CHECK_SAMPLES];
    int i, c, ok = 1;
    describe_reference(o, p, &ri);
    pick_samples(o, samples);
    for (i = 0; ok && i < CHECK_SAMPLES; ++i) {
        const sample *s = &samples[i];
        size_t oi = q_index(o, s->batch, s->row, s->head);
        reference_head rh;
        double lse;
        if (!load_reference_head(o, &ri, s->batch, s->head, 0, &rh))
            return 0;
        lse = reference_row(&rh, s->row);
        ok = fetch_sample(o, p, s);
        for (c = 0; ok && c < o->head_dim; ++c)
            track_worst(&r->max_err, fabs(load_element(p->host.out, o->dtype, oi + c) - rh.out_row[c]));
        if (ok)
            track_worst(&r->max_lse_err, lse_error(lse, p->host.lse[lse_index(o, s)]));
        free_reference_head(&rh);
    }
    if (!ok)
        return 0;
    r->checked = 1;
    r->tolerance = check_tolerance(o->dtype);
    r->check_passed = r->max_err <= r->tolerance && r->max_lse_err <= r->tolerance;
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* --check --backward: fp64 reference gradients of sampled rows                          */
/* ------------------------------------------------------------------------------------ */

#define CHECK_KEY_ROWS 4
/* fp64 work allowed for the dK/dV reference (group * s_q * s_k * d multiply-adds). */
#define CHECK_KV_WORK 4e9

/* Gradient errors are judged against the gradients' own scale: a correct fp32-accumulating
 * kernel stays within tol * max(1, max |reference|). */
static double grad_tolerance(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 1e-3 : dtype == FA_DTYPE_F16 ? 1e-2 : 5e-2;
}

typedef struct grad_check {
    double max_err, max_ref;
} grad_check;

static void compare_row(const options *o, const void *got, size_t index, const double *ref,
                        grad_check *g)
{
    int c;
    for (c = 0; c < o->head_dim; ++c) {
        track_worst(&g->max_err, fabs(load_element(got, o->dtype, index + c) - ref[c]));
        if (fabs(ref[c]) > g->max_ref)
            g->max_ref = fabs(ref[c]);
    }
}

/* ref[head_dim] = dQ of query row `row` (dk, dv: s_k x head_dim scratch the row's key
 * terms land in). */
static void reference_dq(const options *o, reference_head *rh, long long row, double *ref,
                         double *dk, double *dv)
{
    memset(dk, 0, (size_t)o->seqlen_k * o->head_dim * sizeof(double));
    memset(dv, 0, (size_t)o->seqlen_k * o->head_dim * sizeof(double));
    reference_row(rh, row);
    fa_ref_row_backward(&rh->head, row, rh->prob, rh->slope, rh->dout_rows + row * o->head_dim,
                        rh->out_row, ref, dk, dv, o->head_dim);
}

/* dQ of the CHECK_SAMPLES sampled query rows. 0 when the check could not run. */
static int check_dq_rows(const options *o, problem *p, grad_check *g)
{
    const size_t elem = dtype_bytes(o->dtype), kv_values = (size_t)o->seqlen_k * o->head_dim;
    double *ref = (double *)malloc((size_t)o->head_dim * sizeof(double));
    double *dk = (double *)malloc(kv_values * sizeof(double));
    double *dv = (double *)malloc(kv_values * sizeof(double));
    reference_inputs ri;
    sample samples[CHECK_SAMPLES];
    int i, ok = ref && dk && dv;
    describe_reference(o, p, &ri);
    pick_samples(o, samples);
    for (i = 0; ok && i < CHECK_SAMPLES; ++i) {
        size_t qi = q_index(o, samples[i].batch, samples[i].row, samples[i].head);
        reference_head rh;
        ok = load_reference_head(o, &ri, samples[i].batch, samples[i].head, 1, &rh);
        if (!ok)
            break;
        reference_dq(o, &rh, samples[i].row, ref, dk, dv);
        free_reference_head(&rh);
        ok = fetch_back(p->on_device, p->host.dq, p->run.dq, qi * elem, (size_t)o->head_dim * elem);
        if (ok)
            compare_row(o, p->host.dq, qi, ref, g);
    }
    free(ref);
    free(dk);
    free(dv);
    return ok;
}

/* Adds every query row of one query head to the reference dK/dV (unscaled) of `keys`. */
static void add_head_key_terms(const options *o, reference_head *rh, const long long *keys,
                               double *ref_dk, double *ref_dv)
{
    long long row;
    int k;
    for (row = 0; row < o->seqlen_q; ++row) {
        const double *dout_row = rh->dout_rows + row * o->head_dim;
        double delta;
        if (reference_row(rh, row) == -INFINITY)
            continue;
        delta = fa_ref_row_delta(&rh->head, dout_row, rh->out_row);
        for (k = 0; k < CHECK_KEY_ROWS; ++k) {
            double prob = rh->prob[keys[k]], ds;
            if (prob == 0.0) /* unseen (or no weight): adds nothing */
                continue;
            ds = fa_ref_score_gradient(&rh->head, keys[k], prob, rh->slope[keys[k]], dout_row, delta);
            fa_ref_add_key_terms(&rh->head, row, prob, ds, dout_row, ref_dk + k * o->head_dim,
                                 ref_dv + k * o->head_dim);
        }
    }
}

/* dK and dV of CHECK_KEY_ROWS key rows of the last batch and kv head: sums over every
 * query row of the kv head's group. */
static int check_dkdv_rows(const options *o, problem *p, grad_check *g)
{
    const int group = o->heads / o->kv_heads, kv_head = o->kv_heads - 1, batch = o->batch - 1;
    const size_t elem = dtype_bytes(o->dtype), key_values = (size_t)CHECK_KEY_ROWS * o->head_dim;
    double *ref_dk = (double *)calloc(key_values, sizeof(double));
    double *ref_dv = (double *)calloc(key_values, sizeof(double));
    long long keys[CHECK_KEY_ROWS] = {0, o->seqlen_k - 1, o->seqlen_k / 3, (2 * o->seqlen_k) / 3};
    reference_inputs ri;
    double scale = 1.0;
    size_t n;
    int h, k, ok = ref_dk && ref_dv;
    describe_reference(o, p, &ri);
    for (h = 0; ok && h < group; ++h) {
        reference_head rh;
        ok = load_reference_head(o, &ri, batch, kv_head * group + h, 1, &rh);
        if (!ok)
            break;
        scale = rh.head.scale;
        add_head_key_terms(o, &rh, keys, ref_dk, ref_dv);
        free_reference_head(&rh);
    }
    for (n = 0; ok && n < key_values; ++n)
        ref_dk[n] *= scale;
    for (k = 0; ok && k < CHECK_KEY_ROWS; ++k) {
        size_t ki = kv_index(o, batch, keys[k], kv_head);
        ok = fetch_back(p->on_device, p->host.dk, p->run.dk, ki * elem, (size_t)o->head_dim * elem) &&
             fetch_back(p->on_device, p->host.dv, p->run.dv, ki * elem, (size_t)o->head_dim * elem);
        if (ok) {
            compare_row(o, p->host.dk, ki, ref_dk + k * o->head_dim, g);
            compare_row(o, p->host.dv, ki, ref_dv + k * o->head_dim, g);
        }
    }
    free(ref_dk);
    free(ref_dv);
    return ok;
}

/* The forward's output and LSE (which the references recompute, and D reads) are not
 * needed on the host; dQ rows always, dK/dV rows when the fp64 work stays bounded. */
static int check_gradients(const options *o, problem *p, results *r)
{
    grad_check g = {0.0, 0.0};
    double work = (double)(o->heads / o->kv_heads) * o->seqlen_q * (double)o->seqlen_k * o->head_dim;
    if (!check_dq_rows(o, p, &g))
        return 0;
    r->key_rows_checked = work <= CHECK_KV_WORK ? CHECK_KEY_ROWS : 0;
    if (r->key_rows_checked && !check_dkdv_rows(o, p, &g))
        return 0;
    if (!r->key_rows_checked)
        fprintf(stderr, "flashattn_bench: dk/dv rows not checked: the fp64 reference would "
                        "take %.3g multiply-adds (limit %.3g)\n", work, CHECK_KV_WORK);
    r->checked = 1;
    r->max_err = g.max_err;
    r->grad_scale = g.max_ref > 1.0 ? g.max_ref : 1.0;
    r->tolerance = grad_tolerance(o->dtype) * r->grad_scale;
    r->check_passed = r->max_err <= r->tolerance;
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* --sgemm                                                                              */
/* ------------------------------------------------------------------------------------ */

#ifdef FA_BENCH_HAVE_CBLAS
/* Median of three N x N x N SGEMMs after a warm-up, on the bench's thread count. */
int bench_time_sgemm(const options *o, results *r)
{
    size_t n = (size_t)o->sgemm_n;
    float *a = (float *)malloc(n * n * sizeof(float));
    float *b = (float *)malloc(n * n * sizeof(float));
    float *c = (float *)malloc(n * n * sizeof(float));
    double times[3];
    int i, threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        fprintf(stderr, "flashattn_bench: out of memory for --sgemm-n %d\n", o->sgemm_n);
        return EXIT_USAGE;
    }
    bench_fill_normal(a, FA_DTYPE_F32, n * n, 4);
    bench_fill_normal(b, FA_DTYPE_F32, n * n, 5);
    openblas_set_num_threads(threads);
    for (i = -1; i < 3; ++i) {
        double start = bench_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o->sgemm_n, o->sgemm_n,
                    o->sgemm_n, 1.0f, a, o->sgemm_n, b, o->sgemm_n, 0.0f, c, o->sgemm_n);
        if (i >= 0)
            times[i] = bench_seconds() - start;
    }
    r->sgemm_n = o->sgemm_n;
    r->sgemm_gflops = 2.0 * (double)n * (double)n * (double)n / bench_median(times, 3) * 1e-9;
    free(a);
    free(b);
    free(c);
    return 0;
}
#else
int bench_time_sgemm(const options *o, results *r)
{
    (void)o;
    (void)r;
    fprintf(stderr, "flashattn_bench: --sgemm needs OpenBLAS, and this build has none\n");
    return EXIT_USAGE;
}
#endif

int bench_have_sgemm(void)
{
#ifdef FA_BENCH_HAVE_CBLAS
    return 1;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------------------ */
/* Reports                                                                              */
/* ------------------------------------------------------------------------------------ */

static double gflops(const results *r)
{
    return r->flops / r->median_s * 1e-9;
}

static double kv_read_gbps(const options *o, const results *r)
{
    return bench_kv_read_bytes(o) / r->median_s * 1e-9;
}

static const char *page_order_name(const options *o)
{
    return o->page_shuffled ? "shuffled" : "identity";
}

static void print_text(const options *o, const results *r)
{
    const fa_plan *pl = &r->plan;
    printf("backend      %s (%s, arch %s)\n", fa_backend_name(r->info.backend),
           r->info.device_name, r->info.arch);
    printf("problem      b=%d s_q=%d s_k=%d h=%d h_k=%d d=%d %s%s", o->batch, o->seqlen_q,
           o->seqlen_k, o->heads, o->kv_heads, o->head_dim, fa_dtype_name(o->dtype),
           o->causal ? " causal" : "");
    if (o->window_left >= 0 || o->window_right >= 0)
        printf(" window=%d,%d", o->window_left, o->window_right);
    if (o->softcap > 0.0f)
        printf(" softcap=%g", (double)o->softcap);
    printf("%s%s", o->alibi ? " alibi" : "", o->backward ? ", backward" : "");
    if (o->page > 0)
        printf(", paged K/V: P=%d, %zu pages, %s order", o->page, page_count(o), page_order_name(o));
    printf("\n");
    printf("plan         %s: tile %dx%d, %d stage(s), %d thread(s), splits %d, d_inst %d\n",
           pl->kernel, pl->tile_m, pl->tile_n, pl->stages, pl->threads, pl->num_splits,
           pl->head_dim_instance);
    printf("reason       %s\n", pl->reason);
    printf("time         %.3f ms median, %.3f ms min over %d iteration(s)\n", 1e3 * r->median_s,
           1e3 * r->min_s, o->iters);
    printf("throughput   %.2f GFLOP/s (%.3g FLOP per call)\n", gflops(r), r->flops);
    if (!o->backward)
        printf("kv read      %.2f GB/s (%.3g bytes of K and V per call)\n", kv_read_gbps(o, r),
               bench_kv_read_bytes(o));
    if (r->info.backend == FA_BACKEND_CPU)
        printf("extra memory %.2f MiB peak RSS growth (workspace %zu bytes)\n",
               (double)r->extra_bytes / 1048576.0, pl->workspace_bytes);
    else
        printf("extra memory %zu bytes of workspace\n", pl->workspace_bytes);
    if (r->checked && o->backward)
        printf("check        %s: max |err| dq/dk/dv %.3g (tolerance %.3g = %.3g x gradient "
               "scale %.3g; %d dq rows, %d dk and dv rows)\n",
               r->check_passed ? "PASS" : "FAIL", r->max_err, r->tolerance,
               grad_tolerance(o->dtype), r->grad_scale, CHECK_SAMPLES, r->key_rows_checked);
    else if (r->checked)
        printf("check        %s: max |err| out %.3g, lse %.3g (tolerance %.3g, %d rows)\n",
               r->check_passed ? "PASS" : "FAIL", r->max_err, r->max_lse_err, r->tolerance,
               CHECK_SAMPLES);
    if (r->sgemm_n > 0)
        printf("sgemm        n=%d: %.2f GFLOP/s; attention/sgemm = %.3f\n", r->sgemm_n,
               r->sgemm_gflops, gflops(r) / r->sgemm_gflops);
}

void bench_json_string(FILE *to, const char *key, const char *value)
{
    const char *c;
    fprintf(to, "\"%s\":\"", key);
    for (c = value; *c; ++c) {
        if (*c == '"' || *c == '\\')
            fprintf(to, "\\%c", *c);
        else if ((unsigned char)*c < 0x20)
            fprintf(to, "\\u%04x", (unsigned)*c);
        else
            fputc(*c, to);
    }
    fputc('"', to);
}

static void print_json(const options *o, const results *r)
{
    const fa_plan *pl = &r->plan;
    printf("{");
    bench_json_string(stdout, "backend", fa_backend_name(r->info.backend));
    printf(",");
    bench_json_string(stdout, "device", r->info.device_name);
    printf(",");
    bench_json_string(stdout, "arch", r->info.arch);
    printf(",\"batch\":%d,\"seqlen_q\":%d,\"seqlen_k\":%d,\"heads\":%d,\"kv_heads\":%d,"
           "\"head_dim\":%d,\"dtype\":\"%s\",\"causal\":%d,\"window_left\":%d,"
           "\"window_right\":%d,\"softcap\":%g,\"alibi\":%d,\"pass\":\"%s\",",
           o->batch, o->seqlen_q, o->seqlen_k, o->heads, o->kv_heads, o->head_dim,
           fa_dtype_name(o->dtype), o->causal, o->window_left, o->window_right,
           (double)o->softcap, o->alibi, o->backward ? "backward" : "forward");
    if (o->page > 0)
        printf("\"page_block_size\":%d,\"pages\":%zu,\"page_order\":\"%s\",", o->page,
               page_count(o), page_order_name(o));
    printf("\"plan\":{");
    bench_json_string(stdout, "kernel", pl->kernel);
    printf(",\"tile_m\":%d,\"tile_n\":%d,\"stages\":%d,\"threads\":%d,\"num_splits\":%d,"
           "\"head_dim_instance\":%d,\"workspace_bytes\":%zu,",
           pl->tile_m, pl->tile_n, pl->stages, pl->threads, pl->num_splits,
           pl->head_dim_instance, pl->workspace_bytes);
    bench_json_string(stdout, "reason", pl->reason);
    printf("},\"iters\":%d,\"time_ms_median\":%.6f,\"time_ms_min\":%.6f,\"flops\":%.6g,"
           "\"gflops\":%.4f,\"peak_extra_bytes\":%lld",
           o->iters, 1e3 * r->median_s, 1e3 * r->min_s, r->flops, gflops(r),
           r->info.backend == FA_BACKEND_CPU ? r->extra_bytes : (long long)pl->workspace_bytes);
    if (!o->backward)
        printf(",\"kv_read_bytes\":%.6g,\"kv_read_gbps\":%.4f", bench_kv_read_bytes(o), kv_read_gbps(o, r));
    if (r->checked && o->backward)
        printf(",\"check\":{\"passed\":%s,\"max_abs_err\":%.6g,\"gradient_scale\":%.6g,"
               "\"tolerance\":%g,\"dq_rows\":%d,\"dkdv_rows\":%d}",
               r->check_passed ? "true" : "false", r->max_err, r->grad_scale, r->tolerance,
               CHECK_SAMPLES, r->key_rows_checked);
    else if (r->checked)
        printf(",\"check\":{\"passed\":%s,\"max_abs_err\":%.6g,\"max_lse_err\":%.6g,"
               "\"tolerance\":%g,\"rows\":%d}",
               r->check_passed ? "true" : "false", r->max_err, r->max_lse_err, r->tolerance,
               CHECK_SAMPLES);
    if (r->sgemm_n > 0)
        printf(",\"sgemm\":{\"n\":%d,\"gflops\":%.4f,\"ratio\":%.6f}", r->sgemm_n,
               r->sgemm_gflops, gflops(r) / r->sgemm_gflops);
    printf("}\n");
}

/* ------------------------------------------------------------------------------------ */
/* main                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* Backends whose memory this CLI can allocate: the host always, CUDA when built with
 * a GPU runtime (FA_BENCH_CUDA or FA_BENCH_HIP: bench_gpu.h). */
static int backend_wired(fa_backend backend)
{
#ifdef FA_BENCH_GPU
    if (backend == FA_BENCH_BACKEND)
        return 1;
#endif
    return backend == FA_BACKEND_CPU;
}

/* The options that only mean something on the CPU. */
static int options_fit_backend(const options *o, fa_backend backend)
{
    if (o->sgemm && backend != FA_BACKEND_CPU) {
        fprintf(stderr, "flashattn_bench: --sgemm compares with the CPU's SGEMM; the %s "
                        "backend runs here (use --backend cpu)\n", fa_backend_name(backend));
        return 0;
    }
    return 1;
}

int bench_open_context(const options *o, fa_context **ctx)
{
    fa_backend backend;
    fa_status st = fa_create(ctx, o->backend, BENCH_DEVICE);
    if (st != FA_OK) {
        fprintf(stderr, "flashattn_bench: fa_create(%s): %s: %s\n", fa_backend_name(o->backend),
                fa_status_string(st), fa_create_error());
        return EXIT_USAGE;
    }
    backend = fa_context_backend(*ctx);
    if (!backend_wired(backend)) {
        fprintf(stderr, "flashattn_bench: the %s backend is not wired into this CLI\n",
                fa_backend_name(backend));
        return EXIT_USAGE;
    }
    if (!options_fit_backend(o, backend))
        return EXIT_USAGE;
    st = fa_set_num_threads(*ctx, o->threads);
    return st == FA_OK ? 0 : library_error(*ctx, "fa_set_num_threads", st);
}

int bench_run(const options *o, fa_context *ctx, results *r)
{
    problem p;
    int rc = 0;
    last_error[0] = '\0';
    if (!make_problem(o, fa_context_backend(ctx) != FA_BACKEND_CPU, &p))
        rc = EXIT_USAGE;
    if (rc == 0)
        rc = run_attention(ctx, o, &p, r);
    if (rc == 0 && o->check && !(o->backward ? check_gradients(o, &p, r) : check_samples(o, &p, r)))
        rc = EXIT_USAGE;
    free_problem(&p);
    if (rc == 0 && o->sgemm)
        rc = bench_time_sgemm(o, r);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    results r;
    fa_context *ctx = NULL;
    int rc;
    if (!parse_args(argc, argv, &o))
        return EXIT_USAGE;
    if (o.sweep)
        return bench_sweep(&o);
    rc = bench_open_context(&o, &ctx);
    memset(&r, 0, sizeof r);
    if (rc == 0)
        rc = fa_get_device_info(ctx, &r.info) == FA_OK ? 0 : EXIT_USAGE;
    if (rc == 0 && !o.dtype_given)
        o.dtype = r.info.backend == FA_BACKEND_CPU ? FA_DTYPE_F32 : FA_DTYPE_BF16;
    if (rc == 0)
        rc = bench_run(&o, ctx, &r);
    fa_destroy(ctx);
    if (rc != 0)
        return rc;
    if (o.json)
        print_json(&o, &r);
    else
        print_text(&o, &r);
    return r.checked && !r.check_passed ? EXIT_CHECK_FAILED : 0;
}
