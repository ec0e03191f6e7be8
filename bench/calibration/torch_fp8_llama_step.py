#!/usr/bin/env python3
"""torch_llama_step.py's Llama 3 8B layers with their linear layers in FP8,
to check dstc's `fp8 = tensorwise` on one GPU
(bench/results/single_gpu_fp8_2026-11-26/): each block's q, k, v, o, gate,
up and down projections quantize their input and weight to e4m3 with one
scale per tensor computed from the tensor's own largest magnitude (current
scaling), run torch._scaled_mm writing bf16, keep the e4m3 input for the
backward, and quantize the output gradient to e5m2 for the input and weight
gradients (the hybrid format of Transformer Engine). Embeddings, head,
attention and norms stay in bf16. Eager PyTorch: a quantization is three
kernels (the largest magnitude, the scaling, the cast) where Transformer
Engine fuses it, and the backward's transposed copies are their own
kernels. Prints the bf16 and the fp8 step, one JSON line each."""
import argparse
import json

import torch
import torch.nn as nn
from torch.nn.attention import SDPBackend

from torch_llama_step import Model
from torch_step_profile import write_kernel_table

FORMATS = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}


def quantize(t, dtype):
    """t in `dtype` scaled by one factor, and the factor that undoes it."""
    amax = torch.linalg.vector_norm(t, ord=float("inf"), dtype=torch.float32).clamp(min=1e-12)
    scale = FORMATS[dtype] / amax
    return (t * scale).to(dtype), scale.reciprocal()


class Fp8LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        rows = x.reshape(-1, x.shape[-1])
        xq, xs = quantize(rows, torch.float8_e4m3fn)
        wq, ws = quantize(weight, torch.float8_e4m3fn)
        # _scaled_mm takes a row-major first and a column-major second operand.
        y = torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16)
        ctx.save_for_backward(xq, xs, wq, ws)
        ctx.input_shape = x.shape
        return y.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        xq, xs, wq, ws = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        gq, gs = quantize(g, torch.float8_e5m2)
        dx = torch._scaled_mm(gq, wq.t().contiguous().t(), scale_a=gs, scale_b=ws, out_dtype=torch.bfloat16)
        dw = torch._scaled_mm(gq.t().contiguous(), xq.t().contiguous().t(), scale_a=gs, scale_b=xs,
                              out_dtype=torch.bfloat16)
        return dx.view(ctx.input_shape), dw


class Fp8Linear(nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.weight = linear.weight

    def forward(self, x):
        return Fp8LinearFunction.apply(x, self.weight)


def step_times(args, fp8):
    hidden, heads, kv_heads, ffn, vocab = 4096, 32, 8, 14336, 128256
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Model(vocab, hidden, heads, kv_heads, ffn, args.layers).to(torch.bfloat16)
    if fp8:
        for block in model.blocks:
            for name in ("q", "k", "v", "o", "gate", "up", "down"):
                setattr(block, name, Fp8Linear(getattr(block, name)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    tokens = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    labels = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    dim = hidden // heads
    inv = 1.0 / (500000.0 ** (torch.arange(0, dim, 2, device="cuda").float() / dim))
    angles = torch.outer(torch.arange(args.seq, device="cuda").float(), inv)
    cos = torch.cat((angles.cos(), angles.cos()), -1).to(torch.bfloat16)
    sin = torch.cat((angles.sin(), angles.sin()), -1).to(torch.bfloat16)
    backend = SDPBackend.CUDNN_ATTENTION
    try:
        model(tokens, labels, cos, sin, backend).backward()
    except RuntimeError:
        backend = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    opt.zero_grad(set_to_none=True)
    events = lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    steps, fwd_bwd, optim, losses = [], [], [], []
    torch.cuda.reset_peak_memory_stats()
    for i in range(13):
        (a, b), (c, d) = events(), events()
        a.record()
        loss = model(tokens, labels, cos, sin, backend)
        loss.backward()
        b.record()
        c.record()
        opt.step()
        opt.zero_grad(set_to_none=True)
        d.record()
        d.synchronize()
        losses.append(loss.item())
        if i >= 3:
            fwd_bwd.append(a.elapsed_time(b) * 1e-3)
            optim.append(c.elapsed_time(d) * 1e-3)
            steps.append(a.elapsed_time(d) * 1e-3)
    if args.profile:
        def step():
            model(tokens, labels, cos, sin, backend).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        write_kernel_table(f"{args.profile}_{'fp8' if fp8 else 'bf16'}.txt", step)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "fp8": fp8,
            "attention": str(backend), "layers": args.layers, "seq": args.seq, "batch": args.batch,
            "step_s": med(steps), "forward_backward_s": med(fwd_bwd), "optimizer_s": med(optim),
            "first_losses": losses[:3], "peak_memory_bytes": torch.cuda.max_memory_allocated()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--profile", help="write the kernels of 3 more steps to PROFILE_bf16.txt and PROFILE_fp8.txt")
    args = p.parse_args()
    for fp8 in (False, True):
        print(json.dumps(step_times(args, fp8)), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
