"""Host kernels on and off (TORCH_TPU_HOST_KERNELS=1 / 0), fused eager on XLA-CPU, side by side.

The switch is read once per process, so each measurement runs in a child process; children with the two settings
alternate round by round so a noisy machine slows both alike. Measured: the GPT-2-style head product alone
(512x256 @ (8192x256)ᵀ, its input gradient and its weight gradient: one fused graph each) and the whole steps of
the `eager_modes.py` workloads. Prints milliseconds and on/off ratios; writes benchmarks/results/host_kernels.md.

Run: `python benchmarks/host_kernels.py` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from report import write_report

HERE = Path(__file__).resolve().parent
PRODUCTS = {  # name: (transpose a, transpose b, shape of a, shape of b)
    "x @ wᵀ (512x256, w 8192x256)": (False, True, (512, 256), (8192, 256)),
    "g @ w (512x8192, w 8192x256)": (False, False, (512, 8192), (8192, 256)),
    "gᵀ @ x (g 512x8192, x 512x256)": (True, False, (512, 8192), (512, 256)),
}


def child(steps: int) -> dict[str, float]:
    """Runs in the child process: milliseconds per call, median over `steps` calls after warm-up."""
    import eager_modes as em
    import torch

    import torch_tpu

    torch_tpu.set_eager_mode("fused")
    out: dict[str, float] = {}

    def median_ms(fn) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    def product(ta: bool, tb: bool, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        result = (a.t() if ta else a) @ (b.t() if tb else b)
        torch.tpu.synchronize()  # runs the graph: the result is alive (a dead one would never be computed)
        return result

    for name, (ta, tb, sa, sb) in PRODUCTS.items():
        a, b = torch.randn(sa, device="tpu"), torch.randn(sb, device="tpu")
        out[name] = median_ms(lambda ta=ta, tb=tb, a=a, b=b: product(ta, tb, a, b))
    for work in em.WORKLOADS:
        step = work.setup("tpu")
        out[work.name] = median_ms(lambda s=step: s().item())
    return out


def run_child(on: bool, steps: int) -> dict[str, float]:
    env = {**os.environ, "TORCH_TPU_HOST_KERNELS": "1" if on else "0"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--steps", str(steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"child (host kernels {'on' if on else 'off'}) failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one round, few steps (smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(HERE / "results" / "host_kernels.md"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.steps)))
        return
    rounds, steps = (1, 2) if args.quick else (args.rounds, args.steps)
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for r in range(rounds):
        for on in (False, True):
            runs[on].append(run_child(on, steps))
            print(f"round {r + 1}: host kernels {'on' if on else 'off'} done", flush=True)
    names = list(runs[False][0])
    lines = [
        "# Host kernels on vs off (fused eager, XLA-CPU)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; Python"
        f" {platform.python_version()}. Each figure: the best of {rounds} child process(es) per setting (run"
        f" alternately) of the median over {steps} calls or steps, in ms.",
        "",
        "| what | off (XLA's ops) ms | on (torch's kernels) ms | on / off time |",
        "|---|---|---|---|",
    ]
    for name in names:
        off, on = min(r[name] for r in runs[False]), min(r[name] for r in runs[True])
        lines.append(f"| {name} | {off:.2f} | {on:.2f} | {on / off:.2f}x |")
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
