"""flashattn for PyTorch: exact, IO-aware attention from the flashattn C library.

    from flashattn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache
    out = flash_attn_func(q, k, v, causal=True)       # q (b, s_q, h, d), k/v (b, s_k, h_k, d)

The flash_attn-compatible functions (interface.py) are differentiable torch operators:
custom ops flashattn::fwd/bwd/fwd_kvcache/combine with fake implementations and autograd on
torch >= 2.4 (torch.compile traces them without a graph break, CUDA graphs capture them),
autograd.Function on older torch. CUDA tensors run on the CUDA backend on the current
stream, CPU tensors on the CPU backend. transformers: flashattn.integrations.transformers.

attention() and attention_backward() are the direct calls (no autograd, no custom op;
attention writes into a given `out`), for benchmarks and callers that manage buffers.
The library is found as _library.py says; library() loads it, library_path() names it."""
import torch

from . import _core
from ._core import FlashAttnError, check_device_error
from ._library import library, path as library_path
from ._ops import HAS_CUSTOM_OPS
from .interface import (flash_attn_combine, flash_attn_func, flash_attn_kvpacked_func,
                        flash_attn_qkvpacked_func, flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
                        flash_attn_varlen_qkvpacked_func, flash_attn_with_kvcache)

__all__ = ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func", "flash_attn_varlen_func",
           "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func", "flash_attn_with_kvcache",
           "flash_attn_combine", "attention", "attention_backward", "check_device_error", "FlashAttnError",
           "library", "library_path", "HAS_CUSTOM_OPS"]


def attention(q, k, v, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0, alibi_slopes=None,
              return_lse=False, num_splits=0, out=None):
    """fa_fwd over BSHD tensors into `out` (allocated when None); returns out, or (out, lse
    (b, h, s_q) fp32). Head dims must be multiples of 8 here (no padding)."""
    out = torch.empty_like(q) if out is None else out
    lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32) if return_lse else None
    _core.fwd(q, k, v, out, lse, causal=causal, softmax_scale=softmax_scale, window=window, softcap=softcap,
              alibi_slopes=alibi_slopes, num_splits=num_splits)
    return (out, lse) if return_lse else out


def attention_backward(dout, q, k, v, out, lse, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
                       alibi_slopes=None, deterministic=False):
    """fa_bwd: (dq, dk, dv) of attention() from its out and lse. deterministic: bitwise
    reproducible dq (its own pass instead of fp32 atomics on the GPUs)."""
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dout = dout if dout.stride(-1) == 1 else dout.contiguous()
    _core.bwd(dout, q, k, v, out, lse, dq, dk, dv, causal=causal, softmax_scale=softmax_scale, window=window,
              softcap=softcap, alibi_slopes=alibi_slopes, deterministic=deterministic)
    return dq, dk, dv
