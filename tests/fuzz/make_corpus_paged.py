#!/usr/bin/env python3
"""make_corpus_paged.py - writes the seed corpus of fuzz_paged (tests/fuzz/corpus_paged/)
in the input format documented at the top of fuzz_paged.c: valid paged forwards (fixed
length, varlen, seqused_k, shared pages, large pages, ALiBi, softcap, every dtype) and kvcache calls
(contiguous, paged, appending, rotary both ways, cache_batch_idx), then each broken by one
targeted mutation (page sizes, widths, strides, page ids, cache lengths, cache rows,
rotary fields, s_new mismatches, reserved fields, out / lse shapes, short workspaces).

    python3 tests/fuzz/make_corpus_paged.py [OUT_DIR]   (default: corpus_paged/ next to it)

Existing files named seed_* in OUT_DIR are replaced; nothing else is touched.
"""
import os
import sys

from corpus_io import enc_int_in, write_seeds

# The same table, in the same order, as k_int_special in fuzz_paged.c.
INT_SPECIAL = [
    0, 1, -1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 48, 63, 64, 65, 255, 256, 257, 1008, 1023,
    1024, 1025, 1040, 4096, 65536, 2147483646, 2147483647, 2147483648, -2147483648,
    4294967296, 1 << 40, 1 << 61, 1 << 62, ((1 << 63) - 1) // 8, ((1 << 63) - 1) // 4,
    ((1 << 63) - 1) // 2, (1 << 63) - 1, -(1 << 63), -2, -16, -1024,
]

KVCACHE, F16, BF16, LSE, CAUSAL, WINDOW, THREADS, WORKSPACE = 1, 2, 4, 8, 16, 32, 64, 128
# feat bits, paged fa_fwd
VARLEN, SEQUSED, FEW, ALIBI, SOFTCAP = 1, 2, 4, 8, 16
# feat bits, kvcache
PAGED, APPEND, ROTARY, INTERLEAVED, BATCH_IDX, KV_FEW, KV_ALIBI, KV_SOFTCAP = (
    1, 2, 4, 8, 16, 32, 64, 128)


def enc_int(v):
    return enc_int_in(v, INT_SPECIAL)


def paged_fwd(mode=LSE, feat=0, b=2, s_q=8, h_k=2, group=2, d=2, page=0, width=2, extra=1,
              seed=1, window=None, pages=5, lens=None, used=None):
    """A paged fa_fwd: dims as the bytes of the format (d byte 2: 48, page byte 0: 16)."""
    out = bytes([mode | (WINDOW if window is not None else 0), feat, b - 1, s_q, h_k - 1,
                 group - 1, d])
    out += bytes([page]) if page < 0xF8 else bytes([0xF8, page - 0xF8])
    out += bytes([width - 1, extra, seed])
    if window is not None:
        out += bytes([window + 1])
    out += bytes([pages])
    if feat & VARLEN:
        for lq, lk in lens:
            out += bytes([lq, lk])
    if feat & SEQUSED:
        out += bytes(used)
    return out


def kvcache(mode=LSE, feat=APPEND, b=2, s_q=1, h_k=2, group=2, d=3, page=0, width=2, extra=0,
            seed=1, window=None, s_max=40, b_extra=1, pages=5, s_new=1, lens=(7, 20),
            rot_dim=1, rot_extra=0):
    out = bytes([KVCACHE | mode | (WINDOW if window is not None else 0), feat, b - 1, s_q,
                 h_k - 1, group - 1, d, page, width - 1, extra, seed])
    if window is not None:
        out += bytes([window + 1])
    if feat & PAGED:
        out += bytes([pages])
    else:
        out += bytes([s_max - 1])
        if feat & BATCH_IDX:
            out += bytes([b_extra])
    if feat & APPEND:
        out += bytes([s_new])
    out += bytes(lens[:b])
    if feat & ROTARY:
        out += bytes([rot_dim, rot_extra])
    return out


def mut(op, *operands):
    """A mutation: op, then each operand (int: an INT, bytes: raw)."""
    out = bytes([op])
    for x in operands:
        out += x if isinstance(x, bytes) else enc_int(x)
    return out


def idx(i):
    return bytes([i])


def seeds():
    s = {}
    # valid paged forwards
    s["fwd_fixed"] = paged_fwd()
    s["fwd_fixed_f16_causal"] = paged_fwd(mode=LSE | F16 | CAUSAL)
    s["fwd_fixed_bf16_window"] = paged_fwd(mode=LSE | BF16, window=5, page=1)
    s["fwd_shared_pages"] = paged_fwd(feat=FEW, b=4, pages=0)
    s["fwd_seqused_partial"] = paged_fwd(feat=SEQUSED, used=[17, 40])
    s["fwd_varlen"] = paged_fwd(feat=VARLEN, b=3, lens=[(5, 33), (0, 7), (9, 64)])
    s["fwd_varlen_seqused"] = paged_fwd(mode=LSE | CAUSAL | THREADS, feat=VARLEN | SEQUSED, b=2,
                                        lens=[(16, 50), (3, 9)], used=[31, 4])
    s["fwd_large_page"] = paged_fwd(page=0xF8 + 63, width=1, b=1, s_q=4)
    s["fwd_workspace"] = paged_fwd(mode=LSE | WORKSPACE | THREADS)
    s["fwd_alibi_softcap_seqused"] = paged_fwd(mode=LSE | CAUSAL, feat=ALIBI | SOFTCAP | SEQUSED,
                                               b=3, page=2, used=[20, 47, 0])
    base = paged_fwd()
    # broken paging fields and tables
    s["fwd_page_17"] = base + mut(0, 17)
    s["fwd_page_1040"] = base + mut(0, 1040)
    s["fwd_page_0"] = base + mut(0, 0)
    s["fwd_width_0"] = base + mut(1, 0)
    s["fwd_width_neg"] = base + mut(1, -1)
    s["fwd_stride_lt_width"] = base + mut(2, 1)
    s["fwd_stride_huge"] = base + mut(2, (1 << 62))
    s["fwd_table_null"] = base + mut(4)
    s["fwd_page_id_past_pool"] = base + mut(3, idx(1), 6)
    s["fwd_page_id_negative"] = base + mut(28, idx(0))
    s["fwd_every_id_num_pages"] = base + mut(11)
    s["fwd_pool_rows"] = base + mut(8, idx(1), 32)
    s["fwd_v_pool_pages"] = base + mut(9, idx(0), 4)
    s["fwd_reserved"] = base + mut(10, idx(3), 1)
    s["fwd_seqused_past_keys"] = paged_fwd(feat=SEQUSED, used=[17, 40]) + mut(5, idx(1), 33)
    s["fwd_varlen_max_k_past_row"] = (paged_fwd(feat=VARLEN, b=3, lens=[(5, 33), (0, 7), (9, 64)])
                                      + mut(6, 65))
    s["fwd_varlen_cu_k_decreasing"] = (paged_fwd(feat=VARLEN, b=3, lens=[(5, 33), (0, 7), (9, 64)])
                                       + mut(7, idx(2), 1))
    s["fwd_workspace_short"] = paged_fwd(mode=LSE | WORKSPACE) + mut(26)
    s["fwd_splits"] = base + mut(29, idx(3))
    s["fwd_out_shape"] = base + mut(31, idx(1), 7)
    s["fwd_lse_shape"] = base + mut(32, idx(2), 9)
    # valid kvcache calls
    s["kv_contiguous_append"] = kvcache()
    s["kv_contiguous_no_append"] = kvcache(feat=0)
    s["kv_contiguous_batch_idx"] = kvcache(feat=APPEND | BATCH_IDX, b=3, lens=(3, 0, 30))
    s["kv_paged_append"] = kvcache(feat=PAGED | APPEND, s_new=5, lens=(10, 27))
    s["kv_paged_shared"] = kvcache(feat=PAGED | KV_FEW, pages=0, lens=(30, 31))
    s["kv_rotary_neox"] = kvcache(feat=APPEND | ROTARY, s_q=3, s_new=3, d=3, rot_dim=2)
    s["kv_rotary_gptj_paged"] = kvcache(mode=LSE | BF16 | CAUSAL,
                                        feat=PAGED | APPEND | ROTARY | INTERLEAVED, s_q=4,
                                        s_new=4, rot_dim=0, rot_extra=2)
    s["kv_paged_alibi_softcap"] = kvcache(feat=PAGED | APPEND | KV_ALIBI | KV_SOFTCAP, s_q=2,
                                          s_new=2, lens=(12, 29))
    s["kv_f16_window_workspace"] = kvcache(mode=LSE | F16 | WORKSPACE, window=3, s_q=2, s_new=2)
    base = kvcache()
    # broken kvcache calls
    s["kv_cache_seqlens_past_capacity"] = base + mut(13, idx(0), 40)
    s["kv_cache_seqlens_negative"] = base + mut(13, idx(1), -1)
    s["kv_batch_idx_past_rows"] = kvcache(feat=APPEND | BATCH_IDX) + mut(14, idx(0), 3)
    s["kv_batch_idx_negative"] = kvcache(feat=APPEND | BATCH_IDX) + mut(14, idx(1), -1)
    s["kv_batch_idx_with_table"] = kvcache(feat=PAGED | APPEND) + mut(22)
    s["kv_rotary_dim_8"] = kvcache(feat=APPEND | ROTARY) + mut(15, 8)
    s["kv_rotary_dim_past_d"] = kvcache(feat=APPEND | ROTARY) + mut(15, 80)
    s["kv_rotary_seqlen_short"] = kvcache(feat=APPEND | ROTARY) + mut(16, 39)
    s["kv_rotary_interleaved_2"] = kvcache(feat=APPEND | ROTARY) + mut(17, 2)
    s["kv_rotary_sin_null"] = kvcache(feat=APPEND | ROTARY) + mut(18)
    s["kv_rotary_fields_no_tables"] = kvcache(feat=APPEND | ROTARY) + mut(18) + mut(27)
    s["kv_rotary_before_position_0"] = (kvcache(feat=APPEND | ROTARY, s_q=3, s_new=1)
                                        + mut(13, idx(0), 1))
    s["kv_s_new_mismatch"] = base + mut(19, 2)
    s["kv_v_new_mismatch"] = base + mut(20, 0)
    s["kv_s_new_past_capacity"] = base + mut(19, 41) + mut(20, 41)
    s["kv_k_new_null"] = base + mut(21)
    s["kv_reserved"] = base + mut(23, idx(5), 7)
    s["kv_seqused"] = base + mut(24)
    s["kv_cache_batch_mismatch"] = base + mut(25, idx(3))
    s["kv_paged_page_id_past_pool"] = kvcache(feat=PAGED | APPEND, lens=(10, 27)) + mut(3, idx(3), 9)
    s["kv_paged_page_size_48"] = kvcache(feat=PAGED | APPEND, lens=(10, 27)) + mut(0, 48)
    s["kv_workspace_short"] = kvcache(mode=LSE | WORKSPACE) + mut(26)
    s["kv_cache_seqlens_null"] = base + mut(30)
    s["kv_out_heads"] = base + mut(31, idx(2), 2)
    return s


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus_paged")
    write_seeds(out_dir, seeds())


if __name__ == "__main__":
    main()
