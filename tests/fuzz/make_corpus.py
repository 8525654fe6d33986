#!/usr/bin/env python3
"""make_corpus.py - writes the seed corpus of fuzz_api (tests/fuzz/corpus/) in the input
format documented at the top of fuzz_api.c: valid fixed-length, varlen, GQA, windowed,
softcapped, ALiBi and backward requests, empty problems, and requests broken by one or
two mutations (extreme sizes and strides, bad enums, bad scalars, invalid cu_seqlens,
NULL pointers, small or misaligned workspaces).

    python3 tests/fuzz/make_corpus.py [OUT_DIR]     (default: the corpus/ next to it)

Existing files named seed_* in OUT_DIR are replaced; nothing else is touched.
"""
import os
import struct
import sys

from corpus_io import enc_int_in, write_seeds

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)

# The same table, in the same order, as k_int_special in fuzz_api.c.
INT_SPECIAL = [
    0, 1, -1, 2, 7, 8, 9, 16, 63, 64, 65, 127, 128, 255, 256, 257, 1023, 1024, 4096,
    65535, 65536, 55108, 55109, 2097151, 2097152, 1 << 20, (1 << 20) + 1,
    2147483646, 2147483647, 2147483648, -2147483648, -2147483649,
    4294967295, 4294967296, 4294967297, 3037000499, 3037000500,
    1 << 40, 1 << 47, 1 << 48, 1 << 53, 1 << 61, 1 << 62, (1 << 62) + 1, INT64_MAX // 16,
    INT64_MAX // 8, INT64_MAX // 4, INT64_MAX // 3, INT64_MAX // 2, INT64_MAX // 2 + 1,
    INT64_MAX - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1, -2, -8, -64, -1024,
    -(1 << 62), 2147483640, 268435456, 33554432, 16777216,
]

# Indices into float_special() of fuzz_api.c.
F_NEG0, F_DENORM, F_FLT_MIN, F_1E30, F_FLT_MAX, F_INF, F_NINF, F_NAN = 1, 11, 10, 12, 14, 16, 17, 18


def enc_int(v):
    return enc_int_in(v, INT_SPECIAL)


def enc_float(v):
    c = v * 8 + 16
    if c == int(c) and 0 <= c < 128:
        return bytes([int(c)])
    return b"\xff" + struct.pack("<f", v)


def enc_float_special(i):
    return bytes([0x80 + i])


def enc_dim(v, lo, hi, step=1):
    if lo <= v <= hi and (v - lo) % step == 0:
        return bytes([(v - lo) // step])
    return b"\xf0" + enc_int(v)


T = {"q": 0, "k": 1, "v": 2, "out": 3, "lse": 4, "dout": 5, "dq": 6, "dk": 7, "dv": 8}
FWD, BWD, PLAN_FWD, PLAN_BWD, WS_FWD, WS_BWD, PROBES, TWO_THREADS = (1 << i for i in range(8))
ALL = FWD | BWD | PLAN_FWD | PLAN_BWD | WS_FWD | WS_BWD
QUERIES = PLAN_FWD | PLAN_BWD | WS_FWD | WS_BWD


class Req:
    """One input: a base request and its mutations."""

    def __init__(self, calls=ALL, dtype=0, b=2, s_q=16, s_k=24, h_k=2, group=2, d=32, seed=1):
        self.calls, self.dtype = calls, dtype
        self.b, self.s_q, self.s_k, self.h_k, self.group, self.d = b, s_q, s_k, h_k, group, d
        self.seed = seed
        self.varlen = None          # [(len_q, len_k), ...], extra max byte
        self.max_extra = 0
        self.explicit = None        # 9 pad bytes
        self.lse_fwd = True
        self.seqused = None         # bytes per sequence
        self.alibi = None           # (wild value or None, batch stride or None)
        self.workspace = None       # mode 0..7
        self.causal = False
        self.window_left = self.window_right = None
        self.softcap = self.scale = None
        self.deterministic = False
        self.num_splits = None
        self.muts = b""

    # mutations
    def tensor(self, name, field, value=None):
        op = T[name] * 10 + field
        self.muts += bytes([op]) + (enc_int(value) if value is not None else b"")
        return self

    def ndim(self, name, v):
        return self.tensor(name, 0, v)

    def shape(self, name, i, v):
        return self.tensor(name, 1 + i, v)

    def stride(self, name, i, v):
        return self.tensor(name, 5 + i, v)

    def special(self, name, sub, payload=b""):
        self.muts += bytes([T[name] * 10 + 9, sub]) + payload
        return self

    def null_data(self, name):
        return self.special(name, 0)

    def null_desc(self, name):
        return self.special(name, 1)

    def set_dtype(self, name, v):
        return self.special(name, 2, enc_int(v))

    def param(self, op, payload=b""):
        self.muts += bytes([op]) + payload
        return self

    def encode(self):
        layout = (self.dtype if isinstance(self.dtype, int) and 0 <= self.dtype <= 2 else 3)
        layout |= (self.varlen is not None) << 2
        layout |= (self.explicit is not None) << 3
        layout |= self.lse_fwd << 4
        layout |= (self.seqused is not None) << 5
        layout |= (self.alibi is not None) << 6
        layout |= (self.workspace is not None) << 7
        pflags = int(self.causal) | (self.window_left is not None) << 1
        pflags |= (self.window_right is not None) << 2 | (self.softcap is not None) << 3
        pflags |= (self.scale is not None) << 4 | int(self.deterministic) << 5
        pflags |= (self.num_splits is not None) << 6
        pflags |= (self.alibi is not None and self.alibi[1] is not None) << 7
        out = bytes([self.calls, layout, pflags])
        if layout & 3 == 3:
            out += enc_int(self.dtype[0])
        out += enc_dim(self.b, 0, 4) + enc_dim(self.s_q, 0, 64) + enc_dim(self.s_k, 0, 64)
        small_group = 4 // self.h_k if 1 <= self.h_k <= 4 else 1
        out += enc_dim(self.h_k, 1, 4) + enc_dim(self.group, 1, small_group)
        out += enc_dim(self.d, 8, 64, 8)
        out += bytes([self.seed])
        if self.window_left is not None:
            out += enc_int(self.window_left)
        if self.window_right is not None:
            out += enc_int(self.window_right)
        if self.softcap is not None:
            out += self.softcap if isinstance(self.softcap, bytes) else enc_float(self.softcap)
        if self.scale is not None:
            out += self.scale if isinstance(self.scale, bytes) else enc_float(self.scale)
        if self.num_splits is not None:
            out += enc_int(self.num_splits)
        if self.alibi is not None:
            wild, stride = self.alibi
            out += bytes([1 if wild is not None else 0])
            if wild is not None:
                out += wild if isinstance(wild, bytes) else enc_float(wild)
            if stride is not None:
                out += enc_int(stride)
        if self.varlen is not None:
            for lq, lk in self.varlen[:64]:
                out += bytes([lq, lk])
            out += bytes([self.max_extra])
        if self.seqused is not None:
            out += bytes(self.seqused)
        if self.explicit is not None:
            out += bytes(self.explicit)
        if self.workspace is not None:
            out += bytes([self.workspace])
        return out + self.muts


def varlen(r, seqs, extra=0):
    r.varlen, r.b, r.max_extra = seqs, len(seqs), extra
    return r


def seeds():
    s = {}
    # valid fixed-length requests in the three dtypes, GQA and MQA
    for dt in range(3):
        s["fwd_bwd_gqa_dt%d" % dt] = Req(dtype=dt, seed=dt)
    s["mqa_d64"] = Req(b=1, s_q=33, s_k=47, h_k=1, group=4, d=64)
    s["d8_single"] = Req(b=1, s_q=1, s_k=1, h_k=1, group=1, d=8)
    s["two_threads"] = Req(calls=ALL | TWO_THREADS, b=3, s_q=40, s_k=64)
    s["probes"] = Req(calls=ALL | PROBES)
    # masks and score transforms
    r = Req(s_q=24, s_k=16); r.causal = True; s["causal_sq_gt_sk"] = r
    r = Req(dtype=1); r.window_left, r.window_right = 5, 3; s["window_f16"] = r
    r = Req(); r.window_left = 0; r.window_right = 0; s["window_diag"] = r
    r = Req(dtype=2); r.softcap = 2.5; r.scale = 0.5; s["softcap_bf16"] = r
    r = Req(); r.alibi = (None, None); s["alibi_shared"] = r
    r = Req(b=3); r.alibi = (None, 5); r.causal = True; s["alibi_batch_stride"] = r
    r = Req(); r.num_splits = 3; r.deterministic = True; s["splits_deterministic"] = r
    # varlen
    s["varlen_gqa"] = varlen(Req(h_k=2, group=2), [(5, 9), (16, 3), (1, 30)])
    s["varlen_empty_seqs"] = varlen(Req(dtype=1), [(0, 4), (7, 0), (3, 3)], extra=5)
    r = varlen(Req(dtype=2), [(12, 20), (6, 6)]); r.causal = True; r.softcap = 10.0
    s["varlen_causal_softcap"] = r
    r = varlen(Req(), [(8, 16), (4, 12)]); r.seqused = [5, 0]; s["varlen_seqused"] = r
    r = Req(b=3, s_k=32); r.seqused = [7, 32, 0]; s["fixed_seqused"] = r
    # explicit strides
    r = Req(); r.explicit = [0x15, 0x06, 0x21, 0x33, 0x25, 0x11, 0x2a, 0x17, 0x39]
    s["strided"] = r
    r = Req(dtype=1); r.explicit = [0x85, 0x86, 0x81, 0x93, 0x05, 0xa1, 0x8a, 0x97, 0xb9]
    s["heads_major"] = r
    r = varlen(Req(), [(9, 4), (2, 13)]); r.explicit = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    s["varlen_strided"] = r
    # caller workspaces
    for mode in range(8):
        r = Req(b=1, s_q=8, s_k=8); r.workspace = mode; s["workspace_mode%d" % mode] = r
    # empty problems (valid once empty problems are; refused before)
    s["empty_b0"] = Req(b=0)
    s["empty_sq0"] = Req(s_q=0)
    s["empty_sk0"] = Req(s_k=0)
    s["empty_b0_null_data"] = Req(b=0).null_data("q").null_data("k").null_data("v").null_data(
        "out").null_data("lse")
    s["varlen_total0"] = varlen(Req(), [(0, 0), (0, 0)])
    s["varlen_totalk0"] = varlen(Req(), [(3, 0), (2, 0)])
    s["varlen_batch0"] = varlen(Req(), [])
    # extreme sizes: constructors, strides, offsets
    s["ctor_int32_max"] = Req(calls=QUERIES, b=1, s_q=2147483647, s_k=2147483647, h_k=1, group=1)
    s["ctor_stride_overflow"] = Req(calls=QUERIES, b=2, s_q=2147483647, s_k=1, h_k=2147483647,
                                    group=1, d=8)
    s["ctor_huge"] = Req(calls=QUERIES, b=1 << 40, s_q=1 << 40, s_k=3, h_k=1, group=1)
    s["stride_offset_overflow"] = Req().stride("k", 1, INT64_MAX // 2)
    s["stride_near_limit"] = Req(b=1).stride("q", 0, INT64_MAX // 4 - 7)
    s["zero_strides_huge"] = (Req(calls=QUERIES | FWD, b=1, s_q=4, s_k=4, h_k=1, group=1, d=8)
                              .shape("q", 1, 2147483647).stride("q", 1, 0))
    s["broadcast_kv"] = Req().special("k", 7).special("v", 7)
    s["negative_stride"] = Req().stride("v", 1, -64)
    s["bad_head_stride"] = Req().stride("out", 3, 2)
    s["batch_2_31"] = (Req(calls=QUERIES, b=1, s_q=1, s_k=1, h_k=1, group=1, d=8)
                       .shape("q", 0, 2147483647).stride("q", 0, 0)
                       .shape("k", 0, 2147483647).stride("k", 0, 0)
                       .shape("v", 0, 2147483647).stride("v", 0, 0))
    # ALiBi offsets
    r = Req(calls=QUERIES | FWD); r.alibi = (None, INT64_MAX); s["alibi_stride_overflow"] = r
    r = Req(calls=QUERIES | FWD); r.alibi = (None, 1 << 40); s["alibi_stride_large"] = r
    r = Req(calls=ALL); r.alibi = (bytes([0x80 + F_NAN]), None); s["alibi_nan_slopes"] = r
    # enums, ranks, dtypes
    s["dtype_invalid"] = Req(dtype=(7,))
    s["dtype_negative"] = Req(dtype=(-1,))
    s["lse_f16"] = Req().set_dtype("lse", 1)
    s["k_dtype_differs"] = Req().set_dtype("k", 2)
    s["ndim5"] = Req().ndim("q", 5)
    s["ndim_negative"] = Req().ndim("dq", -1)
    s["head_dim_12"] = Req().shape("q", 3, 12).shape("k", 3, 12).shape("v", 3, 12).shape(
        "out", 3, 12)
    s["head_dim_264"] = Req(calls=QUERIES, d=8).shape("q", 3, 264).shape("k", 3, 264).shape(
        "v", 3, 264)
    s["gqa_3_2"] = Req(h_k=2, group=1).shape("q", 2, 3).shape("out", 2, 3)
    # scalars
    r = Req(); r.scale = enc_float_special(F_NAN); s["scale_nan"] = r
    r = Req(); r.scale = -1.0; s["scale_negative"] = r
    r = Req(); r.softcap = enc_float_special(F_INF); s["softcap_inf"] = r
    r = Req(); r.softcap = enc_float_special(F_DENORM); s["softcap_denormal"] = r
    r = Req(); r.softcap = enc_float_special(F_FLT_MAX); s["softcap_flt_max"] = r
    r = Req(); r.scale = enc_float_special(F_1E30); s["scale_1e30"] = r
    r = Req(); r.window_left = -2; s["window_minus2"] = r
    r = Req(); r.num_splits = -1; s["splits_negative"] = r
    r = Req(); r.window_left = 2147483647; r.window_right = 2147483647; s["window_int_max"] = r
    s["reserved_set"] = Req().param(108, bytes([3]) + enc_int(1))
    s["block_table"] = Req().param(105)
    s["page_block_size"] = Req().param(107, enc_int(16))
    # varlen contents
    s["cu_q_not_zero"] = varlen(Req(), [(4, 4), (4, 4)]).param(109, bytes([0]) + enc_int(1))
    s["cu_k_decreasing"] = varlen(Req(), [(4, 4), (4, 4)]).param(110, bytes([1]) + enc_int(9))
    s["cu_q_end_wrong"] = varlen(Req(), [(4, 4), (4, 4)]).param(109, bytes([2]) + enc_int(7))
    s["cu_only_q"] = varlen(Req(), [(4, 4)]).param(98)
    s["varlen_batch_int_max"] = varlen(Req(calls=QUERIES), [(4, 4)]).param(99, enc_int(2147483647))
    s["varlen_batch_negative"] = varlen(Req(), [(4, 4)]).param(99, enc_int(-1))
    s["max_seqlen_small"] = varlen(Req(), [(4, 9), (5, 4)]).param(101, enc_int(8))
    r = Req(b=2, s_k=16); r.seqused = [3, 4]
    s["seqused_too_long"] = r.param(111, bytes([1]) + enc_int(17))
    # NULL pointers
    s["params_null"] = Req().param(113)
    s["ctx_null"] = Req().param(114)
    s["plan_null"] = Req().param(115)
    s["bytes_null"] = Req().param(116)
    s["q_desc_null"] = Req().null_desc("q")
    s["out_data_null"] = Req().null_data("out")
    s["lse_desc_null_bwd"] = Req(calls=BWD).null_desc("lse")
    s["dv_data_null"] = Req(calls=BWD).null_data("dv")
    # tile overrides (FLASHATTN_FORCE_TILE / FLASHATTN_FORCE_BWD_TILE)
    def tile(req, op, text):
        return req.param(op, bytes([len(text)]) + text.encode())
    s["force_tile_128x256"] = tile(Req(), 120, "128x256")
    s["force_tile_stages"] = tile(Req(), 120, "64x256:1")
    s["force_tile_malformed"] = tile(Req(), 120, "64x")
    s["force_tile_unknown"] = tile(Req(), 120, "16x16")
    s["force_bwd_tile_64x64"] = tile(Req(d=64), 121, "64x64")
    s["force_bwd_tile_128x256"] = tile(Req(s_q=40, s_k=64), 121, "128x256")
    s["force_bwd_tile_zero"] = tile(Req(), 121, "0x128")
    # dispatch: grid of a broadcast problem with every dim at 2^31 - 1 (queries only)
    s["broadcast_int32_max"] = (Req(calls=QUERIES, b=2147483647, s_q=2147483647, s_k=2147483647,
                                    h_k=2147483647, group=1, d=8)
                                .special("q", 7).special("k", 7).special("v", 7))
    return s


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    write_seeds(out_dir, {name: req.encode() for name, req in seeds().items()})


if __name__ == "__main__":
    main()
