"""The ctypes mirrors of flashattn.h's structs and the load-time check that they match the
library: a mirror out of step with the header the library was built from would make every
call read or write the wrong bytes, so the binding refuses to load instead (ImportError).
Kept free of torch so the check can be tested on machines without it."""
import ctypes

# fa_struct_id of include/flashattn.h.
STRUCT_TENSOR = 0
STRUCT_PARAMS = 1
STRUCT_KVCACHE_PARAMS = 4


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 4)]


class Params(ctypes.Structure):
    _fields_ = [("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int),
                ("window_left", ctypes.c_int), ("window_right", ctypes.c_int),
                ("softcap", ctypes.c_float), ("alibi_slopes", ctypes.c_void_p),
                ("alibi_batch_stride", ctypes.c_int64), ("cu_seqlens_q", ctypes.c_void_p),
                ("cu_seqlens_k", ctypes.c_void_p), ("varlen_batch", ctypes.c_int),
                ("max_seqlen_q", ctypes.c_int), ("max_seqlen_k", ctypes.c_int),
                ("seqused_k", ctypes.c_void_p), ("num_splits", ctypes.c_int),
                ("deterministic", ctypes.c_int), ("block_table", ctypes.c_void_p),
                ("block_table_batch_stride", ctypes.c_int64), ("page_block_size", ctypes.c_int),
                ("block_table_width", ctypes.c_int), ("reserved", ctypes.c_int * 7)]


class KvcacheParams(ctypes.Structure):
    _fields_ = [("cache_seqlens", ctypes.c_void_p), ("cache_batch_idx", ctypes.c_void_p),
                ("rotary_cos", ctypes.c_void_p), ("rotary_sin", ctypes.c_void_p),
                ("rotary_dim", ctypes.c_int), ("rotary_interleaved", ctypes.c_int),
                ("rotary_seqlen", ctypes.c_int64), ("reserved", ctypes.c_int * 8)]


# Every struct the binding passes to the library, by its C name and fa_struct_id.
MIRRORS = (("fa_tensor", STRUCT_TENSOR, Tensor), ("fa_params", STRUCT_PARAMS, Params),
           ("fa_kvcache_params", STRUCT_KVCACHE_PARAMS, KvcacheParams))


def _check_sizes(lib, mirrors):
    try:
        struct_size = lib.fa_struct_size
    except AttributeError:
        raise ImportError("flashattn: %s has no fa_struct_size (built before it existed); "
                          "rebuild the library" % getattr(lib, "_name", "the library"))
    struct_size.restype = ctypes.c_size_t
    struct_size.argtypes = [ctypes.c_int]
    for name, which, mirror in mirrors:
        c_size, py_size = struct_size(which), ctypes.sizeof(mirror)
        if c_size != py_size:
            raise ImportError("flashattn: struct %s is %d bytes in the C library but %d in the "
                              "Python binding's mirror (python/flashattn/_abi.py): the binding "
                              "and the library come from different versions of flashattn.h"
                              % (name, c_size, py_size))


def _check_field_offsets(lib, tensor, params):
    """Equal sizes can still hide reordered fields: let the library fill each mirror
    (fa_tensor_thd, fa_params_init) and read the values back where the mirror puts them."""
    lib.fa_tensor_thd.restype = tensor
    lib.fa_tensor_thd.argtypes = [ctypes.c_void_p, ctypes.c_int] + [ctypes.c_int64] * 3
    t = lib.fa_tensor_thd(0x1000, 2, 5, 3, 8)
    if (t.data, t.dtype, t.ndim, tuple(t.shape[:3]), tuple(t.stride[:3])) != \
            (0x1000, 2, 3, (5, 3, 8), (24, 8, 1)):
        raise ImportError("flashattn: struct fa_tensor's fields are not where the Python "
                          "binding's mirror puts them (python/flashattn/_abi.py)")
    p = params()
    ctypes.memset(ctypes.byref(p), 0x55, ctypes.sizeof(p))
    lib.fa_params_init.argtypes = [ctypes.POINTER(params)]
    lib.fa_params_init(ctypes.byref(p))
    if (p.window_left, p.window_right, p.causal, p.softcap, p.alibi_slopes,
            p.page_block_size, p.block_table_width, list(p.reserved)) != (-1, -1, 0, 0.0, None, 0, 0, [0] * 7):
        raise ImportError("flashattn: struct fa_params's fields are not where the Python "
                          "binding's mirror puts them (python/flashattn/_abi.py)")


def check_layouts(lib, mirrors=MIRRORS):
    """Raises ImportError naming the struct when a mirror's size (or, for fa_tensor and
    fa_params, a field's place) differs from the library's."""
    _check_sizes(lib, mirrors)
    by_name = {name: mirror for name, _, mirror in mirrors}
    _check_field_offsets(lib, by_name["fa_tensor"], by_name["fa_params"])
