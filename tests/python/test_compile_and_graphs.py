"""The custom ops under torch.compile and CUDA graphs (GPU machine, torch >= 2.4):
torch.library.opcheck of each op (schema, fake implementation, autograd registration),
torch.compile(fullgraph=True) of a small attention block (a graph break would raise) with
outputs and gradients equal to eager, a compiled decode step that appends to a cache, and
CUDA-graph capture and replay of the forward, the backward and a decode step."""
import pytest
import torch

import flashattn
from flashattn import _ops

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
              pytest.mark.skipif(not flashattn.HAS_CUSTOM_OPS, reason="torch without torch.library.custom_op")]

DEVICE = "cuda"
DTYPE = torch.bfloat16


def _randn(*shape, requires_grad=False):
    return torch.randn(*shape, device=DEVICE, dtype=DTYPE, requires_grad=requires_grad)


def test_opcheck_every_op():
    q, k, v = _randn(2, 33, 4, 64, requires_grad=True), _randn(2, 47, 2, 64, requires_grad=True), \
        _randn(2, 47, 2, 64, requires_grad=True)
    fwd_args = (q, k, v, None, None, None, None, None, 0, 0, 0.125, True, -1, -1, 0.0, 0, False)
    torch.library.opcheck(_ops.fwd, fwd_args)
    out, lse = _ops.fwd(*fwd_args)
    torch.library.opcheck(_ops.bwd, (torch.randn_like(out), q.detach(), k.detach(), v.detach(), out.detach(),
                                     lse.detach(), None, None, None, None, 0, 0, 0.125, True, -1, -1, 0.0, False))
    k_cache, v_cache = _randn(2, 64, 2, 64), _randn(2, 64, 2, 64)
    seqlens = torch.tensor([5, 40], dtype=torch.int32, device=DEVICE)
    torch.library.opcheck(_ops.fwd_kvcache, (q.detach()[:, :1], k_cache, v_cache, _randn(2, 1, 2, 64),
                                             _randn(2, 1, 2, 64), seqlens, None, None, None, None, None, 0.125,
                                             True, -1, -1, 0.0, True, 0, True))
    parts = [_randn(2, 33, 4, 64) for _ in range(3)]
    lses = [torch.randn(2, 4, 33, device=DEVICE) for _ in range(3)]
    torch.library.opcheck(_ops.combine, (parts, lses))


def test_eager_shortcut_equals_the_custom_op():
    q, k, v = _randn(2, 33, 4, 64), _randn(2, 47, 2, 64), _randn(2, 47, 2, 64)
    with torch.no_grad():
        direct = flashattn.flash_attn_func(q, k, v, causal=True)  # the implementation, no op layer
    through_op, _ = _ops.fwd(q, k, v, None, None, None, None, None, 0, 0, 0.0, True, -1, -1, 0.0, 0, False)
    assert direct.grad_fn is None and torch.equal(direct, through_op)


class Block(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.qkv = torch.nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                                     self.kv_heads * self.head_dim], dim=-1)
        q = q.view(b, s, self.heads, self.head_dim)
        k, v = (t.view(b, s, self.kv_heads, self.head_dim) for t in (k, v))
        return self.proj(flashattn.flash_attn_func(q, k, v, causal=True).reshape(b, s, -1))


def test_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    block = Block(480, 8, 2).to(DEVICE, DTYPE)  # head dim 60: padded to 64 inside the graph
    x = _randn(2, 77, 480)
    eager_out = block(x)
    eager_out.float().square().sum().backward()
    eager_grads = [p.grad.clone() for p in block.parameters()]
    block.zero_grad()
    compiled = torch.compile(block, fullgraph=True)
    out = compiled(x)
    out.float().square().sum().backward()
    torch.testing.assert_close(out, eager_out, rtol=0, atol=0)
    for got, want in zip((p.grad for p in block.parameters()), eager_grads):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


def test_compiled_decode_step_appends_to_the_cache():
    k_cache, v_cache = torch.zeros(2, 64, 2, 64, device=DEVICE, dtype=DTYPE), torch.zeros(2, 64, 2, 64, device=DEVICE,
                                                                                            dtype=DTYPE)
    q, k, v = _randn(2, 1, 8, 64), _randn(2, 1, 2, 64), _randn(2, 1, 2, 64)
    seqlens = torch.tensor([0, 10], dtype=torch.int32, device=DEVICE)

    def step(q, k, v, seqlens):
        return flashattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=seqlens, causal=True)

    eager = step(q, k, v, seqlens)
    k_cache.zero_()
    v_cache.zero_()
    compiled = torch.compile(step, fullgraph=True)(q, k, v, seqlens)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
    assert torch.equal(k_cache[0, 0], k[0, 0]) and torch.equal(v_cache[1, 10], v[1, 0])


def test_cuda_graph_replays_forward_backward_and_decode():
    q, k, v = _randn(2, 65, 4, 64), _randn(2, 65, 2, 64), _randn(2, 65, 2, 64)
    dout = _randn(2, 65, 4, 64)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph (contexts, allocator pools)
        flashattn.flash_attn_func(*leaves, causal=True).backward(dout)
    torch.cuda.current_stream().wait_stream(stream)
    for t in leaves:
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashattn.flash_attn_func(*leaves, causal=True)
        out.backward(dout)
    for seed in (1, 2):
        torch.manual_seed(seed)
        for t in leaves:
            t.data.copy_(torch.randn_like(t))
        graph.replay()
        fresh = [t.detach().clone().requires_grad_(True) for t in leaves]
        want = flashattn.flash_attn_func(*fresh, causal=True)
        want.backward(dout)
        torch.testing.assert_close(out, want, rtol=0, atol=0)
        for got, ref in zip(leaves, fresh):
            torch.testing.assert_close(got.grad, ref.grad, rtol=0, atol=1e-2)

    k_cache, v_cache = torch.zeros(2, 64, 2, 64, device=DEVICE, dtype=DTYPE), torch.zeros(2, 64, 2, 64, device=DEVICE,
                                                                                            dtype=DTYPE)
    q1, k1, v1 = _randn(2, 1, 4, 64), _randn(2, 1, 2, 64), _randn(2, 1, 2, 64)
    seqlens = torch.tensor([3, 20], dtype=torch.int32, device=DEVICE)
    flashattn.flash_attn_with_kvcache(q1, k_cache, v_cache, k1, v1, cache_seqlens=seqlens)  # warm-up
    decode = torch.cuda.CUDAGraph()
    with torch.cuda.graph(decode):
        step_out = flashattn.flash_attn_with_kvcache(q1, k_cache, v_cache, k1, v1, cache_seqlens=seqlens)
    for _ in range(3):  # each replay appends at the position seqlens holds now
        seqlens += 1
        q1.copy_(torch.randn_like(q1))
        decode.replay()
        n = [int(x) for x in seqlens]
        torch.cuda.synchronize()
        for i in range(2):
            assert torch.equal(k_cache[i, n[i]], k1[i, 0])
        want = flashattn.flash_attn_with_kvcache(q1, k_cache.clone(), v_cache.clone(),
                                                 cache_seqlens=seqlens + 1)
        torch.testing.assert_close(step_out, want, rtol=0, atol=1e-2)
