/*
 * bench.h - what the one-shape benchmark (flashattn_bench.c) offers the sweep
 * (bench_sweep.c): the command line's options, one shape's results, and the calls that
 * open a context and measure a shape.
 */
#ifndef FA_BENCH_H
#define FA_BENCH_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "flashattn.h"

typedef struct options {
    fa_backend backend;
    int batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim;
    int dtype_given;
    fa_dtype dtype;
    int causal, window_left, window_right;
    float softcap;
    int alibi;
    int iters, threads;
    int check, sgemm, sgemm_n, json;
    int backward;
    int decode, seqlen_q_given;
    int page;          /* keys per page of the paged K/V cache; 0: contiguous k and v */
    int page_shuffled; /* the block table lists the pages in a shuffled order         */
    const char *sweep;    /* --sweep: a preset's shapes instead of one (bench_sweep.c)  */
    const char *json_out; /* --sweep: the JSON report's path (NULL: none)                */
    const char *csv_out;  /* --sweep: the CSV report's path (NULL: none)                 */
    int list;             /* --sweep --list: print the preset's shapes as JSON, run none */
} options;

typedef struct results {
    fa_device_info info;
    fa_plan plan;
    double median_s, min_s, flops;
    long long extra_bytes;
    int checked, check_passed;
    double max_err, max_lse_err, tolerance;
    double grad_scale;    /* --backward: max |reference gradient|, at least 1 */
    int key_rows_checked; /* --backward: dk/dv rows compared (0: too costly)  */
    int sgemm_n;
    double sgemm_gflops;
} results;

/* flashattn_bench.c */
void bench_default_options(options *o);
int bench_open_context(const options *o, fa_context **ctx);
/* Measures the shape o describes: 0, or the exit status of the failure (reported on
 * stderr, and its text kept for bench_last_error). */
int bench_run(const options *o, fa_context *ctx, results *r);
const char *bench_last_error(void);
double bench_kv_read_bytes(const options *o);
/* Normal values (a drawn pool of 2^20, repeated) in dtype; the monotonic clock in
 * seconds; the median of count values (sorts them). */
void bench_fill_normal(void *buf, fa_dtype dtype, size_t count, uint64_t seed);
double bench_seconds(void);
double bench_median(double *values, int count);
/* FlashAttention's FLOP count of the shape (2.5x the forward's for the backward). */
double bench_flops(const options *o);
/* OpenBLAS SGEMM of o->sgemm_n (r->sgemm_gflops); EXIT_USAGE in a build without it. */
int bench_time_sgemm(const options *o, results *r);
int bench_have_sgemm(void);
void bench_json_string(FILE *to, const char *key, const char *value);

/* bench_sweep.c: runs a preset (o->sweep) with o's other options as the base; exit status. */
int bench_sweep(const options *o);

#endif /* FA_BENCH_H */
