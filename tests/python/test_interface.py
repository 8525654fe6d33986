"""flash_attn's API (python/flashattn/interface.py) against the float64 reference, on the
CPU backend always and on CUDA when present: every function, forward and gradients, head
dims that are not multiples of 8 (padded), sizes that are not tile multiples, and the
named errors for what flashattn does not do. Outputs the library writes into (caches,
out=) are poisoned first."""
import pytest
import torch

import flashattn
from flashattn import FlashAttnError
from reference import assert_close_rule, assert_lse, dtypes_for, randn, reference_and_naive, reference_attention

# (b, s_q, s_k, h, h_k, d): GQA 3 and 1, MQA, s_q > s_k, odd lengths, head dims 59/111 padded.
SHAPES = [(2, 37, 45, 6, 2, 64), (1, 70, 33, 4, 4, 59), (2, 17, 129, 3, 1, 111), (1, 1, 77, 8, 2, 128)]
OPTIONS = [dict(causal=False), dict(causal=True), dict(window=(9, 3)), dict(causal=True, softcap=5.0),
           dict(alibi=True)]


def _inputs(device, dtype, shape, seed, grad=False):
    b, s_q, s_k, h, h_k, d = shape
    gen = torch.Generator().manual_seed(seed)
    return [randn(s, device, dtype, gen, grad) for s in ((b, s_q, h, d), (b, s_k, h_k, d), (b, s_k, h_k, d))]


def _reference_options(options, h, device):
    opts = {k: v for k, v in options.items() if k != "alibi"}
    if options.get("alibi"):
        opts["alibi_slopes"] = torch.linspace(0.1, 0.9, h, device=device)
    return opts


def _our_options(ref_opts):
    ours = dict(ref_opts)
    if "window" in ours:
        ours["window_size"] = ours.pop("window")
    return ours


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(o) or "none")
def test_flash_attn_func_forward_backward_and_lse(device, shape, options):
    for dtype in dtypes_for(device):
        q, k, v = _inputs(device, dtype, shape, seed=sum(shape))
        ref_opts = _reference_options(options, shape[3], device)
        dout = randn(q.shape, device, dtype, torch.Generator().manual_seed(5))
        (full_out, full_grads), (naive_out, naive_grads) = reference_and_naive([q, k, v], dout, **ref_opts)
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out, lse = flashattn.flash_attn_func(*leaves, return_softmax_lse=True, **_our_options(ref_opts))
        assert out.shape == q.shape and out.dtype == dtype and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
        assert_close_rule(out, full_out, naive_out, "out %s" % dtype)
        assert_lse(lse, reference_attention(q, k, v, **ref_opts)[1])
        out.backward(dout)
        for name, ours, full, naive in zip("qkv", (t.grad for t in leaves), full_grads, naive_grads):
            assert ours.shape == full.shape
            assert_close_rule(ours, full, naive, "d%s %s" % (name, dtype))


def test_packed_variants_equal_the_unpacked_call(device):
    dtype = dtypes_for(device)[-1]
    gen = torch.Generator().manual_seed(3)
    qkv = randn((2, 41, 3, 4, 59), device, dtype, gen, True)
    dout = randn((2, 41, 4, 59), device, dtype, gen)
    out = flashattn.flash_attn_qkvpacked_func(qkv, causal=True)
    out.backward(dout)
    (full_out, full_grads), (naive_out, naive_grads) = reference_and_naive(
        list(qkv.detach().unbind(2)), dout, causal=True)
    assert_close_rule(out, full_out, naive_out, "qkvpacked out")
    for i, name in enumerate("qkv"):
        assert_close_rule(qkv.grad[:, :, i], full_grads[i], naive_grads[i], "qkvpacked d%s" % name)
    q = randn((2, 13, 4, 64), device, dtype, gen)
    kv = randn((2, 50, 2, 2, 64), device, dtype, gen)
    full_out, naive_out = (reference_attention(q, kv[:, :, 0], kv[:, :, 1], dtype=t)[0] for t in (torch.float64, dtype))
    assert_close_rule(flashattn.flash_attn_kvpacked_func(q, kv), full_out, naive_out, "kvpacked out")


def _varlen_batch(device, dtype, lengths_q, lengths_k, h, h_k, d, seed, grad=False):
    gen = torch.Generator().manual_seed(seed)
    q = randn((sum(lengths_q), h, d), device, dtype, gen, grad)
    k = randn((sum(lengths_k), h_k, d), device, dtype, gen, grad)
    v = randn((sum(lengths_k), h_k, d), device, dtype, gen, grad)
    cu = lambda ls: torch.tensor([0] + list(torch.tensor(ls).cumsum(0)), dtype=torch.int32, device=device)  # noqa
    return q, k, v, cu(lengths_q), cu(lengths_k)


def _per_sequence(t, lengths):
    return list(t.split(list(lengths), dim=0))


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_with_empty_sequences_forward_and_backward(device, causal):
    lengths_q, lengths_k = (5, 0, 33, 1), (9, 4, 31, 0)
    for dtype in dtypes_for(device):
        q, k, v, cu_q, cu_k = _varlen_batch(device, dtype, lengths_q, lengths_k, 6, 2, 40, seed=11)
        dout = randn(q.shape, device, dtype, torch.Generator().manual_seed(2))
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out, lse = flashattn.flash_attn_varlen_func(*leaves, cu_q, cu_k, max(lengths_q), max(lengths_k),
                                                    causal=causal, return_softmax_lse=True)
        assert lse.shape == (6, sum(lengths_q))
        out.backward(dout)
        pieces = zip(_per_sequence(q, lengths_q), _per_sequence(k, lengths_k), _per_sequence(v, lengths_k),
                     _per_sequence(dout, lengths_q), _per_sequence(out, lengths_q),
                     _per_sequence(lse.t(), lengths_q), _per_sequence(leaves[0].grad, lengths_q),
                     _per_sequence(leaves[1].grad, lengths_k), _per_sequence(leaves[2].grad, lengths_k))
        for qi, ki, vi, doi, oi, li, dqi, dki, dvi in pieces:
            if qi.shape[0] == 0:
                continue
            ins = [t.unsqueeze(0) for t in (qi, ki, vi)]
            (full_out, full_grads), (naive_out, naive_grads) = reference_and_naive(ins, doi.unsqueeze(0), causal=causal)
            assert_close_rule(oi.unsqueeze(0), full_out, naive_out, "varlen out")
            assert_lse(li.t().unsqueeze(0), reference_attention(*ins, causal=causal)[1], "varlen lse")
            for ours, full, naive in zip((dqi, dki, dvi), full_grads, naive_grads):
                assert_close_rule(ours.unsqueeze(0), full, naive, "varlen grad")


def test_varlen_packed_variants_and_seqused_k(device):
    dtype = dtypes_for(device)[-1]
    lengths = (7, 19, 1)
    q, k, v, cu, _ = _varlen_batch(device, dtype, lengths, lengths, 4, 4, 24, seed=4)
    qkv = torch.stack([q, k, v], dim=1)
    out = flashattn.flash_attn_varlen_qkvpacked_func(qkv, cu, max(lengths), causal=True)
    out_kv = flashattn.flash_attn_varlen_kvpacked_func(q, torch.stack([k, v], 1), cu, cu, max(lengths),
                                                       max(lengths), causal=True)
    used = torch.tensor([3, 19, 0], dtype=torch.int32, device=device)
    out_used = flashattn.flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), seqused_k=used)
    for i, (qi, ki, vi) in enumerate(zip(*(_per_sequence(t, lengths) for t in (q, k, v)))):
        ins = [t.unsqueeze(0) for t in (qi, ki, vi)]
        full, naive = (reference_attention(*ins, causal=True, dtype=t)[0] for t in (torch.float64, dtype))
        assert_close_rule(_per_sequence(out, lengths)[i].unsqueeze(0), full, naive, "varlen qkvpacked")
        assert_close_rule(_per_sequence(out_kv, lengths)[i].unsqueeze(0), full, naive, "varlen kvpacked")
        n = int(used[i])
        ins = [ins[0], ins[1][:, :n], ins[2][:, :n]]
        full, naive = (reference_attention(*ins, dtype=t)[0] for t in (torch.float64, dtype))
        assert_close_rule(_per_sequence(out_used, lengths)[i].unsqueeze(0), full, naive, "seqused_k")


def _paged(cache, page, pages_total, gen):
    """A page pool holding cache (b, s, h_k, d) in shuffled pages, and its block table."""
    b, s, h_k, d = cache.shape
    per_seq = -(-s // page)
    order = torch.randperm(pages_total, generator=gen)[: b * per_seq].reshape(b, per_seq)
    pool = torch.full((pages_total, page, h_k, d), float("nan"), dtype=cache.dtype, device=cache.device)
    padded = torch.nn.functional.pad(cache, (0, 0, 0, 0, 0, per_seq * page - s))
    pool[order.flatten().to(cache.device)] = padded.reshape(b * per_seq, page, h_k, d)
    return pool, order.to(device=cache.device, dtype=torch.int32)


def test_varlen_over_a_paged_pool_and_no_backward_through_it(device):
    dtype = dtypes_for(device)[-1]
    lengths_q, lengths_k = (3, 8), (40, 21)
    gen = torch.Generator().manual_seed(9)
    q = randn((sum(lengths_q), 4, 32), device, dtype, gen)
    k, v = (randn((2, 40, 2, 32), device, dtype, gen) for _ in range(2))
    k_pool, table = _paged(k, 16, 9, gen)
    v_pool = torch.full_like(k_pool, float("nan"))
    v_pool[table.flatten().long()] = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, 8)).reshape(-1, 16, 2, 32)
    cu_q = torch.tensor([0, 3, 11], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 40, 61], dtype=torch.int32, device=device)
    out = flashattn.flash_attn_varlen_func(q, k_pool, v_pool, cu_q, cu_k, 8, 40, causal=True, block_table=table)
    for i, qi in enumerate(_per_sequence(q, lengths_q)):
        n = lengths_k[i]
        ins = [qi.unsqueeze(0), k[i:i + 1, :n], v[i:i + 1, :n]]
        full, naive = (reference_attention(*ins, causal=True, dtype=t)[0] for t in (torch.float64, dtype))
        assert_close_rule(_per_sequence(out, lengths_q)[i].unsqueeze(0), full, naive, "paged varlen")
    q.requires_grad_(True)
    out = flashattn.flash_attn_varlen_func(q, k_pool, v_pool, cu_q, cu_k, 8, 40, block_table=table)
    with pytest.raises(FlashAttnError, match="block_table"):
        out.sum().backward()


def _rotate(x, cos, sin, interleaved):
    """Rotary embedding of x (b, s, h, d) on its first 2 * cos.shape[-1] dims (float64)."""
    r = 2 * cos.shape[-1]
    x, rest = x[..., :r].double(), x[..., r:].double()
    cos, sin = cos.double()[None, :, None, :], sin.double()[None, :, None, :]
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.cat([torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2), rest], -1)
    a, b = x[..., : r // 2], x[..., r // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos, rest], -1)


@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("rotary", [None, "interleaved", "halves"])
def test_with_kvcache_appends_and_attends(device, paged, rotary):
    dtype = dtypes_for(device)[-1]
    gen = torch.Generator().manual_seed(21)
    b, s_new, h, h_k, d, capacity = 3, 2, 6, 2, 64, 48
    cache_seqlens = torch.tensor([5, 0, 30], dtype=torch.int32, device=device)
    k_cache, v_cache = (randn((b, capacity, h_k, d), device, dtype, gen) for _ in range(2))
    q = randn((b, s_new, h, d), device, dtype, gen)
    k_new, v_new = (randn((b, s_new, h_k, d), device, dtype, gen) for _ in range(2))
    cos = sin = None
    if rotary:
        angles = torch.rand(capacity, 16, generator=gen) * 6.28
        cos, sin = angles.cos().to(device, dtype), angles.sin().to(device, dtype)
    if paged:
        k_store, table = _paged(k_cache, 16, 12, gen)
        v_store = torch.zeros_like(k_store)
        v_store[table.flatten().long()] = v_cache.reshape(-1, 16, h_k, d)
    else:
        k_store, v_store, table = k_cache.clone(), v_cache.clone(), None
    out, lse = flashattn.flash_attn_with_kvcache(
        q, k_store, v_store, k_new, v_new, rotary_cos=cos, rotary_sin=sin, cache_seqlens=cache_seqlens,
        block_table=table, causal=True, rotary_interleaved=rotary == "interleaved", return_softmax_lse=True)
    stored_k = k_store[table.long()].reshape(b, capacity, h_k, d) if paged else k_store
    stored_v = v_store[table.long()].reshape(b, capacity, h_k, d) if paged else v_store
    for i in range(b):
        n = int(cache_seqlens[i])
        ki, qi = k_new[i:i + 1], q[i:i + 1]
        if rotary:
            ki = _rotate(ki, cos[n:n + s_new], sin[n:n + s_new], rotary == "interleaved").to(dtype)
            qi = _rotate(qi, cos[n:n + s_new], sin[n:n + s_new], rotary == "interleaved").to(dtype)
        torch.testing.assert_close(stored_k[i, n:n + s_new], ki[0], rtol=0, atol=1e-2)
        assert torch.equal(stored_v[i, n:n + s_new], v_new[i])
        assert torch.equal(stored_k[i, :n], k_cache[i, :n])
        keys = torch.cat([k_cache[i:i + 1, :n], ki], 1)
        values = torch.cat([v_cache[i:i + 1, :n], v_new[i:i + 1]], 1)
        (full, full_lse), (naive, _) = (reference_attention(qi, keys, values, causal=True, dtype=t)
                                        for t in (torch.float64, dtype))
        assert_close_rule(out[i:i + 1], full, naive, "kvcache out")
        assert_lse(lse[i:i + 1], full_lse, "kvcache lse")


def test_with_kvcache_int_and_absent_seqlens_and_batch_index(device):
    dtype = dtypes_for(device)[-1]
    gen = torch.Generator().manual_seed(8)
    k_cache, v_cache = (randn((4, 20, 1, 16), device, dtype, gen) for _ in range(2))
    q = randn((2, 1, 4, 16), device, dtype, gen)
    out_int = flashattn.flash_attn_with_kvcache(q, k_cache[:2], v_cache[:2], cache_seqlens=11)
    out_all = flashattn.flash_attn_with_kvcache(q, k_cache[:2], v_cache[:2])
    idx = torch.tensor([3, 1], dtype=torch.int32, device=device)
    out_idx = flashattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=7, cache_batch_idx=idx)
    for i in range(2):
        for ours, row, n in ((out_int, i, 11), (out_all, i, 20), (out_idx, int(idx[i]), 7)):
            ins = (q[i:i + 1], k_cache[row:row + 1, :n], v_cache[row:row + 1, :n])
            full, naive = (reference_attention(*ins, dtype=t)[0] for t in (torch.float64, dtype))
            assert_close_rule(ours[i:i + 1], full, naive, "kvcache seqlens")


@pytest.mark.parametrize("varlen", [False, True])
def test_combine_merges_partials_over_disjoint_keys(device, varlen):
    dtype = dtypes_for(device)[-1]
    q, k, v = _inputs(device, dtype, (2, 9, 90, 4, 2, 64), seed=31)
    whole = flashattn.flash_attn_func(q, k, v)
    parts = [flashattn.flash_attn_func(q, k[:, a:b], v[:, a:b], return_softmax_lse=True)
             for a, b in ((0, 30), (30, 31), (31, 90))]
    outs = torch.stack([o for o, _ in parts])              # (n, b, s, h, d)
    lses = torch.stack([l.transpose(1, 2) for _, l in parts])  # flash_attn 3: (n, b, s, h)
    if varlen:
        outs, lses = outs.flatten(1, 2), lses.flatten(1, 2)
    out, lse = flashattn.flash_attn_combine(outs, lses)
    full, naive = (reference_attention(q, k, v, dtype=t)[0] for t in (torch.float64, dtype))
    full_lse = reference_attention(q, k, v)[1].transpose(1, 2)
    if varlen:
        full, naive, full_lse = full.flatten(0, 1), naive.flatten(0, 1), full_lse.flatten(0, 1)
    assert_close_rule(out, full, naive, "combine out")
    assert_lse(lse, full_lse, "combine lse")
    given = torch.full_like(out, float("nan"))
    merged, _ = flashattn.flash_attn_combine(list(outs), list(lses), out=given)
    assert merged is given and torch.equal(given, out)
    # The merge of three partials equals the one call over all keys, to bf16/fp16 rounding.
    torch.testing.assert_close(out.float(), whole.reshape(out.shape).float(), rtol=0, atol=2e-2)


def test_unsupported_arguments_are_named(device):
    q, k, v = _inputs(device, dtypes_for(device)[-1], (1, 8, 8, 2, 2, 16), seed=1)
    with pytest.raises(FlashAttnError, match="dropout_p"):
        flashattn.flash_attn_func(q, k, v, dropout_p=0.1)
    out, lse, probs = flashattn.flash_attn_func(q, k, v, return_attn_probs=True)  # flash_attn 2 without dropout
    assert probs is None and lse.shape == (1, 2, 8) and torch.equal(out, flashattn.flash_attn_func(q, k, v))
    with pytest.raises(FlashAttnError, match="softmax_scale"):
        flashattn.flash_attn_func(q, k, v, softmax_scale=0.0)
    with pytest.raises(FlashAttnError, match="dropout_p"):
        flashattn.flash_attn_varlen_qkvpacked_func(torch.stack([q[0], k[0], v[0]], 1), None, 8, dropout_p=0.5)
    seqlens = torch.zeros(1, dtype=torch.int32, device=device)
    with pytest.raises(FlashAttnError, match="cache_leftpad"):
        flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens, cache_leftpad=seqlens)
    q59, k59, v59 = _inputs(device, dtypes_for(device)[-1], (1, 8, 8, 2, 2, 59), seed=1)
    with pytest.raises(FlashAttnError, match="multiple of 8"):
        flashattn.flash_attn_with_kvcache(q59, k59, v59, cache_seqlens=4)
    with pytest.raises(FlashAttnError, match="cache_seqlens"):
        flashattn.flash_attn_with_kvcache(q, k, v, k=k[:, :1], v=v[:, :1])


def test_inputs_whose_last_dim_is_strided_are_copied(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _inputs(device, dtype, (1, 9, 12, 2, 2, 16), seed=6)
    strided = [t.transpose(-1, -2).contiguous().transpose(-1, -2) for t in (q, k, v)]
    assert strided[0].stride(-1) != 1
    assert torch.equal(flashattn.flash_attn_func(*strided), flashattn.flash_attn_func(q, k, v))


def test_backward_of_any_gradient_layout_autograd_hands_it(device):
    """The gradient of a slice of a wider tensor (rows not a multiple of 8 elements apart)
    and of a broadcast (stride 0) reach the backward as autograd made them: it copies
    what the GPU kernels cannot read and reads the rest in place."""
    from flashattn import _ops
    dtype = dtypes_for(device)[-1]
    q, k, v = _inputs(device, dtype, (1, 9, 12, 2, 2, 16), seed=7)
    wide = torch.empty(1, 9, 2, 20, device=device, dtype=dtype)
    assert not _ops._rows_addressable(wide[..., :16])
    assert not _ops._rows_addressable(torch.zeros(1, 1, 2, 16, device=device, dtype=dtype).expand(1, 9, 2, 16))
    assert _ops._rows_addressable(torch.zeros(1, 2, 9, 16, device=device, dtype=dtype).transpose(1, 2))
    grads = []
    for shape_grad in ("slice", "broadcast", "plain"):
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        out = flashattn.flash_attn_func(*leaves)
        if shape_grad == "slice":
            loss = torch.cat([out, torch.zeros_like(out[..., :4])], -1).float().sum()
        elif shape_grad == "broadcast":
            loss = out.float().mean(dim=1).sum() * 9
        else:
            loss = out.float().sum()
        grads.append(torch.autograd.grad(loss, leaves))
    for g in grads[:2]:
        for a, b in zip(g, grads[2]):
            torch.testing.assert_close(a, b)


def test_library_errors_name_the_status_and_write_nothing(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _inputs(device, dtype, (1, 8, 8, 3, 2, 16), seed=1)  # 3 heads over 2 kv heads
    with pytest.raises(FlashAttnError, match="FA_ERR_"):
        flashattn.flash_attn_func(q, k, v)
    q, k, v = _inputs(device, dtype, (1, 8, 8, 2, 2, 16), seed=1)
    cu = torch.tensor([0, 8], dtype=torch.int64, device=device)
    with pytest.raises(FlashAttnError, match="int32"):
        flashattn.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 8, 8)
    k_cache = torch.full((1, 8, 2, 16), 7.0, dtype=dtype, device=device)
    v_cache = k_cache.clone()
    too_long = torch.tensor([8], dtype=torch.int32, device=device)  # no room for the new key
    with pytest.raises(FlashAttnError, match="FA_ERR_"):
        # The CPU checks on the host and raises here; a GPU checks on the device, and the
        # report comes from the next call or from check_device_error.
        flashattn.flash_attn_with_kvcache(q[:, :1], k_cache, v_cache, k=k[:, :1], v=v[:, :1],
                                          cache_seqlens=too_long)
        flashattn.check_device_error(device)
    assert (k_cache == 7.0).all() and (v_cache == 7.0).all()


def test_deterministic_backward_is_bitwise_repeatable(device):
    dtype = dtypes_for(device)[-1]
    q, k, v = _inputs(device, dtype, (2, 65, 130, 4, 2, 64), seed=41)
    dout = randn(q.shape, device, dtype, torch.Generator().manual_seed(3))
    runs = []
    for _ in range(3):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        flashattn.flash_attn_func(*leaves, causal=True, deterministic=True).backward(dout)
        runs.append([t.grad for t in leaves])
    for later in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], later))
