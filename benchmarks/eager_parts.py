"""Where fused eager loses to CPU eager: the pieces of the eager_modes.py models, each timed on its own.

Each piece (a LayerNorm forward and backward, the GPT-2-style head with its cross entropy, an MLP, causal SDPA, an
embedding backward, AdamW over 8M parameters in its foreach and fused forms, 3x3 convolutions forward and backward)
runs `--reps` times per timed call, then one host sync; fused tpu and stock PyTorch CPU eager are interleaved call by
call. The cost of one small kernel inside a graph is printed too: 32 independent elementwise ops per sync, at four
sizes. Ratios above 1 mean fused tpu is slower. Results also go to benchmarks/results/eager_parts.md.

Run: `python benchmarks/eager_parts.py` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from report import write_report
from torch import nn
from torch.nn import functional as F

import torch_tpu

Piece = Callable[[], object]


def _pieces(device: str) -> dict[str, Piece]:
    """Each piece returns what it computed, so that a fused graph has live outputs to run for."""
    g = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(device)

    x = rand(512, 256).requires_grad_()
    head_w = rand(8192, 256).requires_grad_()
    target = torch.randint(0, 8192, (512,), generator=g).to(device)
    ln = nn.LayerNorm(256).to(device)
    mlp = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)).to(device)
    q = rand(8, 4, 64, 64).requires_grad_()
    emb = nn.Embedding(8192, 256).to(device)
    idx = torch.randint(0, 8192, (8, 64), generator=g).to(device)
    img = rand(16, 16, 32, 32).requires_grad_()
    conv = nn.Conv2d(16, 32, 3, 1, 1, bias=False).to(device)

    def grads(*tensors: torch.Tensor) -> list:
        return [t.grad for t in tensors]

    def layer_norm() -> object:
        x.grad = ln.weight.grad = ln.bias.grad = None
        ln(x).square().sum().backward()
        return grads(x, ln.weight, ln.bias)

    def head() -> object:
        x.grad = head_w.grad = None
        loss = F.cross_entropy(x @ head_w.t(), target)
        loss.backward()
        return [loss, *grads(x, head_w)]

    def mlp_step() -> object:
        x.grad = None
        mlp.zero_grad(set_to_none=True)
        mlp(x).sum().backward()
        return grads(x, *mlp.parameters())

    def sdpa() -> object:
        q.grad = None
        F.scaled_dot_product_attention(q, q * 2, q * 3, is_causal=True).sum().backward()
        return q.grad

    def embedding() -> object:
        emb.weight.grad = None
        emb(idx).square().sum().backward()
        return emb.weight.grad

    def conv_step() -> object:
        img.grad = conv.weight.grad = None
        conv(img).square().sum().backward()
        return grads(img, conv.weight)

    def adamw(fused: bool) -> Piece:
        params = [nn.Parameter(rand(256, 1024)) for _ in range(32)]
        for p in params:
            p.grad = torch.full_like(p, 1e-3)
        opt = torch.optim.AdamW(params, lr=1e-3, fused=fused or None)
        return lambda: (opt.step(), params[0])[1]

    return {
        "LayerNorm 512x256 fwd+bwd": layer_norm,
        "head 512x256 @ 256x8192 + cross entropy, fwd+bwd": head,
        "MLP 256-1024-256 fwd+bwd": mlp_step,
        "causal SDPA 8x4x64x64 fwd+bwd": sdpa,
        "embedding 8192x256 fwd+bwd": embedding,
        "conv 3x3 16->32 on 16x16x32x32 fwd+bwd": conv_step,
        "AdamW foreach, 32 x 256x1024": adamw(False),
        "AdamW fused, 32 x 256x1024": adamw(True),
    }


def _time_call(piece: Piece, reps: int, device: str) -> float:
    start = time.perf_counter()
    kept = [piece() for _ in range(reps)]
    if device == "tpu":
        torch.tpu.synchronize()
    del kept
    return time.perf_counter() - start


def _kernel_cost(n: int, calls: int) -> dict[str, float]:
    """Microseconds per op for 32 independent `x * 2` of n elements and one sync: on tpu one graph of 32 kernels."""
    out: dict[str, float] = {}
    for device in ("cpu", "tpu"):
        xs = [torch.randn(n, device=device) for _ in range(32)]
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            ys = [x * 2 for x in xs]
            if device == "tpu":
                torch.tpu.synchronize()
            times.append((time.perf_counter() - start) / len(xs))
            del ys
        out[device] = statistics.median(times[calls // 5 :]) * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer calls (smoke run)")
    parser.add_argument("--reps", type=int, default=4, help="piece repetitions per timed call (one sync)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "eager_parts.md"))
    args = parser.parse_args()
    calls = 4 if args.quick else 15
    torch_tpu.set_eager_mode("fused")
    pieces = {device: _pieces(device) for device in ("cpu", "tpu")}
    times: dict[tuple[str, str], list[float]] = {}
    for device in ("cpu", "tpu"):  # warm-up: compiles and first touches
        for piece in pieces[device].values():
            _time_call(piece, args.reps, device)
            _time_call(piece, args.reps, device)
    for _ in range(calls):
        for name in pieces["cpu"]:
            for device in ("cpu", "tpu"):
                t = _time_call(pieces[device][name], args.reps, device)
                times.setdefault((name, device), []).append(t / args.reps * 1e3)
    lines = [
        "# Fused eager vs CPU eager, piece by piece",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; Python"
        f" {platform.python_version()}, torch {torch.__version__}, plugin {torch.tpu.get_device_name()}."
        f" Median over {calls} interleaved calls of {args.reps} repetitions each (one host sync per call)."
        f" Host heap: {torch_tpu.runtime.get().host_heap}; CPU eager runs in the same process, so it shares it.",
        "",
        "| piece | CPU eager ms | fused tpu ms | tpu / CPU |",
        "|---|---|---|---|",
    ]
    for name in pieces["cpu"]:
        c, t = (statistics.median(times[(name, d)]) for d in ("cpu", "tpu"))
        lines.append(f"| {name} | {c:.3f} | {t:.3f} | {t / c:.2f}x |")
    lines += ["", "32 independent `x * 2` (float32) and one sync, µs per op (on tpu: one graph of 32 kernels):", ""]
    lines += ["| elements | CPU eager | fused tpu |", "|---|---|---|"]
    for n in (4, 16384, 131072, 1048576):
        cost = _kernel_cost(n, 10 if args.quick else 60)
        lines.append(f"| {n} | {cost['cpu']:.1f} | {cost['tpu']:.1f} |")
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
