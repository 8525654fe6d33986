"""Training through flashattn from PyTorch (GPU machine): gradients of flash_attn_func and
of one training step of a small attention block against an fp64 reference, with the
tolerance rule of the C tests: error <= 3 x (error of a naive same-precision attention)
+ 1e-5. Run: FLASHATTN_LIBRARY=... python3 -m pytest tests/python -q"""
import math

import pytest
import torch

import flashattn  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def naive_attention(q, k, v, causal):
    """Attention in the inputs' own precision, every intermediate rounded (BSHD)."""
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    if kt.shape[1] != qt.shape[1]:
        rep = qt.shape[1] // kt.shape[1]
        kt, vt = kt.repeat_interleave(rep, 1), vt.repeat_interleave(rep, 1)
    s = (qt @ kt.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        sq, sk = s.shape[-2], s.shape[-1]
        keep = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)
        s = s.masked_fill(~keep, float("-inf"))
    # A row with no visible key has output 0 (the library's contract), not softmax's NaN.
    p = torch.softmax(s if s.dtype == torch.float64 else s.float(), dim=-1).nan_to_num(0.0).to(q.dtype)
    return (p @ vt).transpose(1, 2)


def grads(fn, q, k, v, dout):
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    fn(q, k, v).backward(dout)
    return q.grad, k.grad, v.grad


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 333, 517, 6, 2, 64), (1, 1024, 1024, 4, 4, 128), (3, 200, 120, 6, 1, 96)])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_fp64(dtype, shape, causal):
    b, sq, sk, h, hk, d = shape
    gen = torch.Generator(device="cuda").manual_seed(sq * 7 + d)
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, generator=gen)
    dout = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, generator=gen)
    ours = grads(lambda q, k, v: flashattn.flash_attn_func(q, k, v, causal=causal), q, k, v, dout)
    exact = grads(lambda q, k, v: naive_attention(q, k, v, causal), q.double(), k.double(), v.double(),
                  dout.double())
    naive = grads(lambda q, k, v: naive_attention(q, k, v, causal), q, k, v, dout)
    for name, g, e, n in zip("qkv", ours, exact, naive):
        err = (g.double() - e).abs().max().item()
        bound = 3 * (n.double() - e).abs().max().item() + 1e-5
        assert torch.isfinite(g).all(), name
        assert err <= bound, "d%s error %.3g > bound %.3g" % (name, err, bound)


class AttentionBlock(torch.nn.Module):
    def __init__(self, dim, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, dim // self.heads).unbind(2)
        return self.proj(self.attend(q, k, v).reshape(b, s, dim))


def test_training_step_matches_sdpa():
    torch.manual_seed(0)
    dim, heads = 256, 4
    ours = AttentionBlock(dim, heads, lambda q, k, v: flashattn.flash_attn_func(q, k, v, causal=True))
    ours = ours.cuda().to(torch.bfloat16)
    ref = AttentionBlock(dim, heads, lambda q, k, v: naive_attention(q, k, v, True)).cuda().double()
    naive = AttentionBlock(dim, heads, lambda q, k, v: naive_attention(q, k, v, True)).cuda().to(torch.bfloat16)
    ref.load_state_dict({n: t.double() for n, t in ours.state_dict().items()})
    naive.load_state_dict(ours.state_dict())
    x = torch.randn(2, 300, dim, device="cuda")
    target = torch.randn(2, 300, dim, device="cuda")
    for model, dt in ((ours, torch.bfloat16), (ref, torch.float64), (naive, torch.bfloat16)):
        loss = torch.nn.functional.mse_loss(model(x.to(dt)).double(), target.double())
        loss.backward()
    for (name, p), pr, pn in zip(ours.named_parameters(), ref.parameters(), naive.parameters()):
        err = (p.grad.double() - pr.grad).abs().max().item()
        bound = 3 * (pn.grad.double() - pr.grad).abs().max().item() + 1e-5
        assert err <= bound, "%s: error %.3g > bound %.3g" % (name, err, bound)
    opt = torch.optim.SGD(ours.parameters(), lr=0.1)
    opt.step()  # the step itself runs: parameters stay finite
    assert all(torch.isfinite(p).all() for p in ours.parameters())
