"""torch.compile on tpu against the other ways to run the same step on this machine.

Modes, interleaved round by round so a noisy machine slows all of them alike:
- ``compiled``: ``torch.compile(model, backend="tpu")`` on tpu tensors in fused eager mode: after warm-up the
  compiled forward and backward replay their captured programs (no op dispatched); the loss and the optimizer step
  are fused eager;
- ``fused``: the same step in fused eager mode without torch.compile;
- ``cpu``: stock PyTorch eager on CPU tensors;
- ``inductor``: ``torch.compile(model)`` (Inductor, C++ codegen) on CPU tensors.
Workloads are the eager-modes benchmark's (imported from it): a GPT-2-style decoder (~8M parameters, train step and
inference forward) and a ResNet-style CNN with BatchNorm (train step). The first step of each compiled mode (Dynamo
trace + AOTAutograd + program or C++ compile) is reported apart from the steady state. Results also go to
benchmarks/results/compile.md.

Run: `python benchmarks/compile.py` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from report import write_report
from torch.nn import functional as F

import torch_tpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eager_modes import WORKLOADS, Workload  # noqa: E402

MODES = ("compiled", "fused", "cpu", "inductor")
NAMES = ("GPT-2-style 8M train", "GPT-2-style 8M inference", "ResNet-style CNN train")


def setup(work: Workload, mode: str) -> Callable[[], torch.Tensor]:
    """One step of `work` in `mode` (the model compiled for the compiled modes, the optimizer step eager)."""
    device = "cpu" if mode in ("cpu", "inductor") else "tpu"
    torch.manual_seed(0)
    model = work.make().to(device)
    x, y = (t.to(device) for t in work.batch())
    run = model
    if mode == "compiled":
        run = torch.compile(model, backend="tpu")
    elif mode == "inductor":
        run = torch.compile(model)
    if not work.train:
        model.eval()

        def infer() -> torch.Tensor:
            with torch.no_grad():
                return run(x)[:, -1].float().sum()

        return infer
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        out = run(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return step


def measure(work: Workload, mode: str, warmup: int, steps: int) -> dict[str, float]:
    torch._dynamo.reset()
    if mode in ("compiled", "fused"):
        torch_tpu.set_eager_mode("fused")
    step = setup(work, mode)
    start = time.perf_counter()
    step().item()
    first = time.perf_counter() - start
    for _ in range(warmup - 1):
        step().item()
    gc.collect()
    before = torch_tpu.metrics()
    start = time.perf_counter()
    for _ in range(steps):
        step().item()  # the loss read: the one host sync a training loop needs
    elapsed = time.perf_counter() - start
    after = torch_tpu.metrics()
    torch_tpu.set_eager_mode("debug")
    return {
        "steps_per_s": steps / elapsed,
        "first_s": first,
        "compiles": after["compiles"] - before["compiles"],
        "executions": (after["executions"] - before["executions"]) / steps,
        "recompiles": after["dynamo_recompiles"] - before["dynamo_recompiles"],
        "replays": (after["replayed_calls"] - before["replayed_calls"]) / steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer steps (smoke run)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads for the CPU modes (0: default)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "compile.md"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warmup, steps = (2, 2) if args.quick else (3, 5)
    rounds = 1 if args.quick else args.rounds
    works = [w for w in WORKLOADS if w.name in NAMES]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(rounds):
        for work in works:
            for mode in MODES:
                r = measure(work, mode, warmup, steps)
                results.setdefault((work.name, mode), []).append(r)
                rate, first_s = r["steps_per_s"], r["first_s"]
                print(f"{work.name:28s} {mode:9s} {rate:8.2f} steps/s, first step {first_s:7.2f} s", flush=True)

    def best(work: str, mode: str) -> dict[str, float]:
        return max(results[(work, mode)], key=lambda r: r["steps_per_s"])

    def first(work: str, mode: str) -> float:
        return results[(work, mode)][0]["first_s"]

    lines = [
        "# torch.compile on tpu vs fused eager, CPU eager and Inductor on CPU",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()};"
        f" Python {platform.python_version()}, torch {torch.__version__}, plugin {torch.tpu.get_device_name()};"
        f" torch CPU threads {torch.get_num_threads()}; load average at the end {os.getloadavg()[0]:.1f}"
        " (the machine is shared with other jobs)."
        f" Best of {rounds} interleaved round(s), {steps} measured steps after {warmup} warm-up steps. `compiled` and"
        " `fused` run in fused eager mode (fused: the step is one program; compiled: the forward and backward graphs"
        " replay their captured programs, the rest is fused); the optimizer step is eager in every mode (only"
        " the model is compiled). First step: round 1's first call (Dynamo + AOTAutograd + XLA or C++ compile; the"
        " tpu compile cache on disk may already hold the programs from an earlier run).",
        "",
        "| workload | mode | steps/s | first step s | compiles after warm-up | executions/step | replayed graphs/step"
        " | recompiles |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for work in works:
        for mode in MODES:
            r = best(work.name, mode)
            if mode in ("cpu", "inductor"):
                label = "CPU eager" if mode == "cpu" else "Inductor (CPU)"
                rate, first_s = r["steps_per_s"], first(work.name, mode)
                lines.append(f"| {work.name} | {label} | {rate:.2f} | {first_s:.2f} | | | | |")
                continue
            lines.append(
                f"| {work.name} | {mode} | {r['steps_per_s']:.2f} | {first(work.name, mode):.2f} | {r['compiles']} "
                f"| {r['executions']:.1f} | {r['replays']:.1f} | {r['recompiles']} |"
            )
    lines += ["", "| workload | compiled / Inductor | compiled / fused | compiled / CPU eager |", "|---|---|---|---|"]
    for work in works:
        c, f, e, i = (best(work.name, m)["steps_per_s"] for m in ("compiled", "fused", "cpu", "inductor"))
        lines.append(f"| {work.name} | {c / i:.2f}x | {c / f:.2f}x | {c / e:.2f}x |")
    lines += [
        "",
        (
            "Notes. The machine is shared (see the load average), so ratios within ~15% are noise: run it again "
            "for your own figures. CPU modes run with the thread count above: on an oversubscribed machine "
            "torch's default (2 OpenMP threads) was ~10x slower per step than 1 thread. Compiled mode dispatches "
            "no ATen op of the model after warm-up: each compiled graph runs its captured program on the call's "
            "inputs, and the host records only the loss and the optimizer step, so the next programs are queued "
            "while the device still runs the previous ones. Fused eager records every op of the step and runs "
            "one program (less peak memory: activations never leave it). Both are bound by XLA-CPU's kernels here."
        ),
    ]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
