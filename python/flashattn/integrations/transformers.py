"""flashattn as a Hugging Face transformers attention implementation.

    import flashattn.integrations.transformers as fa_hf
    fa_hf.register()                      # once; then, for Llama-style models:
    model = AutoModelForCausalLM.from_config(config, attn_implementation=fa_hf.NAME)

The name is "fa_attention", not "flashattn": transformers (5.x, is_flash_attention_requested)
takes every implementation whose name contains "flash" for a FlashAttention kernel it must
import itself (from flash_attn or the kernels hub) and fails on any other.
register() adds the name to transformers' AttentionInterface and, where transformers has
an AttentionMaskInterface, gives it the mask that transformers builds for
flash_attention_2 (None, or the 2-D padding mask), so padded batches arrive as a padding
mask. GQA goes to the library as is (no repeat_kv). A padding mask is served through
varlen: the valid tokens are gathered (unpad), attended, and scattered back with zeros in
padded rows (re-pad). Older transformers pass 4-D masks instead; those are accepted when
they are exactly a padding mask combined with the causal one (checked; anything else is
refused with FlashAttnError, never approximated). Packed sequences (batch 1) come from
cu_seq_lens_q/_k when transformers passes them, else from position_ids that restart.
fp32 activations on a GPU run in autocast's or the weights' half dtype. Unsupported: attention dropout > 0,
attention sinks (s_aux), output_attentions."""
import weakref

import torch

from .. import interface
from .._core import FlashAttnError

NAME = "fa_attention"


def register(name=NAME):
    """Registers `name` with transformers (attention function and, where it exists, mask
    function); returns the name for attn_implementation."""
    from transformers import AttentionInterface
    AttentionInterface.register(name, attention_forward)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    except ImportError:  # before masking_utils: the model builds 4-D masks (see _padding_of_4d)
        return name
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"])
    return name


def _window(sliding_window, causal):
    """transformers' sliding window w lets a query see itself and the w - 1 keys before it."""
    if not sliding_window:
        return (-1, -1)
    return (int(sliding_window) - 1, 0 if causal else int(sliding_window) - 1)


def _keep_of(mask):
    """Boolean 'may attend' of a transformers mask: bool/int masks as they are, additive
    float masks where they add 0 rather than a large negative value."""
    if mask.dtype == torch.bool:
        return mask
    if mask.dtype.is_floating_point and mask.dim() == 4:
        return mask > torch.finfo(mask.dtype).min / 2
    return mask != 0


def _padding_of_4d(keep, s_q, s_k, causal):
    """The 2-D key padding mask behind a 4-D mask (b, 1 or h, s_q, s_k) that is padding
    (and causal, bottom-right aligned) and nothing else; FlashAttnError for any other."""
    keys = keep[:, 0, -1, :]  # the last query row sees every valid key under both masks
    expected = keys[:, None, :].expand(-1, s_q, -1)
    if causal:
        rows = torch.arange(s_q, device=keep.device)[:, None] + (s_k - s_q)
        expected = expected & (torch.arange(s_k, device=keep.device)[None, :] <= rows)
    queries = keys[:, s_k - s_q:]
    same = (keep == expected[:, None]) | ~queries[:, None, :, None]
    if not bool(same.all()):
        raise FlashAttnError("flashattn (transformers): this 4-D attention mask is not a padding mask "
                             "(with causal); only padding masks are served, through varlen")
    return keys


def _cu_seqlens(valid):
    """int32 (b + 1,) offsets of the valid tokens of each row, and their flat indices."""
    lengths = valid.sum(dim=1, dtype=torch.int32)
    cu = torch.nn.functional.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    return cu, valid.flatten().nonzero().flatten()


def _unpadded(q, k, v, keys_valid, softmax_scale, causal, window, softcap):
    """Attention of the valid tokens only (varlen), re-padded with zeros: q (b, s_q, h, d),
    k/v (b, s_k, h_k, d), keys_valid (b, s_k) with the queries the last s_q positions."""
    b, s_q, h, d = q.shape
    s_k = k.shape[1]
    cu_q, idx_q = _cu_seqlens(keys_valid[:, s_k - s_q:])
    cu_k, idx_k = _cu_seqlens(keys_valid)
    flat = lambda t: t.reshape(-1, t.shape[2], t.shape[3])  # noqa: E731
    out = interface.flash_attn_varlen_func(flat(q)[idx_q], flat(k)[idx_k], flat(v)[idx_k], cu_q, cu_k, s_q, s_k,
                                           softmax_scale=softmax_scale, causal=causal, window_size=window,
                                           softcap=softcap)
    full = out.new_zeros(b * s_q, h, d).index_copy(0, idx_q, out)
    return full.view(b, s_q, h, d)


def attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention-function contract: query (b, h, s_q, d), key/value (b, h_k,
    s_k, d); returns (out (b, s_q, h, d), None)."""
    if dropout:
        raise FlashAttnError("flashattn (transformers): attention dropout %g; flashattn has none "
                             "(set attention_dropout=0.0)" % dropout)
    if kwargs.get("s_aux") is not None:
        raise FlashAttnError("flashattn (transformers): attention sinks (s_aux) are not supported")
    if kwargs.get("output_attentions"):
        raise FlashAttnError("flashattn (transformers): output_attentions needs the probabilities; "
                             "flashattn never forms them (use attn_implementation='eager')")
    causal = kwargs.get("is_causal")
    causal = getattr(module, "is_causal", True) if causal is None else bool(causal)
    window = _window(kwargs.get("sliding_window"), causal)
    softcap = float(kwargs.get("softcap") or 0.0)
    dtype = _compute_dtype(module, query)
    q, k, v = (t.transpose(1, 2).to(dtype) for t in (query, key, value))  # BSHD views
    options = dict(softmax_scale=scaling, causal=causal, window_size=window, softcap=softcap)
    if attention_mask is None:
        out = _unmasked(q, k, v, kwargs, options)
    else:
        out = _masked(q, k, v, _keep_of(attention_mask), options)
    return out.to(query.dtype), None


def _compute_dtype(module, query):
    """fp32 activations on a GPU (whose kernels take fp16/bf16) run in autocast's dtype, or
    in the dtype of the module's weights when those are half precision (fp32 norms beside
    bf16 linears); an fp32 model without autocast is refused rather than silently rounded."""
    if query.dtype != torch.float32 or query.device.type == "cpu":
        return query.dtype
    if torch.is_autocast_enabled():
        if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
            return torch.get_autocast_dtype(query.device.type)
        return torch.get_autocast_gpu_dtype()
    weights = {p.dtype for p in module.parameters()} - {torch.float32}
    if len(weights) == 1:
        return weights.pop()
    raise FlashAttnError("flashattn (transformers): fp32 attention inputs on %s; the GPU kernels take "
                         "fp16/bf16 (load the model with torch_dtype=torch.bfloat16, or run under "
                         "torch.autocast)" % query.device)


# The last position_ids seen and their sequence starts. Reading where positions restart
# needs the values on the host (a device sync); a model's layers all receive the same
# tensor in one forward, so the sync happens once per forward instead of once per layer.
# A weak reference and the tensor's version counter say when the memo still holds.
_last_starts = (None, -1, -1, None)


def _packed_starts(position_ids, length):
    """cu_seqlens of sequences packed into one row, where position_ids restart; None when
    they never do (one sequence), as transformers' own FlashAttention path detects them."""
    global _last_starts
    if position_ids is None or position_ids.shape[0] != 1 or length < 2:
        return None
    ref, version, seen_length, starts = _last_starts
    if ref is not None and ref() is position_ids and version == position_ids._version and seen_length == length:
        return starts
    starts = _restarts(position_ids[0, :length])
    if not _compiling():
        _last_starts = (weakref.ref(position_ids), position_ids._version, length, starts)
    return starts


def _restarts(pos):
    """int32 offsets of the runs of increasing positions in pos, or None for one run."""
    restarts = (pos[1:] <= pos[:-1]).nonzero().flatten() + 1
    if restarts.numel() == 0:
        return None
    edges = [torch.zeros(1, dtype=restarts.dtype, device=pos.device), restarts,
             torch.full((1,), len(pos), dtype=restarts.dtype, device=pos.device)]
    return torch.cat(edges).to(torch.int32)


def _compiling():
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling()


def _unmasked(q, k, v, kwargs, options):
    """No padding: one call; packed sequences (batch 1) as varlen, from cu_seq_lens_q/_k
    or from position_ids that restart."""
    s_q, s_k = q.shape[1], k.shape[1]
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if (cu_q is None or cu_k is None) and s_q == s_k and q.shape[0] == 1:
        cu_q = cu_k = _packed_starts(kwargs.get("position_ids"), s_q)
    if cu_q is None or cu_k is None or q.shape[0] != 1:
        return interface.flash_attn_func(q, k, v, **options)
    out = interface.flash_attn_varlen_func(q[0], k[0], v[0], cu_q.int(), cu_k.int(), kwargs.get("max_length_q") or s_q,
                                           kwargs.get("max_length_k") or s_k, **options)
    return out.unsqueeze(0)


def _masked(q, k, v, keep, options):
    """A padding mask, 2-D or 4-D; keys past a 2-D mask's length (a static cache's unused
    slots) are not attended, as in transformers' own unpadding."""
    s_q, s_k = q.shape[1], k.shape[1]
    if keep.dim() == 4:
        keys_valid = _padding_of_4d(keep, s_q, s_k, options["causal"])
    else:
        keys_valid = keep.bool()
        if keys_valid.shape[1] < s_k:
            k, v = k[:, :keys_valid.shape[1]], v[:, :keys_valid.shape[1]]
        keys_valid = keys_valid[:, -k.shape[1]:]
    return _unpadded(q, k, v, keys_valid, options["softmax_scale"], options["causal"], options["window_size"],
                     options["softcap"])
