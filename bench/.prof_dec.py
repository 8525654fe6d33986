import os, sys, torch
sys.path.insert(0, "python")
import flashattn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa
for b, s in ((1, 8192), (16, 8192)):
    q = torch.randn(b, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, 8, s, 128, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
    qb, kb, vb = (t.transpose(1, 2) for t in (q, k, v)); out = torch.empty_like(qb)
    for _ in range(3):
        flashattn.attention(qb, kb, vb, out=out)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            sdpa(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
