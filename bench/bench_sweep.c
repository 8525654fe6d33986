/*
 * bench_sweep.c - flashattn_bench --sweep PRESET: the shapes of a named preset measured one
 * after another on the context's backend, with the device's identity and its ceilings
 * (copy bandwidth; matrix rate through OpenBLAS on the CPU, cuBLAS on CUDA when the
 * library can be opened; on HIP a table peak, labelled as such: hipBLAS is not wired) measured in the same run, written as JSON (the schema in
 * bench/sweep_schema.json, which bench/sweep_torch.py writes too and bench/report.py
 * reads) and CSV. Progress goes to stderr: a live bar on a terminal, a line per shape
 * otherwise. The presets are the table `presets` below; everything else reads it.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench_gpu.h"
#ifdef FA_BENCH_CUDA
#include <dlfcn.h>
#endif

#include "bench.h"

#define SCHEMA "flashattn-sweep/1"
#define MAX_SHAPES 256

typedef struct shape {
    const char *workload; /* "training" or "decode" */
    int backward, batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal, page;
} shape;

/* ----------------------------------------------------------------------------------- */
/* Presets                                                                              */
/* ----------------------------------------------------------------------------------- */

/* The training grid of ANCHORS.md, as FlashAttention's benchmarks run it: b * s = tokens,
 * h * d = width, every head dim, length and mask, forward and backward. */
static int training_grid(shape *out, int tokens, int width, const int *dims, int n_dims,
                         const int *lens, int n_lens)
{
    int n = 0, di, li, causal, backward;
    for (backward = 0; backward <= 1; ++backward)
        for (di = 0; di < n_dims; ++di)
            for (causal = 0; causal <= 1; ++causal)
                for (li = 0; li < n_lens; ++li) {
                    shape s = {"training", backward, tokens / lens[li], lens[li], lens[li],
                               width / dims[di], width / dims[di], dims[di], causal, 0};
                    out[n++] = s;
                }
    return n;
}

/* Decode rows (one query per sequence, GQA), contiguous or through pages of each size. */
static int decode_rows(shape *out, const int (*rows)[2], int n_rows, int heads, int kv_heads,
                       int head_dim, const int *pages, int n_pages)
{
    int n = 0, r, p;
    for (p = 0; p < n_pages; ++p)
        for (r = 0; r < n_rows; ++r) {
            shape s = {"decode", 0, rows[r][0], 1, rows[r][1], heads, kv_heads, head_dim, 0,
                       pages[p]};
            out[n++] = s;
        }
    return n;
}

static const int anchor_dims[] = {64, 128, 256};
static const int anchor_lens[] = {512, 1024, 2048, 4096, 8192, 16384};
static const int anchor_decode[][2] = {{1, 8192}, {1, 131072}, {16, 8192},
                                       {16, 32768}, {64, 4096}, {64, 16384}};
static const int contiguous[] = {0};
static const int anchor_pages[] = {16, 256};

static int preset_training(shape *out)
{
    return training_grid(out, 16384, 2048, anchor_dims, 3, anchor_lens, 6);
}

static int preset_decode(shape *out)
{
    return decode_rows(out, anchor_decode, 6, 32, 8, 128, contiguous, 1);
}

static int preset_paged(shape *out)
{
    return decode_rows(out, anchor_decode, 6, 32, 8, 128, anchor_pages, 2);
}

/* Small enough for CI's CPU: every workload once, odd page count included. */
static int preset_smoke(shape *out)
{
    static const int dims[] = {64};
    static const int lens[] = {128, 256};
    static const int rows[][2] = {{1, 300}, {2, 128}};
    static const int pages[] = {0, 16};
    int n = training_grid(out, 512, 256, dims, 1, lens, 2);
    return n + decode_rows(out + n, rows, 2, 8, 2, 64, pages, 2);
}

static const struct preset {
    const char *name, *what;
    int (*build)(shape *out);
} presets[] = {
    {"smoke", "a few small shapes of every workload (CI, any backend)", preset_smoke},
    {"training", "ANCHORS.md's grid: d 64/128/256, s 512-16k, b*s 16k, h*d 2048, "
                 "causal and not, forward and backward", preset_training},
    {"decode", "ANCHORS.md's decode rows: s_q 1, h 32/8, d 128, contiguous K/V", preset_decode},
    {"paged", "the decode rows through paged K/V, pages of 16 and 256 keys", preset_paged},
};

static const struct preset *find_preset(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof presets / sizeof presets[0]; ++i)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

/* ----------------------------------------------------------------------------------- */
/* The device record and the ceilings                                                   */
/* ----------------------------------------------------------------------------------- */

typedef struct ceiling {
    double value; /* < 0: not measured */
    char source[160];
} ceiling;

typedef struct device_record {
    fa_device_info info;
    char runtime[64], driver[64], host[256], processor[128];
    int clock_mhz, memory_clock_mhz, memory_bus_bits;
    ceiling copy_gbps, matrix_tflops;
} device_record;

static void host_identity(device_record *d)
{
    struct utsname u;
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    char line[256];
    if (uname(&u) == 0)
        snprintf(d->host, sizeof d->host, "%s %s %s, %ld cores online", u.sysname, u.release,
                 u.machine, sysconf(_SC_NPROCESSORS_ONLN));
    while (cpuinfo && fgets(line, sizeof line, cpuinfo))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(d->processor, sizeof d->processor, "%s", strchr(line, ':') + 2);
            d->processor[strcspn(d->processor, "\n")] = '\0';
            break;
        }
    if (cpuinfo)
        fclose(cpuinfo);
}

/* memcpy between two host buffers, one thread: 2 x bytes (read and write) / best time. */
static void cpu_copy_ceiling(ceiling *c)
{
    const size_t bytes = (size_t)256 << 20;
    char *a = (char *)malloc(bytes), *b = (char *)malloc(bytes);
    double best = 1e30;
    int i;
    if (a && b) {
        memset(a, 1, bytes);
        memset(b, 2, bytes);
        for (i = 0; i < 4; ++i) {
            double start = bench_seconds(), t;
            memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
            t = bench_seconds() - start;
            if (i > 0 && t < best)
                best = t;
        }
        c->value = 2.0 * (double)bytes / best * 1e-9;
        snprintf(c->source, sizeof c->source, "measured: memcpy of 256 MiB, one thread, read + write");
    }
    free(a);
    free(b);
}

static void cpu_matrix_ceiling(const options *base, ceiling *c)
{
    options o = *base;
    results r;
    memset(&r, 0, sizeof r);
    o.sgemm_n = 2048;
    if (!bench_have_sgemm()) {
        snprintf(c->source, sizeof c->source, "not measured: this build has no OpenBLAS");
        return;
    }
    if (bench_time_sgemm(&o, &r) == 0) {
        c->value = r.sgemm_gflops * 1e-3;
        snprintf(c->source, sizeof c->source, "measured: OpenBLAS SGEMM 2048^3, f32, %s threads",
                 o.threads > 0 ? "the bench's" : "all");
    }
}

#ifdef FA_BENCH_GPU
/* cudaMemcpy (hipMemcpy) device to device, 1 GiB: 2 x bytes (read and write) / best of 5. */
static void gpu_copy_ceiling(ceiling *c)
{
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    cudaEvent_t start, stop;
    float ms, best = 1e30f;
    int i;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
        snprintf(c->source, sizeof c->source, "not measured: no 2 GiB free on the device");
        cudaFree(a);
        return;
    }
    cudaMemset(a, 1, bytes);
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (i = 0; i < 6; ++i) {
        cudaEventRecord(start, 0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(stop, 0);
        cudaEventSynchronize(stop);
        cudaEventElapsedTime(&ms, start, stop);
        if (i > 0 && ms < best)
            best = ms;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(a);
    cudaFree(b);
    c->value = 2.0 * (double)bytes / (1e-3 * (double)best) * 1e-9;
    snprintf(c->source, sizeof c->source, "measured: %s memcpy device to device, 1 GiB, read + write",
             FA_BENCH_RUNTIME);
}

#ifdef FA_BENCH_CUDA
/* cuBLAS is not linked: it is opened when present, so the CLI runs without it. The
 * signatures are cuBLAS's v2 API (cublas_api.h); the enums are their documented values:
 * CUBLAS_OP_N 0, CUDA_R_16BF 14, CUBLAS_COMPUTE_32F 68, CUBLAS_GEMM_DEFAULT -1. */
typedef int (*cublas_create_fn)(void **handle);
typedef int (*cublas_destroy_fn)(void *handle);
typedef int (*cublas_gemm_ex_fn)(void *handle, int transa, int transb, int m, int n, int k,
                                 const void *alpha, const void *a, int a_type, int lda,
                                 const void *b, int b_type, int ldb, const void *beta, void *c,
                                 int c_type, int ldc, int compute_type, int algo);

static void *open_cublas(char *name, size_t name_size)
{
    static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; ++i) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(name, name_size, "%s", names[i]);
            return lib;
        }
    }
    return NULL;
}

/* Normal bf16 values on the device: a constant matrix toggles fewer bits and reads a
 * higher rate than a real product does (the GPU clocks up). */
static int random_bf16(void *device, size_t count, uint64_t seed)
{
    uint16_t *host = (uint16_t *)malloc(count * sizeof(uint16_t));
    int ok = host != NULL;
    if (ok) {
        bench_fill_normal(host, FA_DTYPE_BF16, count, seed);
        ok = cudaMemcpy(device, host, count * sizeof(uint16_t), cudaMemcpyHostToDevice) == cudaSuccess;
    }
    free(host);
    return ok;
}

/* bf16 GEMM 8192^3 through cuBLAS (fp32 accumulation), median of 5 after a warm-up. */
static void gpu_matrix_ceiling(const device_record *d, ceiling *c)
{
    const int n = 8192;
    const float one = 1.0f, zero = 0.0f;
    char name[32];
    void *lib = open_cublas(name, sizeof name), *handle = NULL, *a = NULL, *b = NULL, *m = NULL;
    cublas_create_fn create;
    cublas_destroy_fn destroy;
    cublas_gemm_ex_fn gemm;
    cudaEvent_t start, stop;
    float ms;
    double times[5];
    int i, ok = 1;
    (void)d; /* measured here, not derived from the device */
    if (!lib) {
        snprintf(c->source, sizeof c->source, "not measured: no libcublas.so to open");
        return;
    }
    create = (cublas_create_fn)dlsym(lib, "cublasCreate_v2");
    destroy = (cublas_destroy_fn)dlsym(lib, "cublasDestroy_v2");
    gemm = (cublas_gemm_ex_fn)dlsym(lib, "cublasGemmEx");
    if (!create || !destroy || !gemm || create(&handle) != 0 ||
        cudaMalloc(&a, (size_t)n * n * 2) != cudaSuccess ||
        cudaMalloc(&b, (size_t)n * n * 2) != cudaSuccess ||
        cudaMalloc(&m, (size_t)n * n * 2) != cudaSuccess) {
        snprintf(c->source, sizeof c->source, "not measured: %s did not start", name);
        ok = 0;
    }
    if (ok)
        ok = random_bf16(a, (size_t)n * n, 1) && random_bf16(b, (size_t)n * n, 2);
    if (ok) {
        cudaEventCreate(&start);
        cudaEventCreate(&stop);
        for (i = -1; ok && i < 5; ++i) {
            cudaEventRecord(start, 0);
            ok = gemm(handle, 0, 0, n, n, n, &one, a, 14, n, b, 14, n, &zero, m, 14, n, 68, -1) == 0;
            cudaEventRecord(stop, 0);
            cudaEventSynchronize(stop);
            cudaEventElapsedTime(&ms, start, stop);
            if (i >= 0)
                times[i] = ms;
        }
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        if (ok) {
            c->value = 2.0 * n * (double)n * n / (1e-3 * bench_median(times, 5)) * 1e-12;
            snprintf(c->source, sizeof c->source, "measured: cublasGemmEx bf16 8192^3, fp32 accumulation (%s)",
                     name);
        } else {
            snprintf(c->source, sizeof c->source, "not measured: cublasGemmEx failed (%s)", name);
        }
    }
    if (handle)
        destroy(handle);
    cudaFree(a);
    cudaFree(b);
    cudaFree(m);
    dlclose(lib);
}

#else
/* Dense bf16 matrix FLOP per clock per compute unit: where no BLAS measures the rate (HIP:
 * hipBLAS is not wired into the CLI), the ceiling is this table's peak at the device's
 * clock, and says so. Sources: docs/amd.md, "Hardware rows" ([ROCM-MI300], [ROCM-MI250]). */
static const struct {
    const char *arch;
    int flops_per_cu_clock;
    const char *source;
} matrix_peaks[] = {
    {"gfx942", 2048, "docs/amd.md [ROCM-MI300]"},
    {"gfx90a", 1024, "docs/amd.md [ROCM-MI250]"},
};

static void gpu_matrix_ceiling(const device_record *d, ceiling *c)
{
    size_t i;
    for (i = 0; i < sizeof matrix_peaks / sizeof matrix_peaks[0]; ++i)
        if (strcmp(d->info.arch, matrix_peaks[i].arch) == 0 && d->clock_mhz > 0) {
            c->value = (double)matrix_peaks[i].flops_per_cu_clock * d->info.sm_count * d->clock_mhz * 1e-6;
            snprintf(c->source, sizeof c->source,
                     "table peak, not measured: %d FLOP/CU/clock bf16 (%s) x %d CUs x %d MHz",
                     matrix_peaks[i].flops_per_cu_clock, matrix_peaks[i].source, d->info.sm_count,
                     d->clock_mhz);
            return;
        }
    snprintf(c->source, sizeof c->source, "not measured: hipBLAS is not wired, and %s has no table peak",
             d->info.arch);
}
#endif

/* Versions as the runtime encodes them: CUDA 1000 major + 10 minor, HIP 10^7 major +
 * 10^5 minor + patch. */
static void format_version(char *out, size_t size, const char *what, int v)
{
#ifdef FA_BENCH_CUDA
    snprintf(out, size, "%s %s %d.%d", FA_BENCH_RUNTIME, what, v / 1000, (v % 1000) / 10);
#else
    snprintf(out, size, "%s %s %d.%d.%d", FA_BENCH_RUNTIME, what, v / 10000000, (v / 100000) % 100, v % 100000);
#endif
}

static void gpu_identity(device_record *d)
{
    int v = 0;
    cudaRuntimeGetVersion(&v);
    format_version(d->runtime, sizeof d->runtime, "runtime", v);
    cudaDriverGetVersion(&v);
    format_version(d->driver, sizeof d->driver, "driver", v);
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0) == cudaSuccess)
        d->clock_mhz = v / 1000;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, 0) == cudaSuccess)
        d->memory_clock_mhz = v / 1000;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, 0) == cudaSuccess)
        d->memory_bus_bits = v;
}
#endif

static void measure_device(const options *base, fa_context *ctx, device_record *d)
{
    memset(d, 0, sizeof *d);
    d->copy_gbps.value = d->matrix_tflops.value = -1.0;
    fa_get_device_info(ctx, &d->info);
    host_identity(d);
    snprintf(d->runtime, sizeof d->runtime, "none (host)");
    snprintf(d->driver, sizeof d->driver, "none (host)");
#ifdef FA_BENCH_GPU
    if (d->info.backend == FA_BENCH_BACKEND) {
        gpu_identity(d);
        gpu_copy_ceiling(&d->copy_gbps);
        gpu_matrix_ceiling(d, &d->matrix_tflops);
        return;
    }
#endif
    cpu_copy_ceiling(&d->copy_gbps);
    cpu_matrix_ceiling(base, &d->matrix_tflops);
}

/* ----------------------------------------------------------------------------------- */
/* Running the shapes                                                                   */
/* ----------------------------------------------------------------------------------- */

typedef struct row {
    shape s;
    results r;
    int ok;
    char error[512];
} row;

static void options_for(const options *base, const shape *s, options *o)
{
    *o = *base;
    o->sweep = NULL;
    o->backward = s->backward;
    o->batch = s->batch;
    o->seqlen_q = s->seqlen_q;
    o->seqlen_k = s->seqlen_k;
    o->heads = s->heads;
    o->kv_heads = s->kv_heads;
    o->head_dim = s->head_dim;
    o->causal = s->causal;
    o->page = s->page;
    o->decode = s->seqlen_q == 1;
    o->check = o->sgemm = o->json = 0;
}

static void describe(char *out, size_t size, const shape *s)
{
    if (strcmp(s->workload, "decode") == 0)
        snprintf(out, size, "decode b%d x %d keys h%d/%d d%d%s", s->batch, s->seqlen_k, s->heads,
                 s->kv_heads, s->head_dim, s->page ? (s->page == 16 ? " P16" : " paged") : "");
    else
        snprintf(out, size, "%s d%d s%d%s", s->backward ? "bwd" : "fwd", s->head_dim, s->seqlen_k,
                 s->causal ? " causal" : "");
}

/* A bar redrawn in place on a terminal; a line per shape when stderr is a file or pipe. */
static void progress(int done, int total, const row *last, double elapsed)
{
    char what[96];
    describe(what, sizeof what, &last->s);
    if (isatty(STDERR_FILENO)) {
        int filled = 30 * done / total, i;
        fputs("\r[", stderr);
        for (i = 0; i < 30; ++i)
            fputc(i < filled ? '#' : '.', stderr);
        fprintf(stderr, "] %d/%d %-40s %6.0f s", done, total, what, elapsed);
        if (done == total)
            fputc('\n', stderr);
    } else if (last->ok) {
        fprintf(stderr, "sweep %d/%d: %s: %.4f ms, %.2f TFLOP/s\n", done, total, what,
                1e3 * last->r.median_s, last->r.flops / last->r.median_s * 1e-12);
    } else {
        fprintf(stderr, "sweep %d/%d: %s: failed: %s\n", done, total, what, last->error);
    }
    fflush(stderr);
}

/* ----------------------------------------------------------------------------------- */
/* Reports: JSON (bench/sweep_schema.json) and CSV                                     */
/* ----------------------------------------------------------------------------------- */

static void json_ceiling(FILE *f, const char *key, const ceiling *c)
{
    fprintf(f, "\"%s\":{", key);
    if (c->value >= 0.0)
        fprintf(f, "\"value\":%.6g,", c->value);
    else
        fprintf(f, "\"value\":null,");
    bench_json_string(f, "source", c->source[0] ? c->source : "not measured");
    fputc('}', f);
}

static void json_device(FILE *f, const device_record *d)
{
    fputs("\"device\":{", f);
    bench_json_string(f, "backend", fa_backend_name(d->info.backend));
    fputc(',', f);
    bench_json_string(f, "name", d->info.device_name);
    fputc(',', f);
    bench_json_string(f, "arch", d->info.arch);
    fprintf(f, ",\"arch_row_from_table\":%s,\"compute_units\":%d,\"wave_size\":%d,"
               "\"smem_per_block\":%d,",
            d->info.row_from_table ? "true" : "false", d->info.sm_count, d->info.wave_size,
            d->info.smem_per_block);
    bench_json_string(f, "matrix_unit", d->info.matrix_unit);
    fputc(',', f);
    bench_json_string(f, "runtime", d->runtime);
    fputc(',', f);
    bench_json_string(f, "driver", d->driver);
    fprintf(f, ",\"clock_mhz\":%d,\"memory_clock_mhz\":%d,\"memory_bus_bits\":%d,",
            d->clock_mhz, d->memory_clock_mhz, d->memory_bus_bits);
    bench_json_string(f, "host", d->host);
    fputc(',', f);
    bench_json_string(f, "processor", d->processor);
    fputs("},\"ceilings\":{", f);
    json_ceiling(f, "copy_gbps", &d->copy_gbps);
    fputc(',', f);
    json_ceiling(f, "matrix_tflops", &d->matrix_tflops);
    fputc('}', f);
}

static void json_shape(FILE *f, const shape *s, const char *dtype)
{
    fprintf(f, "\"workload\":\"%s\",\"pass\":\"%s\",\"batch\":%d,\"seqlen_q\":%d,\"seqlen_k\":%d,"
               "\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"causal\":%s,\"page_block_size\":%d,"
               "\"dtype\":\"%s\"",
            s->workload, s->backward ? "backward" : "forward", s->batch, s->seqlen_q, s->seqlen_k,
            s->heads, s->kv_heads, s->head_dim, s->causal ? "true" : "false", s->page, dtype);
}

static void json_row(FILE *f, const row *w, const options *o)
{
    options shaped;
    options_for(o, &w->s, &shaped);
    fputs("{\"provider\":\"flashattn\",", f);
    json_shape(f, &w->s, fa_dtype_name(o->dtype));
    if (!w->ok) {
        fputc(',', f);
        bench_json_string(f, "status", w->error);
        fputs(",\"flops\":null,\"bytes\":null,\"time_ms\":null,\"tflops\":null,\"tbps\":null}", f);
        return;
    }
    fprintf(f, ",\"status\":\"ok\",\"flops\":%.17g,\"bytes\":%.17g,\"time_ms\":%.6f,\"tflops\":%.6f,"
               "\"tbps\":%.6f,",
            w->r.flops, bench_kv_read_bytes(&shaped), 1e3 * w->r.median_s,
            w->r.flops / w->r.median_s * 1e-12, bench_kv_read_bytes(&shaped) / w->r.median_s * 1e-12);
    bench_json_string(f, "kernel", w->r.plan.kernel);
    fputc('}', f);
}

static void utc_now(char *out, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int write_json(const char *path, const struct preset *p, const device_record *d,
                      const row *rows, int n, const options *o)
{
    FILE *f = fopen(path, "w");
    char when[32];
    int i;
    if (!f) {
        fprintf(stderr, "flashattn_bench: cannot write %s\n", path);
        return 0;
    }
    utc_now(when, sizeof when);
    fprintf(f, "{\"schema\":\"%s\",\"tool\":\"flashattn_bench %s\",\"preset\":\"%s\",", SCHEMA,
            FA_BENCH_VERSION, p->name);
    bench_json_string(f, "preset_description", p->what);
    fprintf(f, ",\"created_utc\":\"%s\",\"iters\":%d,\n", when, o->iters);
    json_device(f, d);
    fputs(",\n\"rows\":[\n", f);
    for (i = 0; i < n; ++i) {
        json_row(f, &rows[i], o);
        fputs(i + 1 < n ? ",\n" : "\n", f);
    }
    fputs("]}\n", f);
    return fclose(f) == 0;
}

static int write_csv(const char *path, const device_record *d, const row *rows, int n,
                     const options *o)
{
    FILE *f = fopen(path, "w");
    int i;
    if (!f) {
        fprintf(stderr, "flashattn_bench: cannot write %s\n", path);
        return 0;
    }
    fputs("device,backend,arch,provider,workload,pass,batch,seqlen_q,seqlen_k,heads,kv_heads,"
          "head_dim,causal,page_block_size,dtype,status,time_ms,flops,tflops,bytes,tbps,kernel\n", f);
    for (i = 0; i < n; ++i) {
        const row *w = &rows[i];
        options shaped;
        options_for(o, &w->s, &shaped);
        fprintf(f, "\"%s\",%s,%s,flashattn,%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%s,", d->info.device_name,
                fa_backend_name(d->info.backend), d->info.arch, w->s.workload,
                w->s.backward ? "backward" : "forward", w->s.batch, w->s.seqlen_q, w->s.seqlen_k,
                w->s.heads, w->s.kv_heads, w->s.head_dim, w->s.causal, w->s.page,
                fa_dtype_name(o->dtype));
        if (w->ok)
            fprintf(f, "ok,%.6f,%.6g,%.6f,%.6g,%.6f,%s\n", 1e3 * w->r.median_s, w->r.flops,
                    w->r.flops / w->r.median_s * 1e-12, bench_kv_read_bytes(&shaped),
                    bench_kv_read_bytes(&shaped) / w->r.median_s * 1e-12, w->r.plan.kernel);
        else
            fprintf(f, "failed,,,,,,\n");
    }
    return fclose(f) == 0;
}

/* The shapes with their FLOP and byte counts, so that other tools (bench/sweep_torch.py)
 * run and count exactly the same rows. dtype: the one given, else bf16 (the GPUs'). */
static void list_shapes(const struct preset *p, const shape *shapes, int n, const options *o)
{
    options base = *o;
    int i;
    if (!o->dtype_given)
        base.dtype = FA_DTYPE_BF16;
    printf("{\"schema\":\"%s\",\"preset\":\"%s\",", SCHEMA, p->name);
    bench_json_string(stdout, "preset_description", p->what);
    printf(",\"shapes\":[\n");
    for (i = 0; i < n; ++i) {
        options shaped;
        options_for(&base, &shapes[i], &shaped);
        fputc('{', stdout);
        json_shape(stdout, &shapes[i], fa_dtype_name(base.dtype));
        printf(",\"flops\":%.17g,\"bytes\":%.17g}%s\n", bench_flops(&shaped),
               bench_kv_read_bytes(&shaped), i + 1 < n ? "," : "");
    }
    printf("]}\n");
}

int bench_sweep(const options *o)
{
    const struct preset *p = find_preset(o->sweep);
    shape shapes[MAX_SHAPES];
    row *rows;
    device_record device;
    options base = *o;
    fa_context *ctx = NULL;
    double start;
    int n, i, failed = 0, rc;
    if (!p) {
        fprintf(stderr, "flashattn_bench: --sweep %s: no such preset (smoke, training, decode, paged)\n",
                o->sweep);
        return 2;
    }
    n = p->build(shapes);
    if (o->list) {
        list_shapes(p, shapes, n, o);
        return 0;
    }
    rc = bench_open_context(o, &ctx);
    if (rc != 0) {
        fa_destroy(ctx);
        return rc;
    }
    measure_device(o, ctx, &device);
    if (!o->dtype_given)
        base.dtype = device.info.backend == FA_BACKEND_CPU ? FA_DTYPE_F32 : FA_DTYPE_BF16;
    rows = (row *)calloc((size_t)n, sizeof *rows);
    start = bench_seconds();
    for (i = 0; rows && i < n; ++i) {
        options shaped;
        rows[i].s = shapes[i];
        options_for(&base, &shapes[i], &shaped);
        rows[i].ok = bench_run(&shaped, ctx, &rows[i].r) == 0;
        if (!rows[i].ok) {
            snprintf(rows[i].error, sizeof rows[i].error, "%s", bench_last_error()[0] ? bench_last_error() : "failed (see stderr)");
            ++failed;
        }
        progress(i + 1, n, &rows[i], bench_seconds() - start);
    }
    fa_destroy(ctx);
    rc = rows ? 0 : 2;
    if (rc == 0 && o->json_out && !write_json(o->json_out, p, &device, rows, n, &base))
        rc = 2;
    if (rc == 0 && o->csv_out && !write_csv(o->csv_out, &device, rows, n, &base))
        rc = 2;
    if (rc == 0)
        fprintf(stderr, "sweep %s: %d shapes, %d failed, %.0f s\n", p->name, n, failed,
                bench_seconds() - start);
    free(rows);
    return rc != 0 ? rc : failed ? 1 : 0;
}
