#!/usr/bin/env python3
"""llama_step.py - issue 14's real-model measure: a Llama-style model from Hugging Face
transformers (8 layers, hidden 2048, 16 query heads over 4 KV heads of head dim 128,
bf16, random weights) trained through flashattn (registered with transformers'
AttentionInterface: flashattn.integrations.transformers) against
attn_implementation="sdpa" (PyTorch's own choice of SDPA backend), side by side in one
process on the same weights and tokens.

Per shape (batch x sequence): the loss and gradient norm of one step of each (they must
agree), then the median time of a training step (forward, loss, backward, AdamW step)
over --steps steps after --warmup (every shape from the same initial weights), the two
models alternating step by step so that
clocks and temperature drift hit both alike. Prints one table row per shape with the
ratio flashattn / sdpa (below 1: flashattn faster).

Usage: python3 bench/llama_step.py [--shapes 4x2048,1x8192] [--steps 10] [--warmup 3]
Needs a CUDA device, torch, transformers and the flashattn package (FLASHATTN_LIBRARY or
a built tree).
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashattn.integrations.transformers as fa_hf  # noqa: E402


def make_model(attn_implementation, state=None):
    from transformers import AutoModelForCausalLM, LlamaConfig
    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=16384)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation,
                                             torch_dtype=torch.bfloat16).cuda()
    if state is not None:
        model.load_state_dict(state)
    return model


def loss_and_grad_norm(model, tokens):
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in model.parameters() if p.grad is not None))
    model.zero_grad(set_to_none=True)
    return loss.item(), norm.item()


def step(model, optimizer, tokens):
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def timed_step(model, optimizer, tokens):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step(model, optimizer, tokens)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4x2048,1x8192")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    name = fa_hf.register()
    ref = make_model("sdpa")
    ours = make_model(name, ref.state_dict())
    models = {"sdpa": ref, "flashattn": ours}
    initial = {k: v.detach().clone() for k, v in ref.state_dict().items()}
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, Llama 8 x 2048, GQA 16/4, d128, bf16")
    print("| batch x seq | loss sdpa / flashattn | grad norm sdpa / flashattn | step ms sdpa | step ms flashattn "
          "| flashattn / sdpa |")
    print("|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        batch, seq = (int(x) for x in shape.split("x"))
        gen = torch.Generator(device="cuda").manual_seed(batch * 100003 + seq)
        tokens = torch.randint(0, 32000, (batch, seq), device="cuda", generator=gen)
        for m in models.values():  # each shape starts from the same weights
            m.load_state_dict(initial)
        checks = {k: loss_and_grad_norm(m, tokens) for k, m in models.items()}
        optimizers = {k: torch.optim.AdamW(m.parameters(), lr=1e-5, foreach=True) for k, m in models.items()}
        times = {k: [] for k in models}
        for i in range(args.warmup + args.steps):
            for k, m in models.items():
                t = timed_step(m, optimizers[k], tokens)
                if i >= args.warmup:
                    times[k].append(t)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"| {batch} x {seq} | {checks['sdpa'][0]:.4f} / {checks['flashattn'][0]:.4f} "
              f"| {checks['sdpa'][1]:.3f} / {checks['flashattn'][1]:.3f} | {med['sdpa']:.1f} | "
              f"{med['flashattn']:.1f} | {med['flashattn'] / med['sdpa']:.3f} |", flush=True)
        del optimizers
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
