"""flashattn - ctypes binding of the flashattn C library for PyTorch tensors.

    import flashattn
    out = flashattn.attention(q, k, v, causal=True)            # q [b, s_q, h, d], k/v [b, s_k, h_k, d]
    out, lse = flashattn.attention(q, k, v, return_lse=True)   # lse [b, h, s_q], fp32
    out = flashattn.flash_attn_func(q, k, v, causal=True)      # differentiable (torch.autograd)

Tensors on a CUDA device run on the CUDA backend, on the current stream; CPU tensors run
on the CPU backend. The library is found through FLASHATTN_LIBRARY, else next to this
package in the source tree (build*/libflashattn.so), else on the loader path.
"""
import ctypes
import glob
import os

import torch

from . import _abi
from ._abi import Params as _Params, Tensor as _Tensor

__all__ = ["attention", "attention_backward", "flash_attn_func", "check_device_error", "FlashAttnError",
           "library"]

_STATUS_OK = 0
_BACKEND = {"cpu": 1, "cuda": 2}
_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


class FlashAttnError(RuntimeError):
    pass


def _find_library():
    explicit = os.environ.get("FLASHATTN_LIBRARY")
    if explicit:
        return explicit
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = sorted(glob.glob(os.path.join(root, "build*", "libflashattn.so")) +
                   glob.glob(os.path.join(root, ".carry", "libflashattn.so")))
    return found[0] if found else "libflashattn.so"


_lib = None
_contexts = {}


def library():
    """The loaded C library (ctypes.CDLL), loaded on first use. ImportError when its
    structs differ from the binding's mirrors of them (python/flashattn/_abi.py)."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(_find_library())
        _abi.check_layouts(lib)
        _lib = lib
        _lib.fa_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]
        _lib.fa_create_error.restype = ctypes.c_char_p
        _lib.fa_last_error.restype = ctypes.c_char_p
        _lib.fa_last_error.argtypes = [ctypes.c_void_p]
        _lib.fa_status_string.restype = ctypes.c_char_p
        _lib.fa_set_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        _lib.fa_params_init.argtypes = [ctypes.POINTER(_Params)]
        _lib.fa_fwd.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(_Tensor)] * 3 + [
            ctypes.POINTER(_Params), ctypes.POINTER(_Tensor), ctypes.POINTER(_Tensor),
            ctypes.c_void_p, ctypes.c_size_t]
        _lib.fa_bwd.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(_Tensor)] * 6 + [
            ctypes.POINTER(_Params)] + [ctypes.POINTER(_Tensor)] * 3 + [ctypes.c_void_p, ctypes.c_size_t]
        _lib.fa_device_error.argtypes = [ctypes.c_void_p, ctypes.c_int]
        for size_query in (_lib.fa_fwd_workspace_size, _lib.fa_bwd_workspace_size):
            size_query.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(_Tensor)] * 3 + [
                ctypes.POINTER(_Params), ctypes.POINTER(ctypes.c_size_t)]
    return _lib


def _context(device):
    key = (device.type, device.index or 0)
    if key not in _contexts:
        ctx = ctypes.c_void_p()
        status = library().fa_create(ctypes.byref(ctx), _BACKEND[device.type], key[1])
        if status != _STATUS_OK:
            raise FlashAttnError(library().fa_create_error().decode())
        _contexts[key] = ctx
    return _contexts[key]


def _view(t):
    if t.dtype not in _DTYPE:
        raise FlashAttnError("unsupported dtype %s" % t.dtype)
    v = _Tensor()
    v.data = t.data_ptr()
    v.dtype = _DTYPE[t.dtype]
    v.ndim = t.dim()
    for i in range(t.dim()):
        v.shape[i] = t.shape[i]
        v.stride[i] = t.stride(i)
    return v


def _check(ctx, status):
    if status != _STATUS_OK:
        lib = library()
        raise FlashAttnError("%s: %s" % (lib.fa_status_string(status).decode(),
                                         lib.fa_last_error(ctx).decode()))


def _params(q, causal, softmax_scale, window, softcap, alibi_slopes, num_splits=0):
    """fa_params for these options, and the tensors that must outlive the call."""
    params = _Params()
    library().fa_params_init(ctypes.byref(params))
    params.softmax_scale = 0.0 if softmax_scale is None else float(softmax_scale)
    params.causal = int(bool(causal))
    params.window_left, params.window_right = int(window[0]), int(window[1])
    params.softcap = float(softcap)
    params.num_splits = int(num_splits)
    keep = []
    if alibi_slopes is not None:
        alibi_slopes = alibi_slopes.to(device=q.device, dtype=torch.float32).contiguous()
        params.alibi_slopes = alibi_slopes.data_ptr()
        params.alibi_batch_stride = alibi_slopes.shape[-1] if alibi_slopes.dim() == 2 else 0
        keep.append(alibi_slopes)
    return params, keep


def _workspace(ctx, size_query, qkv_views, params, device):
    """The call's workspace from torch's allocator (stream-ordered, and inside a CUDA
    graph part of the graph's pool), so the library allocates nothing itself: (pointer,
    bytes, the tensor to keep until the call is queued)."""
    nbytes = ctypes.c_size_t(0)
    _check(ctx, size_query(ctx, *[ctypes.byref(t) for t in qkv_views], ctypes.byref(params), ctypes.byref(nbytes)))
    if nbytes.value == 0:
        return None, 0, None
    buf = torch.empty(nbytes.value, dtype=torch.uint8, device=device)
    return buf.data_ptr(), nbytes.value, buf


def _bind_stream(ctx, device):
    if device.type == "cuda":
        _check(ctx, library().fa_set_stream(ctx, torch.cuda.current_stream(device).cuda_stream))


def attention(q, k, v, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
              alibi_slopes=None, return_lse=False, num_splits=0, out=None):
    """Exact attention over BSHD tensors (see include/flashattn.h for the semantics)."""
    ctx = _context(q.device)
    params, keep = _params(q, causal, softmax_scale, window, softcap, alibi_slopes, num_splits)
    if out is None:
        out = torch.empty_like(q)
    lse = None
    if return_lse:
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], device=q.device, dtype=torch.float32)
    _bind_stream(ctx, q.device)
    qv, kv, vv, ov = _view(q), _view(k), _view(v), _view(out)
    lv = _view(lse) if lse is not None else None
    ws, ws_bytes, ws_keep = _workspace(ctx, library().fa_fwd_workspace_size, (qv, kv, vv), params, q.device)
    status = library().fa_fwd(ctx, ctypes.byref(qv), ctypes.byref(kv), ctypes.byref(vv),
                              ctypes.byref(params), ctypes.byref(ov),
                              ctypes.byref(lv) if lv is not None else None, ws, ws_bytes)
    _check(ctx, status)
    del keep, ws_keep
    return (out, lse) if return_lse else out


def attention_backward(dout, q, k, v, out, lse, causal=False, softmax_scale=None, window=(-1, -1),
                       softcap=0.0, alibi_slopes=None, deterministic=False):
    """Gradients (dq, dk, dv) of attention() from its output and LSE (fa_bwd).
    deterministic: bitwise reproducible dq (its own pass instead of fp32 atomics)."""
    ctx = _context(q.device)
    params, keep = _params(q, causal, softmax_scale, window, softcap, alibi_slopes)
    params.deterministic = int(bool(deterministic))
    dout = dout if dout.stride(-1) == 1 else dout.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    _bind_stream(ctx, q.device)
    views = [_view(t) for t in (q, k, v, out, lse, dout)]
    grads = [_view(t) for t in (dq, dk, dv)]
    ws, ws_bytes, ws_keep = _workspace(ctx, library().fa_bwd_workspace_size, views[:3], params, q.device)
    status = library().fa_bwd(ctx, *[ctypes.byref(t) for t in views], ctypes.byref(params),
                              *[ctypes.byref(t) for t in grads], ws, ws_bytes)
    _check(ctx, status)
    del keep, ws_keep
    return dq, dk, dv


def check_device_error(device, wait=True):
    """Raises FlashAttnError (FA_ERR_DEVICE_CHECK: ...) when an earlier call on `device` had
    device-resident indices out of range, clearing the report (fa_device_error). wait: first
    wait for the work queued on the current stream (not allowed while it is captured)."""
    device = torch.device(device)
    ctx = _context(device)
    _bind_stream(ctx, device)
    _check(ctx, library().fa_device_error(ctx, int(bool(wait))))


class _FlashAttnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, softmax_scale, window, softcap, alibi_slopes, deterministic):
        out, lse = attention(q, k, v, causal=causal, softmax_scale=softmax_scale, window=window,
                             softcap=softcap, alibi_slopes=alibi_slopes, return_lse=True)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = (causal, softmax_scale, window, softcap, alibi_slopes, deterministic)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        causal, softmax_scale, window, softcap, alibi_slopes, deterministic = ctx.options
        dq, dk, dv = attention_backward(dout, q, k, v, out, lse, causal=causal,
                                        softmax_scale=softmax_scale, window=window,
                                        softcap=softcap, alibi_slopes=alibi_slopes,
                                        deterministic=deterministic)
        return dq, dk, dv, None, None, None, None, None, None


def flash_attn_func(q, k, v, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False):
    """attention() as a differentiable torch operation (training through flashattn)."""
    return _FlashAttnFunction.apply(q, k, v, causal, softmax_scale, tuple(window), softcap,
                                    alibi_slopes, deterministic)
