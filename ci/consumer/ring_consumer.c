/*
 * ring_consumer.c - the smallest real use of an installed flashattn_ring: a causal fp32
 * ring forward over MPI_COMM_WORLD (one process: the ring is that process alone),
 * checked against fa_fwd over the same rows. Exit 0 on success.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

#include <flashattn.h>
#include <flashattn_ring.h>

#define S 9
#define H 2
#define D 16

int main(int argc, char **argv)
{
    static float q[S * H * D], k[S * H * D], v[S * H * D], out[S * H * D], ref[S * H * D];
    MPI_Comm world = MPI_COMM_WORLD;
    fa_ring_layout layout = {S, FA_RING_SPLIT_ZIGZAG};
    fa_context *ctx;
    fa_ring_comm *ring;
    fa_params params;
    fa_tensor tq, tk, tv, tout, tref;
    fa_status st;
    int i, bad = 0;
    MPI_Init(&argc, &argv);
    for (i = 0; i < S * H * D; ++i) {
        q[i] = (float)sin(0.1 * i);
        k[i] = (float)cos(0.07 * i);
        v[i] = (float)sin(0.03 * i + 1.0);
    }
    if (fa_create(&ctx, FA_BACKEND_CPU, 0) != FA_OK || fa_ring_create_mpi(&ring, ctx, &world) != FA_OK) {
        fprintf(stderr, "create: %s %s\n", fa_create_error(), fa_ring_create_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tq = fa_tensor_bshd(q, FA_DTYPE_F32, 1, S, H, D);
    tk = fa_tensor_bshd(k, FA_DTYPE_F32, 1, S, H, D);
    tv = fa_tensor_bshd(v, FA_DTYPE_F32, 1, S, H, D);
    tout = fa_tensor_bshd(out, FA_DTYPE_F32, 1, S, H, D);
    tref = fa_tensor_bshd(ref, FA_DTYPE_F32, 1, S, H, D);
    fa_params_init(&params);
    params.causal = 1;
    st = fa_ring_fwd(ring, &tq, &tk, &tv, &params, &layout, &tout, NULL);
    if (st != FA_OK)
        fprintf(stderr, "fa_ring_fwd: %s: %s\n", fa_status_string(st), fa_ring_last_error(ring));
    if (st == FA_OK && fa_fwd(ctx, &tq, &tk, &tv, &params, &tref, NULL, NULL, 0) != FA_OK)
        st = FA_ERR_UNSUPPORTED;
    for (i = 0; i < S * H * D && st == FA_OK; ++i)
        bad |= !(fabsf(out[i] - ref[i]) <= 1e-5f);
    fa_ring_destroy(ring);
    fa_destroy(ctx);
    MPI_Finalize();
    if (st == FA_OK && !bad)
        printf("flashattn_ring consumer: ring forward matches fa_fwd\n");
    return st == FA_OK && !bad ? 0 : 1;
}
