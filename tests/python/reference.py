"""The float64 reference the Python tests compare with, and their tolerance rule.

reference_attention computes the library's semantics (include/flashattn.h) in float64 on
BSHD tensors: bottom-right aligned causal and windows, softcap, ALiBi, GQA, rows without a
visible key giving out 0 and LSE -inf. The rule is the C tests': an error at most
3 x the error of naive attention computed in the inputs' own precision, plus 1e-5."""

import torch


def _visible(s_q, s_k, causal, window, device):
    left, right = window
    if causal:
        right = 0 if right < 0 else min(right, 0)
    i = torch.arange(s_q, device=device)[:, None] + (s_k - s_q)
    j = torch.arange(s_k, device=device)[None, :]
    keep = torch.ones(s_q, s_k, dtype=torch.bool, device=device)
    if left >= 0:
        keep &= j >= i - left
    if right >= 0:
        keep &= j <= i + right
    return keep, (i - j).abs()


def reference_attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None, scale=None,
                        dtype=torch.float64):
    """(out BSHD, lse (b, h, s_q)) in `dtype` (float64: the reference; the inputs' dtype:
    the naive same-precision attention the rule measures against)."""
    b, s_q, h, d = q.shape
    s_k, h_k = k.shape[1], k.shape[2]
    scale = d ** -0.5 if scale is None else scale
    qt, kt, vt = (t.to(dtype).transpose(1, 2) for t in (q, k, v))
    kt, vt = kt.repeat_interleave(h // h_k, 1), vt.repeat_interleave(h // h_k, 1)
    s = (qt @ kt.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    keep, distance = _visible(s_q, s_k, causal, window, q.device)
    if alibi_slopes is not None:
        slopes = alibi_slopes.to(dtype).reshape(-1 if alibi_slopes.dim() == 2 else 1, h)
        s = s - slopes.reshape(slopes.shape[0], h, 1, 1) * distance.to(dtype)
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s.double(), dim=-1)
    p = torch.softmax(s.double(), dim=-1).nan_to_num(0.0).to(dtype)
    out = (p @ vt).transpose(1, 2)
    return out, lse.to(torch.float64)


def assert_close_rule(ours, reference, naive, what=""):
    """|ours - reference| <= 3 |naive - reference| + 1e-5 (max over the tensor), finite."""
    ours, reference, naive = (t.detach().double().cpu() for t in (ours, reference, naive))
    assert torch.isfinite(ours).all(), "%s: non-finite values" % what
    if ours.numel() == 0:
        return
    err = (ours - reference).abs().max().item()
    allowed = 3 * (naive - reference).abs().max().item() + 1e-5
    assert err <= allowed, "%s: error %.3g > allowed %.3g" % (what, err, allowed)


def assert_lse(ours, reference, what="lse"):
    """Finite rows within 1e-3 (fp32 LSE of scores), empty rows -inf."""
    ours, reference = ours.detach().double().cpu(), reference.cpu()
    empty = torch.isinf(reference)
    assert (ours[empty] == float("-inf")).all(), "%s: an empty row is not -inf" % what
    if (~empty).any():
        err = (ours[~empty] - reference[~empty]).abs().max().item()
        assert err <= 1e-3 * max(1.0, reference[~empty].abs().max().item()), "%s: error %.3g" % (what, err)


def dtypes_for(device):
    """Input dtypes each backend takes: fp32 on the CPU only, fp16 and bf16 everywhere."""
    return [torch.float32, torch.bfloat16] if device.type == "cpu" else [torch.float16, torch.bfloat16]


def randn(shape, device, dtype, gen, requires_grad=False):
    t = torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    return t.requires_grad_(requires_grad)


def grads(fn, inputs, dout):
    """(output, gradients of inputs) of fn(*inputs) against dout, on fresh leaves."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    out.backward(dout.to(out.dtype))
    return out, [t.grad for t in leaves]


def reference_and_naive(inputs, dout, **options):
    """((out, grads) in float64, (out, grads) of the same-precision attention): the rule's
    two sides for the forward and the backward."""
    full = grads(lambda q, k, v: reference_attention(q, k, v, **options)[0], [t.double() for t in inputs], dout)
    naive = grads(lambda q, k, v: reference_attention(q, k, v, dtype=q.dtype, **options)[0], inputs, dout)
    return full, naive
