"""flashattn as a transformers attention implementation
(python/flashattn/integrations/transformers.py).

Without transformers (CI's Debian has none): the attention function itself against the
float64 reference with padding masks (right- and left-padded, 2-D and 4-D), GQA, sliding
windows, packed sequences, and its refusals. With transformers (the GPU machine): a tiny
Llama from a config (random weights) trained two steps and run through generate() with
attn_implementation="fa_attention" (fa_hf.NAME) against "sdpa"."""
import importlib.util
import types

import pytest
import torch

from flashattn import FlashAttnError
from flashattn.integrations import transformers as fa_hf
from reference import assert_close_rule, dtypes_for, randn, reference_attention

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


def _hf_inputs(device, dtype, b, h, h_k, s_q, s_k, d, seed):
    """query (b, h, s_q, d), key/value (b, h_k, s_k, d): transformers' layout (transposed views)."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (randn((b, s, n, d), device, dtype, gen).transpose(1, 2) for s, n in ((s_q, h), (s_k, h_k), (s_k, h_k)))
    return q, k, v


def _expected(q, k, v, keys_valid, causal, window=(-1, -1)):
    """Per row: attention of the valid queries over the valid keys; padded query rows 0."""
    b, s_q, s_k = q.shape[0], q.shape[2], k.shape[2]
    full = torch.zeros(b, s_q, q.shape[1], q.shape[3], dtype=torch.float64, device=q.device)
    naive = torch.zeros_like(full, dtype=q.dtype)
    for i in range(b):
        kv_rows = keys_valid[i].nonzero().flatten()
        q_rows = keys_valid[i, s_k - s_q:].nonzero().flatten()
        ins = (q[i:i + 1, :, q_rows].transpose(1, 2), k[i:i + 1, :, kv_rows].transpose(1, 2),
               v[i:i + 1, :, kv_rows].transpose(1, 2))
        full[i, q_rows] = reference_attention(*ins, causal=causal, window=window)[0][0]
        naive[i, q_rows] = reference_attention(*ins, causal=causal, window=window, dtype=q.dtype)[0][0]
    return full, naive


def _module(causal=True):
    return types.SimpleNamespace(is_causal=causal, num_key_value_groups=3)


@pytest.mark.parametrize("padding", ["right", "left"])
def test_padding_masks_go_through_varlen(device, padding):
    dtype = dtypes_for(device)[-1]
    q, k, v = _hf_inputs(device, dtype, 3, 6, 2, 21, 21, 64, seed=3)
    lengths = torch.tensor([21, 13, 1])
    positions = torch.arange(21)[None, :]
    valid = positions < lengths[:, None] if padding == "right" else positions >= 21 - lengths[:, None]
    valid = valid.to(device)
    out, weights = fa_hf.attention_forward(_module(), q, k, v, valid.long(), scaling=None)
    assert weights is None and out.shape == (3, 21, 6, 64)
    full, naive = _expected(q, k, v, valid, causal=True)
    assert_close_rule(out, full, naive, "2-D mask")
    four_d = valid[:, None, None, :] & torch.ones(21, 21, dtype=torch.bool, device=device).tril()
    additive = torch.zeros(four_d.shape, dtype=dtype, device=device).masked_fill(~four_d, torch.finfo(dtype).min)
    for mask in (four_d, additive):
        out4, _ = fa_hf.attention_forward(_module(), q, k, v, mask, scaling=None)
        assert_close_rule(out4, full, naive, "4-D mask")


def test_decode_step_with_left_padding_and_cache(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _hf_inputs(device, dtype, 2, 4, 4, 1, 30, 32, seed=5)
    valid = torch.ones(2, 30, dtype=torch.bool, device=device)
    valid[1, :12] = False
    out, _ = fa_hf.attention_forward(_module(), q, k, v, valid, scaling=0.3)
    rows = []
    for i in range(2):
        ins = (q[i:i + 1].transpose(1, 2), k[i:i + 1, :, valid[i]].transpose(1, 2),
               v[i:i + 1, :, valid[i]].transpose(1, 2))
        rows.append([reference_attention(*ins, causal=True, scale=0.3, dtype=t)[0] for t in (torch.float64, dtype)])
    assert_close_rule(out, torch.cat([r[0] for r in rows]), torch.cat([r[1] for r in rows]), "decode")


def test_no_mask_sliding_window_and_packed_sequences(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _hf_inputs(device, dtype, 1, 6, 2, 40, 40, 64, seed=7)
    out, _ = fa_hf.attention_forward(_module(), q, k, v, None, sliding_window=8)
    ins = [t.transpose(1, 2) for t in (q, k, v)]
    full, naive = (reference_attention(*ins, causal=True, window=(7, 0), dtype=t)[0] for t in (torch.float64, dtype))
    assert_close_rule(out, full, naive, "sliding window")
    cu = torch.tensor([0, 15, 40], dtype=torch.int32, device=device)
    out, _ = fa_hf.attention_forward(_module(), q, k, v, None, cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                                     max_length_q=25, max_length_k=25)
    for a, b in ((0, 15), (15, 40)):
        piece = [t[:, a:b] for t in ins]
        full, naive = (reference_attention(*piece, causal=True, dtype=t)[0] for t in (torch.float64, dtype))
        assert_close_rule(out[:, a:b], full, naive, "packed")


def test_static_cache_slots_past_the_mask_are_not_attended(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _hf_inputs(device, dtype, 2, 4, 2, 3, 40, 32, seed=9)  # 40 cache slots, 25 in the mask
    valid = torch.ones(2, 25, dtype=torch.long, device=device)
    valid[0, :4] = 0
    k[:, :, 25:] = float("nan")  # unused static-cache slots: must not be read
    out, _ = fa_hf.attention_forward(_module(), q, k, v, valid)
    full, naive = _expected(q, k[:, :, :25], v[:, :, :25], valid.bool(), causal=True)
    assert_close_rule(out, full, naive, "static cache")


def test_position_ids_that_restart_are_packed_sequences(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _hf_inputs(device, dtype, 1, 4, 2, 30, 30, 32, seed=10)
    position_ids = torch.cat([torch.arange(12), torch.arange(18)])[None].to(device)
    out, _ = fa_hf.attention_forward(_module(), q, k, v, None, position_ids=position_ids)
    ins = [t.transpose(1, 2) for t in (q, k, v)]
    for a, b in ((0, 12), (12, 30)):
        piece = [t[:, a:b] for t in ins]
        full, naive = (reference_attention(*piece, causal=True, dtype=t)[0] for t in (torch.float64, dtype))
        assert_close_rule(out[:, a:b], full, naive, "packed by position_ids")
    plain, _ = fa_hf.attention_forward(_module(), q, k, v, None, position_ids=torch.arange(30)[None].to(device))
    full, naive = (reference_attention(*ins, causal=True, dtype=t)[0] for t in (torch.float64, dtype))
    assert_close_rule(plain, full, naive, "one sequence")


def test_position_ids_are_read_once_per_tensor(device, monkeypatch):
    """Reading restarts syncs the device: a model's layers share one position_ids tensor,
    so it is read once; a new tensor, or the same one changed in place, is read again; a
    batch of more than one row never reads it (packing is batch 1 only)."""
    dtype = dtypes_for(device)[-1]
    q, k, v = _hf_inputs(device, dtype, 1, 4, 2, 30, 30, 32, seed=12)
    reads = []
    real = fa_hf._restarts
    monkeypatch.setattr(fa_hf, "_restarts", lambda pos: reads.append(1) or real(pos))
    position_ids = torch.cat([torch.arange(12), torch.arange(18)])[None].to(device)
    first, _ = fa_hf.attention_forward(_module(), q, k, v, None, position_ids=position_ids)
    again, _ = fa_hf.attention_forward(_module(), q, k, v, None, position_ids=position_ids)
    assert len(reads) == 1
    assert torch.equal(first, again)
    position_ids[0, 12:] = torch.arange(12, 30)  # in place: now one sequence
    plain, _ = fa_hf.attention_forward(_module(), q, k, v, None, position_ids=position_ids)
    assert len(reads) == 2
    ins = [t.transpose(1, 2) for t in (q, k, v)]
    full, naive = (reference_attention(*ins, causal=True, dtype=t)[0] for t in (torch.float64, dtype))
    assert_close_rule(plain, full, naive, "one sequence after an in-place change")
    fa_hf.attention_forward(_module(), q, k, v, None, position_ids=torch.arange(30)[None].to(device))
    assert len(reads) == 3
    qb, kb, vb = _hf_inputs(device, dtype, 2, 4, 2, 30, 30, 32, seed=13)
    fa_hf.attention_forward(_module(), qb, kb, vb, None, position_ids=torch.arange(30)[None].to(device))
    assert len(reads) == 3


def test_refusals(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _hf_inputs(device, dtype, 1, 2, 2, 8, 8, 16, seed=1)
    with pytest.raises(FlashAttnError, match="dropout"):
        fa_hf.attention_forward(_module(), q, k, v, None, dropout=0.1)
    with pytest.raises(FlashAttnError, match="s_aux"):
        fa_hf.attention_forward(_module(), q, k, v, None, s_aux=torch.zeros(2, device=device))
    with pytest.raises(FlashAttnError, match="output_attentions"):
        fa_hf.attention_forward(_module(), q, k, v, None, output_attentions=True)
    arbitrary = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(0)).to(device) > 0.5
    with pytest.raises(FlashAttnError, match="not a padding mask"):
        fa_hf.attention_forward(_module(), q, k, v, arbitrary)


def _tiny_llama(attn_implementation, device, dtype):
    from transformers import AutoModelForCausalLM, LlamaConfig
    # GQA 4/2, and a head dim of 36 (not a multiple of 8: padded inside flashattn).
    config = LlamaConfig(vocab_size=97, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=36, max_position_embeddings=256)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    return model.to(device=device, dtype=dtype)


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_llama_trains_and_generates_like_sdpa(device):
    fa_hf.register()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    ids = torch.randint(0, 97, (3, 45), generator=torch.Generator().manual_seed(1)).to(device)
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0  # right padding in training
    losses, grads = {}, {}
    for impl in ("sdpa", fa_hf.NAME):
        model = _tiny_llama(impl, device, dtype)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses[impl] = []
        for _ in range(2):
            loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
            loss.backward()
            grads[impl] = torch.cat([p.grad.flatten().float() for p in model.parameters()])
            optimizer.step()
            optimizer.zero_grad()
            losses[impl].append(loss.item())
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    for a, b in zip(losses["sdpa"], losses[fa_hf.NAME]):
        assert abs(a - b) <= tol * max(1.0, abs(a)), (losses["sdpa"], losses[fa_hf.NAME])
    rel = (grads["sdpa"] - grads[fa_hf.NAME]).norm() / grads["sdpa"].norm()
    assert rel <= (5e-2 if dtype == torch.bfloat16 else 1e-3), rel
    # Generation through flashattn (prefill, then decode steps over the KV cache, left-padded
    # prompt): its scores at every step equal SDPA's logits for the same tokens computed in
    # one full forward, so the check holds whatever tokens near-ties make it choose.
    prompt = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(2)).to(device)
    prompt_mask = torch.ones_like(prompt)
    prompt_mask[1, :5] = 0
    models = {impl: _tiny_llama(impl, device, dtype).eval() for impl in ("sdpa", fa_hf.NAME)}
    models[fa_hf.NAME].generation_config.eos_token_id = None
    with torch.no_grad():
        run = models[fa_hf.NAME].generate(input_ids=prompt, attention_mask=prompt_mask, max_new_tokens=8,
                                           do_sample=False, pad_token_id=0, output_scores=True,
                                           return_dict_in_generate=True)
        assert run.sequences.shape == (2, 20)
        full_mask = torch.cat([prompt_mask, torch.ones(2, 8, dtype=prompt_mask.dtype, device=device)], 1)
        logits = models["sdpa"](input_ids=run.sequences, attention_mask=full_mask).logits[:, 11:-1].float()
    scores = torch.stack(run.scores, 1).float()
    assert (scores - logits).abs().max().item() <= (3e-2 if dtype == torch.bfloat16 else 1e-4)
