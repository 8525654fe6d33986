"""flash_attn's Python API over libflashattn: the same function names, argument names,
defaults and return conventions as flash_attn 2 (flash_attn_func, the packed and varlen
variants, flash_attn_with_kvcache) and flash_attn 3's flash_attn_combine, so code written
for flash_attn runs by changing the import.

Differences, each one explicit:
- dropout_p > 0 raises FlashAttnError naming the argument (flashattn has no dropout); so
  does flash_attn_with_kvcache's cache_leftpad. return_attn_probs=True returns (out,
  softmax_lse, None), as flash_attn 2 does without dropout: the probabilities are never
  formed. softmax_scale must be > 0 (None: 1/sqrt(head dim)).
- return_softmax_lse=True (flash_attn_with_kvcache's name, here on every function) returns
  (out, softmax_lse) instead of out.
- Rotary in flash_attn_with_kvcache: q row i is rotated at position cache_seqlens + i
  (the library's rule, include/flashattn.h), also when not causal; flash_attn 2 rotates
  every q row of a non-causal call at cache_seqlens.
- Head dims that are not a multiple of 8 (the library's granule) are zero-padded up to one
  here, with the scale kept at 1/sqrt(original head dim), and the output sliced back; the
  gradient flows through the padding. flash_attn_with_kvcache cannot pad a cache in place
  and refuses such head dims.
- flash_attn_varlen_func also takes seqused_k (flash_attn 3's name).
- flash_attn_combine merges in the output dtype: the GPU backends take fp16/bf16 partials
  with head dims that are multiples of 8 (else FlashAttnError FA_ERR_UNSUPPORTED, with the
  reason), so flash_attn 3's fp32 partials need out_dtype=torch.bfloat16 (or float16)
  on a GPU, which rounds them to it before the merge."""
import torch
import torch.nn.functional as F

from . import _ops
from ._core import FlashAttnError

__all__ = ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
           "flash_attn_varlen_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func",
           "flash_attn_with_kvcache", "flash_attn_combine"]

HEAD_DIM_GRANULE = 8


def _refuse_dropout(dropout_p):
    if dropout_p != 0.0:
        raise FlashAttnError("dropout_p=%g: flashattn has no attention dropout (pass dropout_p=0.0)" % dropout_p)


def _returns(result, return_softmax_lse, return_attn_probs):
    """flash_attn 2's conventions: out; (out, softmax_lse) here with return_softmax_lse;
    (out, softmax_lse, S_dmask) with return_attn_probs, where flash_attn 2 without dropout
    forms no probabilities either (S_dmask None)."""
    out, lse = result
    if return_attn_probs:
        return out, lse, None
    return (out, lse) if return_softmax_lse else out


def _scale(softmax_scale, head_dim):
    if softmax_scale is None:
        return head_dim ** -0.5
    if not softmax_scale > 0:
        raise FlashAttnError("softmax_scale=%r: must be > 0 (None: 1/sqrt(head dim))" % (softmax_scale,))
    return float(softmax_scale)


def _padded(t):
    """t with its last dim contiguous (the library's layout rule; flash_attn copies such
    inputs too) and zero-padded to a multiple of HEAD_DIM_GRANULE."""
    if t.stride(-1) != 1:
        t = t.contiguous()
    extra = -t.shape[-1] % HEAD_DIM_GRANULE
    return F.pad(t, (0, extra)) if extra else t


def _attend(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
            return_softmax_lse, return_attn_probs, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
            max_seqlen_k=0, seqused_k=None, block_table=None):
    """The differentiable forward every non-cache function ends in."""
    head_dim = q.shape[-1]
    scale = _scale(softmax_scale, head_dim)
    left, right = window_size
    out, lse = _ops.attention(_padded(q), _padded(k), _padded(v), cu_seqlens_q, cu_seqlens_k, seqused_k,
                              block_table, alibi_slopes, int(max_seqlen_q), int(max_seqlen_k), scale,
                              bool(causal), int(left), int(right), float(softcap), 0, bool(deterministic))
    if out.shape[-1] != head_dim:
        out = out[..., :head_dim]
    return _returns((out, lse), return_softmax_lse, return_attn_probs)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                    return_softmax_lse=False):
    """q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k, headdim), nheads a
    multiple of nheads_k (GQA/MQA). causal aligns to the bottom-right corner; window_size
    (left, right) with -1 unbounded; softcap > 0 caps scores at softcap*tanh(s/softcap);
    alibi_slopes (nheads,) or (batch, nheads) fp32. Returns out (batch, seqlen_q, nheads,
    headdim), or (out, softmax_lse (batch, nheads, seqlen_q) fp32)."""
    _refuse_dropout(dropout_p)
    return _attend(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                   return_softmax_lse, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                              return_softmax_lse=False):
    """qkv: (batch, seqlen, 3, nheads, headdim); otherwise as flash_attn_func."""
    _refuse_dropout(dropout_p)
    q, k, v = qkv.unbind(dim=2)
    return _attend(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                   return_softmax_lse, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                             return_softmax_lse=False):
    """kv: (batch, seqlen_k, 2, nheads_k, headdim); otherwise as flash_attn_func."""
    _refuse_dropout(dropout_p)
    k, v = kv.unbind(dim=2)
    return _attend(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                   return_softmax_lse, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None,
                           seqused_k=None, return_softmax_lse=False):
    """Sequences packed without padding: q (total_q, nheads, headdim), k, v (total_k, nheads_k,
    headdim); cu_seqlens_q/_k int32 (batch + 1,) offsets; max_seqlen_q/_k the longest
    sequences. With block_table (batch, max_blocks) int32, k and v are page pools
    (num_blocks, page_block_size, nheads_k, headdim) (no backward). seqused_k (batch,)
    int32: keys of each sequence actually used. softmax_lse is (nheads, total_q)."""
    _refuse_dropout(dropout_p)
    return _attend(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                   return_softmax_lse, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                   max_seqlen_k, seqused_k, block_table)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None,
                                     causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                                     deterministic=False, return_attn_probs=False, return_softmax_lse=False):
    """qkv: (total, 3, nheads, headdim); otherwise as flash_attn_varlen_func."""
    _refuse_dropout(dropout_p)
    q, k, v = qkv.unbind(dim=1)
    return _attend(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                   return_softmax_lse, return_attn_probs, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                    softcap=0.0, alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False, return_softmax_lse=False):
    """kv: (total_k, 2, nheads_k, headdim); otherwise as flash_attn_varlen_func."""
    _refuse_dropout(dropout_p)
    k, v = kv.unbind(dim=1)
    return _attend(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                   return_softmax_lse, return_attn_probs, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                   max_seqlen_k)


def _cache_seqlens_tensor(cache_seqlens, q, k_cache, block_table, appending):
    """cache_seqlens as int32 (batch,): an int is broadcast; None means the whole cache."""
    if isinstance(cache_seqlens, torch.Tensor):
        return cache_seqlens
    if cache_seqlens is None:
        if appending:
            raise FlashAttnError("cache_seqlens=None with new k/v: say where they go (cache_seqlens)")
        pages = block_table.shape[1] if block_table is not None else 1
        cache_seqlens = pages * k_cache.shape[1]
    return torch.full((q.shape[0],), int(cache_seqlens), dtype=torch.int32, device=q.device)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """Decode / incremental attention over a KV cache, in one call: k, v (batch, seqlen_new,
    nheads_k, headdim), when given, are written into k_cache/v_cache in place at
    cache_seqlens (rotated by rotary_cos/sin (seqlen_ro, rotary_dim / 2) first, and q with
    them), then q attends over cache_seqlens + seqlen_new keys. k_cache, v_cache:
    (batch_cache, seqlen_cache, nheads_k, headdim), or page pools (num_blocks,
    page_block_size, nheads_k, headdim) with block_table (batch, max_blocks) int32.
    cache_seqlens: int or (batch,) int32; cache_batch_idx (batch,) int32 picks cache rows.
    num_splits: 0 lets the dispatcher choose. No backward. Returns out, or (out,
    softmax_lse (batch, nheads, seqlen_q))."""
    if cache_leftpad is not None:
        raise FlashAttnError("cache_leftpad: flashattn has no left-padded caches (start each cache row at 0)")
    if q.shape[-1] % HEAD_DIM_GRANULE:
        raise FlashAttnError("flash_attn_with_kvcache: head dim %d is not a multiple of %d, and a cache "
                             "cannot be padded in place (allocate the cache with a padded head dim)"
                             % (q.shape[-1], HEAD_DIM_GRANULE))
    seqlens = _cache_seqlens_tensor(cache_seqlens, q, k_cache, block_table, k is not None)
    scale = _scale(softmax_scale, q.shape[-1])
    q, k, v = (t.contiguous() if t is not None and t.stride(-1) != 1 else t for t in (q, k, v))
    left, right = window_size
    out, lse = _ops.attention_with_kvcache(q, k_cache, v_cache, k, v, seqlens, cache_batch_idx, block_table,
                                           rotary_cos, rotary_sin, alibi_slopes, scale, bool(causal), int(left),
                                           int(right), float(softcap), bool(rotary_interleaved), int(num_splits),
                                           bool(return_softmax_lse))
    return (out, lse) if return_softmax_lse else out


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None):
    """Merges attention computed over disjoint key sets (flash_attn 3's convention):
    out_partial (num_splits, batch, seqlen, nheads, headdim) and lse_partial (num_splits,
    batch, seqlen, nheads), or varlen (num_splits, total_q, nheads, headdim) and
    (num_splits, total_q, nheads); a list of per-split tensors works too. Returns (out,
    softmax_lse) with out (batch, seqlen, nheads, headdim) in out_dtype (default the
    partials' dtype; written into `out` when given) and softmax_lse (batch, seqlen, nheads)
    fp32, a transposed view of (batch, nheads, seqlen) storage as flash_attn 3 returns it."""
    outs, lses = list(out_partial), list(lse_partial)
    if not outs or len(outs) != len(lses):
        raise FlashAttnError("flash_attn_combine: %d out partials and %d lse partials (need n >= 1 of each)"
                             % (len(outs), len(lses)))
    dtype = out_dtype or (out.dtype if out is not None else outs[0].dtype)
    outs = [t.to(dtype) for t in outs]
    # The library's LSE layout is heads before rows: (batch, nheads, seqlen) or (nheads, total).
    lses = [t.transpose(-1, -2) for t in lses]
    merged, lse = _ops.combine_partials(outs, lses)
    if out is not None:
        out.copy_(merged)
        merged = out
    return merged, lse.transpose(-1, -2)
