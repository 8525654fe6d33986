"""The library's operations as PyTorch operators: on a torch with torch.library.custom_op
(2.4 and later) they are custom ops flashattn::fwd, ::bwd, ::fwd_kvcache and ::combine,
with fake (meta) implementations and fwd's autograd registered, so torch.compile traces
them without a graph break and CUDA graphs capture them; on an older torch (Debian 12's
1.13) the same functions run directly and fwd's gradient comes from an
autograd.Function. Either way the arithmetic is the library's (_core.py). attention(),
attention_with_kvcache() and combine_partials() are what interface.py calls: in plain
eager mode with nothing to differentiate they call the implementation directly, since
the custom-op layer costs more host time than the library call itself.

Options travel as plain scalars (the schema of a custom op has no tuples or None floats):
softmax_scale 0 means 1/sqrt(head_dim), window sides -1 are unbounded."""
from typing import List, Optional, Tuple

import torch

from . import _core

Tensor = torch.Tensor
HAS_CUSTOM_OPS = hasattr(torch, "library") and hasattr(torch.library, "custom_op")


def _lse_shape(q, varlen):
    """fa_fwd's LSE: [h, total_q] for varlen, else [b, h, s_q]."""
    return (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])


def _fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
         seqused_k: Optional[Tensor], block_table: Optional[Tensor], alibi_slopes: Optional[Tensor],
         max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, causal: bool, window_left: int,
         window_right: int, softcap: float, num_splits: int, deterministic: bool) -> Tuple[Tensor, Tensor]:
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(_lse_shape(q, cu_seqlens_q is not None), device=q.device, dtype=torch.float32)
    _core.fwd(q, k, v, out, lse, page_block_size=k.shape[1] if block_table is not None else 0,
              causal=causal, softmax_scale=softmax_scale, window=(window_left, window_right), softcap=softcap,
              alibi_slopes=alibi_slopes, num_splits=num_splits, cu_seqlens_q=cu_seqlens_q,
              cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
              seqused_k=seqused_k, block_table=block_table)
    return out, lse


def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, alibi_slopes, max_seqlen_q,
              max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, num_splits, deterministic):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty(_lse_shape(q, cu_seqlens_q is not None), dtype=torch.float32))


def _bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, cu_seqlens_q: Optional[Tensor],
         cu_seqlens_k: Optional[Tensor], seqused_k: Optional[Tensor], alibi_slopes: Optional[Tensor],
         max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, causal: bool, window_left: int,
         window_right: int, softcap: float, deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    dq, dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    _core.bwd(dout, q, k, v, out, lse, dq, dk, dv, causal=causal, softmax_scale=softmax_scale,
              window=(window_left, window_right), softcap=softcap, alibi_slopes=alibi_slopes,
              cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
              max_seqlen_k=max_seqlen_k, seqused_k=seqused_k, deterministic=deterministic)
    return dq, dk, dv


def _bwd_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, max_seqlen_q,
              max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, deterministic):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _fwd_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor], v: Optional[Tensor],
                 cache_seqlens: Tensor, cache_batch_idx: Optional[Tensor], block_table: Optional[Tensor],
                 rotary_cos: Optional[Tensor], rotary_sin: Optional[Tensor], alibi_slopes: Optional[Tensor],
                 softmax_scale: float, causal: bool, window_left: int, window_right: int, softcap: float,
                 rotary_interleaved: bool, num_splits: int, return_lse: bool) -> Tuple[Tensor, Tensor]:
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(_lse_shape(q, False) if return_lse else (0,), device=q.device, dtype=torch.float32)
    _core.fwd_kvcache(q, k_cache, v_cache, k, v, out, lse if return_lse else None, cache_seqlens,
                      cache_batch_idx=cache_batch_idx, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                      rotary_interleaved=rotary_interleaved, causal=causal, softmax_scale=softmax_scale,
                      window=(window_left, window_right), softcap=softcap, alibi_slopes=alibi_slopes,
                      num_splits=num_splits, block_table=block_table)
    return out, lse


def _fwd_kvcache_fake(q, k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, block_table, rotary_cos,
                      rotary_sin, alibi_slopes, softmax_scale, causal, window_left, window_right, softcap,
                      rotary_interleaved, num_splits, return_lse):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty(_lse_shape(q, False) if return_lse else (0,), dtype=torch.float32))


def _combine(out_partials: List[Tensor], lse_partials: List[Tensor]) -> Tuple[Tensor, Tensor]:
    out = torch.empty_like(out_partials[0], memory_format=torch.contiguous_format)
    lse = torch.empty_like(lse_partials[0], memory_format=torch.contiguous_format)
    _core.combine(out_partials, lse_partials, out, lse)
    return out, lse


def _combine_fake(out_partials, lse_partials):
    return (torch.empty_like(out_partials[0], memory_format=torch.contiguous_format),
            torch.empty_like(lse_partials[0], memory_format=torch.contiguous_format))


def _rows_addressable(t):
    """Whether the GPU backward reads t as it is: its last dim contiguous, 16-byte aligned
    data and the other strides positive multiples of 8 elements (gpu_args.c
    fa_bwd_rows_aligned; api.c tma_operand_ok). Autograd hands the backward whatever
    layout the graph made (a slice of a wider gradient, a broadcast), which the caller
    cannot choose; anything else is copied. The copy cost 93 us per call at
    b*s = 16k tokens, h*d = 2048 on the H200 (bench/NOTES.md, issue 14 b5)."""
    return (t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and
            all(s > 0 and s % 8 == 0 for s in t.stride()[:-1]))


def _backward_of(saved, options, dout):
    """dq, dk, dv of fwd from what its forward saved: (q, k, v, out, lse, cu_seqlens_q,
    cu_seqlens_k, seqused_k, block_table, alibi_slopes) and the scalar options."""
    q, k, v, out, lse, cu_q, cu_k, used, table, alibi = saved
    if table is not None:
        raise _core.FlashAttnError("FA_ERR_UNSUPPORTED: no backward through a paged K/V cache (block_table)")
    (max_q, max_k, scale, causal, left, right, softcap, _splits, deterministic) = options
    dout = dout if _rows_addressable(dout) else dout.contiguous()
    return bwd(dout, q, k, v, out, lse, cu_q, cu_k, used, alibi, max_q, max_k, scale, causal,
               left, right, softcap, deterministic)


if HAS_CUSTOM_OPS:
    fwd = torch.library.custom_op("flashattn::fwd", _fwd, mutates_args=())
    fwd.register_fake(_fwd_fake)
    bwd = torch.library.custom_op("flashattn::bwd", _bwd, mutates_args=())
    bwd.register_fake(_bwd_fake)
    fwd_kvcache = torch.library.custom_op("flashattn::fwd_kvcache", _fwd_kvcache,
                                          mutates_args=("k_cache", "v_cache"))
    fwd_kvcache.register_fake(_fwd_kvcache_fake)
    combine = torch.library.custom_op("flashattn::combine", _combine, mutates_args=())
    combine.register_fake(_combine_fake)

    def _setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:3], *output, *inputs[3:8])
        ctx.options = tuple(inputs[8:])

    def _fwd_backward(ctx, dout, _dlse):
        dq, dk, dv = _backward_of(ctx.saved_tensors, ctx.options, dout)
        return (dq, dk, dv) + (None,) * 14

    fwd.register_autograd(_fwd_backward, setup_context=_setup_context)

    from torch.utils._python_dispatch import _get_current_dispatch_mode

    def _plain_eager(tensors):
        """True when a call may skip the custom-op layer (about 90 us of host time per call
        on torch 2.11, more than the library's own): not traced by torch.compile or export,
        plain tensors (no fake, functional or other subclass), and no gradient to record."""
        tensors = [t for t in tensors if t is not None]
        return (not torch.compiler.is_compiling() and _no_dispatch_mode()
                and all(type(t) is torch.Tensor and not _functorch_wrapped(t) for t in tensors)
                and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)))

    def _no_dispatch_mode():
        """No tracer (make_fx, FlopCounterMode, fake modes) is watching the dispatcher."""
        return _get_current_dispatch_mode() is None

    def _functorch_wrapped(t):
        """vmap's and grad's tensors are plain torch.Tensor to type() but have no storage."""
        return torch._C._functorch.is_functorch_wrapped_tensor(t)

    def attention(*args):
        """fwd (out, lse) with its gradient: the custom op (autograd registered), or its
        implementation directly where nothing would trace or differentiate it."""
        return _fwd(*args) if _plain_eager(args[:8]) else fwd(*args)

    def attention_with_kvcache(*args):
        """fwd_kvcache: the custom op, or directly as attention() does."""
        return _fwd_kvcache(*args) if _plain_eager(args[:11]) else fwd_kvcache(*args)

    def combine_partials(outs, lses):
        """combine: the custom op, or directly as attention() does."""
        return _combine(outs, lses) if _plain_eager(list(outs) + list(lses)) else combine(outs, lses)
else:
    fwd, bwd, fwd_kvcache, combine = _fwd, _bwd, _fwd_kvcache, _combine

    class _Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            out, lse = _fwd(*args)
            ctx.save_for_backward(*args[:3], out, lse, *args[3:8])
            ctx.options = tuple(args[8:])
            ctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            dq, dk, dv = _backward_of(ctx.saved_tensors, ctx.options, dout)
            return (dq, dk, dv) + (None,) * 14

    def attention(*args):
        """fwd (out, lse) with its gradient through autograd.Function."""
        return _Attention.apply(*args)

    attention_with_kvcache, combine_partials = _fwd_kvcache, _combine
