"""Eager modes side by side: debug / strict / fused on tpu against stock PyTorch eager on the same CPU.

Workloads: the demo's char transformer (train step), a GPT-2-style decoder (~8M parameters: train step and an
inference forward) and a ResNet-style CNN with BatchNorm (train step). Each mode runs in its own process (selected by
TORCH_TPU_EAGER_MODE, as a user selects it), the modes one after another round by round so a noisy machine slows
all of them alike. Per workload and mode: steps/s, peak device memory, compiles after warm-up,
executions, host->device transfers and host syncs per step; then the ratios the engine is judged by. A dispatch
micro-benchmark prints per-op microseconds next to CPU PyTorch's. Last, a bound no engine can pass on this host:
each step's product FLOPs at the host's best measured matmul rate, everything else taken as free.
Results also go to benchmarks/results/eager_modes.md.

Run: `python benchmarks/eager_modes.py` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from report import write_report
from torch import nn
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

import torch_tpu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from train_char_transformer import CharTransformer  # noqa: E402

MODES = ("debug", "strict", "fused", "cpu")  # "cpu": stock PyTorch eager on the baseline device
BASELINE = {"device": "cpu"}  # --baseline cuda: stock PyTorch's CUDA eager on an NVIDIA host


class GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """GPT-2 shaped: learned positions, pre-norm blocks, tied embedding/output weights."""

    def __init__(self, vocab: int = 8192, ctx: int = 64, d: int = 256, heads: int = 4, layers: int = 8) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[GPTBlock(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln(self.blocks(x)))


def resnet_cnn() -> nn.Module:
    def block(cin: int, cout: int, stride: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
        )  # fmt: skip

    return nn.Sequential(
        block(3, 16, 1), block(16, 32, 2), block(32, 64, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)
    )


class Workload:
    """A model, its batch and one step (train or inference), buildable on any device."""

    def __init__(self, name: str, make: Callable[[], nn.Module], batch: Callable[[], tuple], train: bool) -> None:
        self.name, self.make, self.batch, self.train = name, make, batch, train

    def setup(self, device: str) -> Callable[[], torch.Tensor]:
        torch.manual_seed(0)
        model = self.make().to(device)
        x, y = (t.to(device) for t in self.batch())
        if not self.train:
            model.eval()

            def infer() -> torch.Tensor:
                with torch.no_grad():
                    return model(x)[:, -1].float().sum()

            return infer
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        return step


def _tokens(vocab: int, b: int, t: int) -> Callable[[], tuple]:
    def make() -> tuple:
        g = torch.Generator().manual_seed(1)
        idx = torch.randint(0, vocab, (b, t + 1), generator=g)
        return idx[:, :-1], idx[:, 1:]

    return make


def _images() -> tuple:
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g)


WORKLOADS = [
    Workload("char transformer train", lambda: CharTransformer(96, 64, dropout=0.0), _tokens(96, 16, 64), True),
    Workload("GPT-2-style 8M train", GPT, _tokens(8192, 8, 64), True),
    Workload("GPT-2-style 8M inference", GPT, _tokens(8192, 8, 64), False),
    Workload("ResNet-style CNN train", resnet_cnn, _images, True),
]


def _median_step_s(step: Callable[[], torch.Tensor], steps: int) -> float:
    """Median wall time of `steps` steps, each timed up to its loss read (robust to a noisy, shared machine)."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def thread_cpu_ms() -> dict[str, float]:
    """CPU time this process's threads have used (Linux schedstat, ns resolution), in ms: the Python thread and
    autograd's device threads ("host") apart from every other thread (XLA's or PyTorch's kernel workers)."""
    out = {"host": 0.0, "workers": 0.0}
    task_dir = Path("/proc/self/task")
    if not task_dir.is_dir():
        return out
    for task in task_dir.iterdir():
        try:
            ran_ns = int((task / "schedstat").read_text().split()[0])
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile, or no schedstat on this kernel
        host = int(task.name) == os.getpid() or name.startswith("pt_autograd")
        out["host" if host else "workers"] += ran_ns / 1e6
    return out


def measure(work: Workload, mode: str, warmup: int, steps: int) -> dict[str, float]:
    on_tpu = mode != "cpu"
    if on_tpu:
        torch_tpu.set_eager_mode(mode)
    step = work.setup("tpu" if on_tpu else BASELINE["device"])
    for _ in range(warmup):
        step().item()
    if on_tpu:
        torch.tpu.synchronize()
    gc.collect()
    if on_tpu:
        torch.tpu.reset_peak_memory_stats()
        before = torch_tpu.metrics()
    cpu_before = thread_cpu_ms()
    median_s = _median_step_s(step, steps)  # each step ends with the loss read: the one host sync a loop needs
    if on_tpu:
        torch.tpu.synchronize()
    cpu_after = thread_cpu_ms()
    # CPU time per step, all threads: on the CPU plugin the "device" is the host's own cores, so kernels and
    # dispatch share them and a step can be no faster than its CPU time spread over the cores.
    cpu = {f"cpu_ms_{k}": (cpu_after[k] - cpu_before[k]) / steps for k in cpu_after}
    if not on_tpu:
        return {"steps_per_s": 1 / median_s, **cpu}
    after = torch_tpu.metrics()

    def per_step(key: str) -> float:
        return (after[key] - before[key]) / steps

    return {
        "steps_per_s": 1 / median_s,
        **cpu,
        "peak_mib": torch.tpu.max_memory_allocated() / 2**20,
        "compiles": after["compiles"] - before["compiles"],
        "executions": per_step("executions"),
        "transfers": per_step("host_to_device"),
        "syncs": per_step("host_syncs"),
    }


def dispatch_microbenchmark(mode: str, n: int) -> float:
    """µs per `x + y` on 64x64 float32, including execution (one sync at the end)."""
    device = BASELINE["device"] if mode == "cpu" else "tpu"
    if mode != "cpu":
        torch_tpu.set_eager_mode(mode)
    x = torch.randn(64, 64, device=device)
    y = torch.randn(64, 64, device=device)
    times = []
    # Two warm-up passes: in fused mode the graph of n additions is recorded, then compiled, before it is replayed.
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            x + y
        _sync(device)
        times.append((time.perf_counter() - start) / n * 1e6)
    return min(times[2:])


def product_gflop(work: Workload) -> float:
    """GFLOP of one step's products (matmuls and convolutions, forward and backward), counted on CPU."""
    step = work.setup("cpu")
    step()  # the optimizer's state exists from here on, as in the timed steps
    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops() / 1e9


def _sync(device: str) -> None:
    if device == "tpu":
        torch.tpu.synchronize()
    elif device == "cuda":
        torch.cuda.synchronize()


def gemm_peak_gflops(mode: str, n: int, products: int) -> float:
    """This host's best matmul rate: `products` distinct n x n x n float32 products per timed call, best of 3."""
    device = BASELINE["device"] if mode == "cpu" else "tpu"
    a = torch.randn(n, n, device=device)
    bs = [torch.randn(n, n, device=device) for _ in range(products)]  # distinct: a fused graph keeps every product
    best_s = math.inf
    for i in range(5):
        start = time.perf_counter()
        outs = [a @ b for b in bs]
        _sync(device)
        if i >= 2:
            best_s = min(best_s, time.perf_counter() - start)
        del outs
    return 2 * n**3 * products / best_s / 1e9


def warmup_and_steps(quick: bool) -> tuple[int, int]:
    # Steps 3-5 of a fused run still differ from the steady state (first runs of the loaded executables, buffers
    # first touched): 6 warm-up steps.
    return (2, 2) if quick else (6, 10)


def child(mode: str, quick: bool) -> dict[str, dict[str, float]]:
    """One mode's measurements, in a process started the way a user selects the mode (TORCH_TPU_EAGER_MODE)."""
    warmup, steps = warmup_and_steps(quick)
    out = {work.name: measure(work, mode, warmup, steps) for work in WORKLOADS}
    out["dispatch"] = {"us": dispatch_microbenchmark(mode, 200 if quick else 2000)}
    if mode in ("cpu", "fused"):
        n = 512 if quick else 2048
        out["gemm"] = {"gflops": gemm_peak_gflops(mode, n, 2 if quick else 6), "n": n}
    if mode == "cpu":
        out["products"] = {work.name: product_gflop(work) for work in WORKLOADS}
    return out


def run_child(mode: str, quick: bool) -> dict[str, dict[str, float]]:
    # CPU eager runs with the default environment too: torch_tpu is installed, so its process-wide settings (the
    # kept host heap) apply to the CPU baseline as well; benchmarks/host_heap.py shows glibc's defaults.
    env = {**os.environ, "TORCH_TPU_EAGER_MODE": "fused" if mode == "cpu" else mode}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--baseline", BASELINE["device"]]
    cmd += ["--quick"] if quick else []
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bound_lines(speed: dict[str, dict[str, float]], gflop: dict[str, float], peak: float, n: int) -> list[str]:
    """What the products alone allow: a step takes at least its product FLOPs at the host's best matmul rate, so no
    engine can beat a baseline by more than the baseline's step time over that."""
    lines = [
        "",
        f"Bound from the products alone: each step's matmul and convolution FLOPs (torch.utils.flop_counter) at this"
        f" host's best measured matmul rate, {peak:.0f} GFLOP/s ({n}x{n} float32 products, the better of torch's"
        " CPU kernels and XLA-CPU's), with everything else taken as free. A ratio above its bound cannot be reached"
        " on this host by any engine.",
        "",
        "| workload | product GFLOP/step | products at peak ms | fused / strict: measured, bound "
        "| fused / CPU eager: measured, bound |",
        "|---|---|---|---|---|",
    ]
    for name, s in speed.items():
        floor_s = gflop[name] / peak
        lines.append(
            f"| {name} | {gflop[name]:.2f} | {floor_s * 1e3:.1f} | {s['fused'] / s['strict']:.2f}x, "
            f"{1 / (s['strict'] * floor_s):.2f}x | {s['fused'] / s['cpu']:.2f}x, {1 / (s['cpu'] * floor_s):.2f}x |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer steps (smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "eager_modes.md"))
    parser.add_argument("--baseline", choices=("cpu", "cuda"), default="cpu", help="device of stock PyTorch eager")
    args = parser.parse_args()
    BASELINE["device"] = args.baseline
    if args.child:
        print(json.dumps(child(args.child, args.quick)))
        return
    warmup, steps = warmup_and_steps(args.quick)
    rounds = 1 if args.quick else args.rounds
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(rounds):
        for mode in MODES:
            for name, r in run_child(mode, args.quick).items():
                results.setdefault((name, mode), []).append(r)
                if name not in ("dispatch", "gemm", "products"):
                    print(f"{name:28s} {mode:7s} {r['steps_per_s']:8.2f} steps/s", flush=True)

    def best(work: str, mode: str) -> dict[str, float]:
        return max(results[(work, mode)], key=lambda r: r["steps_per_s"])

    def cpu_total(r: dict[str, float]) -> float:
        return r["cpu_ms_host"] + r["cpu_ms_workers"]

    lines = [
        f"# Eager modes: debug / strict / fused vs stock PyTorch {BASELINE['device'].upper()} eager",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()};"
        f" Python {platform.python_version()}, torch {torch.__version__}, plugin {torch.tpu.get_device_name()}."
        f" Best of {rounds} round(s) of the median step time over {steps} steps after {warmup} warm-up steps;"
        " each round runs every mode in its own process (TORCH_TPU_EAGER_MODE set as a user sets it), one after"
        " another. CPU eager runs in a process with torch_tpu installed (its kept host heap applies there too).",
        "",
        "| workload | mode | steps/s | CPU ms/step: host + workers | peak MiB | compiles after warm-up "
        "| executions/step | transfers/step | host syncs/step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for work in WORKLOADS:
        for mode in MODES:
            r = best(work.name, mode)
            cpu = f"{r['cpu_ms_host']:.1f} + {r['cpu_ms_workers']:.1f}"
            if mode == "cpu":
                lines.append(f"| {work.name} | CPU eager | {r['steps_per_s']:.2f} | {cpu} | | | | | |")
                continue
            lines.append(
                f"| {work.name} | {mode} | {r['steps_per_s']:.2f} | {cpu} | {r['peak_mib']:.1f} | {r['compiles']} "
                f"| {r['executions']:.1f} | {r['transfers']:.1f} | {r['syncs']:.1f} |"
            )
    lines += [
        "",
        "CPU ms/step: CPU time of the step's threads (mean over the timed steps). Host = the Python thread and"
        " autograd's device threads; workers = every other thread (XLA-CPU's pool for tpu, PyTorch's intra-op"
        " threads for CPU eager; CPU eager's main thread runs kernels too, so only the totals compare). Both"
        " pools spin while they wait for work, and that counts as CPU time.",
        "",
        "| workload | fused / strict speed | fused / CPU eager speed | fused / strict peak memory "
        "| fused / CPU eager CPU time |",
        "|---|---|---|---|---|",
    ]
    for work in WORKLOADS:
        f, s, c = best(work.name, "fused"), best(work.name, "strict"), best(work.name, "cpu")
        mem = f["peak_mib"] / s["peak_mib"] if s["peak_mib"] else math.nan
        lines.append(
            f"| {work.name} | {f['steps_per_s'] / s['steps_per_s']:.2f}x | {f['steps_per_s'] / c['steps_per_s']:.2f}x "
            f"| {mem:.2f}x | {cpu_total(f) / cpu_total(c):.2f}x |"
        )
    lines += bound_lines(
        {work.name: {m: best(work.name, m)["steps_per_s"] for m in MODES} for work in WORKLOADS},
        results[("products", "cpu")][0],
        max(r["gflops"] for m in ("cpu", "fused") for r in results[("gemm", m)]),
        int(results[("gemm", "cpu")][0]["n"]),
    )
    micro = {m: min(r["us"] for r in results[("dispatch", m)]) for m in MODES}
    lines += ["", "Per-op dispatch, `x + y` on 64x64 float32 (µs per op, including execution):", ""]
    lines += ["| CPU eager | debug | strict | fused |", "|---|---|---|---|"]
    lines.append(" | ".join(f"{micro[m]:.1f}" for m in ("cpu", "debug", "strict", "fused")).join(["| ", " |"]))
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
