"""The calls into libflashattn on torch tensors: one context per device, tensors described
as fa_tensor views (no copies), fa_params from keyword options, the workspace from torch's
allocator (stream-ordered, and inside a captured CUDA graph part of the graph's pool, so a
call allocates nothing of its own), and the four operations (fwd, bwd, fwd_kvcache,
combine) as functions that write into tensors the caller allocated. Tensors on a CUDA
device run on the CUDA backend on the current stream; CPU tensors on the CPU backend."""
import ctypes
import threading

import torch

from ._abi import KvcacheParams, Params, Tensor
from ._library import library

_STATUS_OK = 0
_BACKEND = {"cpu": 1, "cuda": 2}
_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


class FlashAttnError(RuntimeError):
    """A call the library refused or that failed: the status name and the library's reason."""


_contexts = {}
# One lock per context: a call binds the stream, asks for the workspace, calls, and reads
# the context's last error in separate ctypes calls (each releases the GIL), and the
# library allows one thread in a context at a time.
_locks = {}


def _key(device):
    index = device.index
    if index is None and device.type == "cuda":
        index = torch.cuda.current_device()
    return (device.type, index or 0)


def _held(device):
    """The lock of device's context, held from binding the stream to reading the error."""
    return _locks.setdefault(_key(device), threading.Lock())


def _context(device):
    key = _key(device)
    if device.type not in _BACKEND:
        raise FlashAttnError("flashattn runs on cpu and cuda tensors, not %s" % device.type)
    if key not in _contexts:
        ctx = ctypes.c_void_p()
        status = library().fa_create(ctypes.byref(ctx), _BACKEND[device.type], key[1])
        if status != _STATUS_OK:
            raise FlashAttnError(library().fa_create_error().decode())
        _contexts[key] = ctx
    return _contexts[key]


def _view(t):
    """t as an fa_tensor (shape and strides in elements); None for None."""
    if t is None:
        return None
    if t.dtype not in _DTYPE:
        raise FlashAttnError("unsupported dtype %s (float16, bfloat16, or float32 on the CPU)" % t.dtype)
    if t.dim() > 4:
        raise FlashAttnError("a tensor of %d dims (at most 4)" % t.dim())
    v = Tensor()
    v.data = t.data_ptr() if t.numel() else None
    v.dtype = _DTYPE[t.dtype]
    v.ndim = t.dim()
    for i in range(t.dim()):
        v.shape[i] = t.shape[i]
        v.stride[i] = t.stride(i)
    return v


def _ref(view):
    return ctypes.byref(view) if view is not None else None


def _check(ctx, status):
    if status != _STATUS_OK:
        lib = library()
        raise FlashAttnError("%s: %s" % (lib.fa_status_string(status).decode(), lib.fa_last_error(ctx).decode()))


def _int32(t, device, what):
    """An int32 index tensor on `device`, contiguous (the library reads it as int32 [n])."""
    if t is None:
        return None
    if t.dtype != torch.int32:
        raise FlashAttnError("%s must be torch.int32, not %s" % (what, t.dtype))
    if t.device != device:
        raise FlashAttnError("%s is on %s, the query on %s" % (what, t.device, device))
    return t.contiguous()


def _params(q, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0, alibi_slopes=None,
            num_splits=0, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0,
            seqused_k=None, block_table=None, deterministic=False):
    """fa_params for these options, and the tensors that must outlive the call."""
    params = Params()
    library().fa_params_init(ctypes.byref(params))
    params.softmax_scale = 0.0 if softmax_scale is None else float(softmax_scale)
    params.causal = int(bool(causal))
    params.window_left, params.window_right = int(window[0]), int(window[1])
    params.softcap = float(softcap)
    params.num_splits = int(num_splits)
    params.deterministic = int(bool(deterministic))
    keep = []
    if alibi_slopes is not None:
        alibi_slopes = alibi_slopes.to(device=q.device, dtype=torch.float32).contiguous()
        params.alibi_slopes = alibi_slopes.data_ptr()
        params.alibi_batch_stride = alibi_slopes.shape[-1] if alibi_slopes.dim() == 2 else 0
        keep.append(alibi_slopes)
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise FlashAttnError("cu_seqlens_q and cu_seqlens_k go together (varlen)")
    if cu_seqlens_q is not None:
        cu_q, cu_k = _int32(cu_seqlens_q, q.device, "cu_seqlens_q"), _int32(cu_seqlens_k, q.device, "cu_seqlens_k")
        params.cu_seqlens_q, params.cu_seqlens_k = cu_q.data_ptr(), cu_k.data_ptr()
        params.varlen_batch = cu_q.numel() - 1
        params.max_seqlen_q, params.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
        keep += [cu_q, cu_k]
    if seqused_k is not None:
        used = _int32(seqused_k, q.device, "seqused_k")
        params.seqused_k = used.data_ptr()
        keep.append(used)
    if block_table is not None:
        table = _int32(block_table, q.device, "block_table")
        if table.dim() != 2:
            raise FlashAttnError("block_table must be [batch, max_blocks], not %d-D" % table.dim())
        params.block_table = table.data_ptr()
        params.block_table_batch_stride = table.stride(0)
        params.block_table_width = table.shape[1]
        keep.append(table)
    return params, keep


def _run(ctx, device, size_query, call):
    """One library call under the context's lock: bind the current stream, take the
    workspace the library asks for (size_query(ctx, bytes_out)) from torch's allocator,
    then call(workspace, bytes). The workspace tensor lives until the call is queued."""
    with _held(device):
        _bind_stream(ctx, device)
        nbytes = ctypes.c_size_t(0)
        _check(ctx, size_query(ctx, ctypes.byref(nbytes)))
        buf = torch.empty(nbytes.value, dtype=torch.uint8, device=device) if nbytes.value else None
        _check(ctx, call(buf.data_ptr() if buf is not None else None, nbytes.value))


def _bind_stream(ctx, device):
    if device.type == "cuda":
        _check(ctx, library().fa_set_stream(ctx, torch.cuda.current_stream(device).cuda_stream))


def fwd(q, k, v, out, lse, page_block_size=0, **options):
    """fa_fwd of q, k, v into out (and lse when not None); options as _params. With a
    block_table, k and v are page pools [pages, page_block_size, h_k, d]."""
    lib, ctx = library(), _context(q.device)
    params, keep = _params(q, **options)
    params.page_block_size = int(page_block_size) if options.get("block_table") is not None else 0
    views = [_view(t) for t in (q, k, v, out, lse)]
    _run(ctx, q.device, lambda c, n: lib.fa_fwd_workspace_size(c, *map(_ref, views[:3]), ctypes.byref(params), n),
         lambda ws, size: lib.fa_fwd(ctx, *map(_ref, views[:3]), ctypes.byref(params), _ref(views[3]),
                                     _ref(views[4]), ws, size))
    del keep


def bwd(dout, q, k, v, out, lse, dq, dk, dv, **options):
    """fa_bwd: the gradients of fwd's out into dq, dk, dv; options as _params."""
    lib, ctx = library(), _context(q.device)
    params, keep = _params(q, **options)
    views = [_view(t) for t in (q, k, v, out, lse, dout)]
    grads = [_view(t) for t in (dq, dk, dv)]
    _run(ctx, q.device, lambda c, n: lib.fa_bwd_workspace_size(c, *map(_ref, views[:3]), ctypes.byref(params), n),
         lambda ws, size: lib.fa_bwd(ctx, *map(_ref, views), ctypes.byref(params), *map(_ref, grads), ws, size))
    del keep


def fwd_kvcache(q, k_cache, v_cache, k_new, v_new, out, lse, cache_seqlens, cache_batch_idx=None,
                rotary_cos=None, rotary_sin=None, rotary_interleaved=True, **options):
    """fa_fwd_kvcache: appends k_new/v_new (when not None) into the caches at cache_seqlens,
    then attends with q over them into out (and lse); options as _params (block_table for
    paged caches, whose page size is k_cache.shape[1])."""
    lib, ctx = library(), _context(q.device)
    params, keep = _params(q, **options)
    if options.get("block_table") is not None:
        params.page_block_size = k_cache.shape[1]
    kv = KvcacheParams()
    lib.fa_kvcache_params_init(ctypes.byref(kv))
    seqlens = _int32(cache_seqlens, q.device, "cache_seqlens")
    kv.cache_seqlens = seqlens.data_ptr()
    keep.append(seqlens)
    if cache_batch_idx is not None:
        idx = _int32(cache_batch_idx, q.device, "cache_batch_idx")
        kv.cache_batch_idx = idx.data_ptr()
        keep.append(idx)
    if rotary_cos is not None:
        cos, sin = (t.to(device=q.device, dtype=q.dtype).contiguous() for t in (rotary_cos, rotary_sin))
        kv.rotary_cos, kv.rotary_sin = cos.data_ptr(), sin.data_ptr()
        kv.rotary_dim = 2 * cos.shape[1]
        kv.rotary_interleaved = int(bool(rotary_interleaved))
        kv.rotary_seqlen = cos.shape[0]
        keep += [cos, sin]
    views = [_view(t) for t in (q, k_cache, v_cache, k_new, v_new, out, lse)]
    _run(ctx, q.device,
         lambda c, n: lib.fa_fwd_kvcache_workspace_size(c, *map(_ref, views[:5]), ctypes.byref(kv),
                                                        ctypes.byref(params), n),
         lambda ws, size: lib.fa_fwd_kvcache(ctx, *map(_ref, views[:5]), ctypes.byref(kv), ctypes.byref(params),
                                             _ref(views[5]), _ref(views[6]), ws, size))
    del keep


def combine(out_partial, lse_partial, out, lse):
    """fa_combine of the n partials out_partial[i] (with lse_partial[i]) into out and lse."""
    lib, ctx = library(), _context(out.device)
    n = len(out_partial)
    outs, lses = (Tensor * n)(), (Tensor * n)()
    for i in range(n):
        outs[i], lses[i] = _view(out_partial[i]), _view(lse_partial[i])
    with _held(out.device):
        _bind_stream(ctx, out.device)
        _check(ctx, lib.fa_combine(ctx, n, outs, lses, _ref(_view(out)), _ref(_view(lse))))


def check_device_error(device, wait=True):
    """Raises FlashAttnError (FA_ERR_DEVICE_CHECK: ...) when an earlier call on `device` had
    device-resident indices out of range, clearing the report (fa_device_error). wait: first
    wait for the work queued on the current stream (not allowed while it is captured)."""
    device = torch.device(device)
    ctx = _context(device)
    with _held(device):
        _bind_stream(ctx, device)
        _check(ctx, library().fa_device_error(ctx, int(bool(wait))))
