import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa
q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
for _ in range(4):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        o = sdpa(q, k, v)
    o.backward(torch.randn_like(o))
torch.cuda.synchronize()
