#!/usr/bin/env python3
"""Times, through PyTorch on the local GPU, the kernels `dstc calibrate`
cannot run itself: fused attention (FlashAttention 2 and cuDNN's, forward
and backward, causal and not, over sequence lengths and head dims) and the
memory-bound layers (layer and RMS norm, softmax, SiLU-and-multiply) over
sizes, to check the cost model's classes for them. One JSON object per line;
median of 7 after 3 warm-ups, CUDA events, each sample a batch of runs
lasting about 1 ms so that host launch time is not counted."""
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_seconds(fn):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    batch = max(1, min(200, int(1e-3 / max(start.elapsed_time(stop) * 1e-3, 1e-9))))
    times = []
    for _ in range(7):
        start.record()
        for _ in range(batch):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3 / batch)
    return sorted(times)[3]


def emit(record, fn):
    try:
        record["seconds"] = median_seconds(fn)
    except Exception as e:  # a backend this GPU or build lacks: say so, go on
        record["error"] = str(e)[:200]
    print(json.dumps(record), flush=True)


def attention():
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for dim in (64, 128):
        for seq in (1024, 2048, 4096, 8192, 16384, 32768):
            heads = 32 if dim == 128 else 64
            batch = max(1, 16384 // seq)
            q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            for causal in (True, False):
                flops = 4 * batch * heads * seq * seq * dim // (2 if causal else 1)
                for name, backend in backends.items():
                    base = {"what": "attention", "backend": name, "batch": batch, "heads": heads, "seq": seq,
                            "dim": dim, "causal": causal, "flops": flops}
                    with sdpa_kernel(backend):
                        emit(dict(base), lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                        try:
                            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            grad = torch.randn_like(out)
                            emit(dict(base, what="attention_grad", flops=int(2.5 * flops)),
                                 lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True))
                        except Exception as e:
                            print(json.dumps(dict(base, what="attention_grad", error=str(e)[:200])), flush=True)
            del q, k, v


def memory_bound():
    for tokens in (4096, 16384):
        for hidden in (1024, 4096, 8192, 16384):
            x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
            w = torch.ones(hidden, device="cuda", dtype=torch.bfloat16)
            nbytes = 2 * 2 * tokens * hidden
            base = {"tokens": tokens, "hidden": hidden, "bytes": nbytes}
            emit(dict(base, what="layer_norm"), lambda: F.layer_norm(x, (hidden,), w, w))
            emit(dict(base, what="rms_norm"), lambda: F.rms_norm(x, (hidden,), w))
            emit(dict(base, what="softmax"), lambda: torch.softmax(x, dim=-1))
            gate = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
            emit(dict(base, what="silu_mul", bytes=3 * 2 * tokens * hidden), lambda: F.silu(gate) * x)
            emit(dict(base, what="add", bytes=3 * 2 * tokens * hidden), lambda: gate + x)


if __name__ == "__main__":
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()}), flush=True)
    for part in (attention, memory_bound):
        try:
            part()
        except Exception as e:
            print(json.dumps({"part": part.__name__, "error": str(e)[:300]}), flush=True)
