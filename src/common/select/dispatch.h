/*
 * dispatch.h - kernel configurations and the pure selection function (arch row,
 * problem) -> config over a registry (select/registry.h). Used for fa_fwd, fa_plan_fwd
 * and fa_bwd alike, so "is this supported" and "what would run" can never disagree.
 */
#ifndef FA_DISPATCH_H
#define FA_DISPATCH_H

#include "flashattn.h"
#include "select/arch_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fa_pass { FA_PASS_FWD = 0, FA_PASS_BWD } fa_pass;

/* One kernel configuration: a row of an instance list (src/common/select/fwd_instances.txt, bwd_instances.txt)
 * for one dtype and wave size, as the generated registry holds it. */
typedef struct fa_kernel_config {
    const char *name;        /* "fa_cuda_fwd_d128_bf16_128x64x2": also the kernel symbol  */
                             /* (a backward's two kernels add _dkdv and _dq)              */
    fa_backend backend;      /* FA_BACKEND_CPU / CUDA / HIP                             */
    fa_vendor vendor;        /* rows it may run on                                      */
    fa_pass pass;
    fa_dtype dtype;
    int head_dim;            /* instance head dim; problems with d <= head_dim use it   */
    int tile_m, tile_n;      /* forward: query rows x keys; backward: streamed x        */
                             /* resident rows (bwd_instances.txt)                       */
    int threads;             /* per block                                               */
    int stages;              /* pipeline depth (buffers of streamed tiles)              */
    int smem_bytes;          /* shared memory per block                                 */
    int regs_per_thread;     /* from the compiler's report; 0: unknown                  */
    int min_wave_size;       /* wave size the instance was written for (0: any)         */
    int compiled;            /* 1: built into this library; 0: planned, never selected  */
    int atomic_dq;           /* backward: the dK/dV kernel adds dQ with atomics (unless */
                             /* the call is deterministic); 0: dQ has its own pass      */
    int pack_gqa;            /* forward: the decode family (dec_instances.txt): a tile  */
                             /* packs a GQA group's heads and query positions; reads    */
                             /* paged K/V                                               */
    int warpgroup;           /* the warpgroup family (ws_instances.txt, forward, and    */
                             /* bws_instances.txt, backward: wgmma, TMA, warp            */
                             /* specialisation; sm_90a)                                 */
    int ordered_dq;          /* backward: deterministic calls keep this kernel, which   */
                             /* then adds each query tile's dQ in key-block order       */
                             /* (bws_instances.txt); 0: they take the dQ pass           */
    /* The compiled GPU kernels' launch handles (each defined in its generated           */
    /* translation unit): the forward kernel, or the backward's dK/dV and dQ kernels     */
    /* (the warpgroup backward has no dQ kernel: its atomics sum dQ); NULL for the CPU   */
    /* and for vendors not built.                                                        */
    const void *const *kernels[2];
} fa_kernel_config;

/* What the selection needs to know about a problem. */
typedef struct fa_problem_shape {
    fa_pass pass;
    fa_dtype dtype;
    int batch;
    int heads;
    int heads_k;
    int head_dim;
    long long seqlen_q;        /* max over the batch when varlen */
    long long seqlen_k;
    int has_mask;              /* causal or window */
    int num_splits_request;    /* params.num_splits */
    int paged;                 /* K/V through a block table */
    int page_size;             /* keys per page when paged */
    int tma_ok;                /* q, k, v (and the backward's dout) can be read through */
                               /* TMA tensor maps: 16-byte aligned data, strides       */
                               /* multiples of 16 bytes                                */
    int deterministic;         /* backward: dQ without atomics (params.deterministic)   */
    int pack_gqa;              /* derived by fa_select_config: the family it chose */
    int warpgroup;             /* derived by fa_select_config: the family it chose */
} fa_problem_shape;

/* A forced tile from FLASHATTN_FORCE_TILE (tile_m == 0: none). */
typedef struct fa_tile_override {
    int tile_m, tile_n, stages; /* stages 0: any */
} fa_tile_override;

typedef struct fa_selection {
    const fa_kernel_config *config;
    int blocks_per_sm;
    int num_splits;
    int persistent_blocks;   /* warpgroup family, FA_WS_PERSISTENT instances: the grid  */
                             /* (SMs x blocks per SM) whose blocks walk the work tiles; */
                             /* 0 for every other config (their own grids)              */
    int walk_draws;          /* 1: those blocks draw their tiles from a counter the     */
                             /* call zeroes in its workspace (walk_draws in dispatch.c) */
    char reason[256];
} fa_selection;

/* The selection: picks among registry[0..count) the compiled configs of the row's vendor,
 * pass and dtype with head_dim >= shape->head_dim that fit the row's limits, and ranks
 * them. FA_OK with *out filled; FA_ERR_UNSUPPORTED (no config fits: reason says which
 * limit) or FA_ERR_BAD_TILE_OVERRIDE (override names no fitting config), with
 * out->reason explaining. Pure: no globals, no environment, no device calls. */
fa_status fa_select_config(const fa_arch_row *row, const fa_kernel_config *registry, int count,
                           const fa_problem_shape *shape, const fa_tile_override *force,
                           fa_selection *out);

/* Parses FLASHATTN_FORCE_TILE's syntax ("128x64" or "128x64:2"); NULL/"" gives no
 * override. FA_ERR_BAD_TILE_OVERRIDE on malformed text. */
fa_status fa_parse_tile_override(const char *text, fa_tile_override *out);

#ifdef __cplusplus
}
#endif

#endif /* FA_DISPATCH_H */
