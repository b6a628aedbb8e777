"""One environment switch on and off, side by side: the harness `host_kernels.py` and `host_heap.py` share.

A switch read once per process (a TORCH_TPU_* variable) can only be compared across processes, so every measurement
runs in a child process; children with the two settings alternate round by round so a noisy machine slows both
alike. A child times the products of the GPT-2-style head (fused graphs), the whole steps of the `eager_modes.py`
workloads on tpu (fused eager) and, when asked, the same steps in stock PyTorch CPU eager, and reports its page
faults and peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from report import write_report

HERE = Path(__file__).resolve().parent
PRODUCTS = {  # name: (transpose a, transpose b, shape of a, shape of b)
    "x @ wᵀ (512x256, w 8192x256)": (False, True, (512, 256), (8192, 256)),
    "g @ w (512x8192, w 8192x256)": (False, False, (512, 8192), (8192, 256)),
    "gᵀ @ x (g 512x8192, x 512x256)": (True, False, (512, 8192), (512, 256)),
}
FAULTS, RSS = "minor page faults (whole child)", "peak resident memory, MiB (whole child)"


def _median_ms(fn: Callable[[], object], steps: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def child(steps: int, products: bool, cpu: bool) -> dict[str, float]:
    """Runs in the child process: milliseconds per call or step, median over `steps` after warm-up."""
    import eager_modes as em
    import torch

    import torch_tpu

    torch_tpu.set_eager_mode("fused")
    out: dict[str, float] = {}

    def product(ta: bool, tb: bool, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        result = (a.t() if ta else a) @ (b.t() if tb else b)
        torch.tpu.synchronize()  # runs the graph: the result is alive (a dead one would never be computed)
        return result

    for name, (ta, tb, sa, sb) in PRODUCTS.items() if products else ():
        a, b = torch.randn(sa, device="tpu"), torch.randn(sb, device="tpu")
        out[name] = _median_ms(lambda ta=ta, tb=tb, a=a, b=b: product(ta, tb, a, b), steps)
    for device in ("tpu", "cpu") if cpu else ("tpu",):
        for work in em.WORKLOADS:
            step = work.setup(device)
            out[f"{work.name} ({'fused tpu' if device == 'tpu' else 'CPU eager'})"] = _median_ms(
                lambda s=step: s().item(), steps
            )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out[FAULTS] = float(usage.ru_minflt)
    out[RSS] = usage.ru_maxrss / 1024
    return out


def child_main(argv: list[str]) -> None:
    """Entry of a child: `--child STEPS PRODUCTS(0/1) CPU(0/1)`; prints one JSON line."""
    steps, products, cpu = int(argv[0]), argv[1] == "1", argv[2] == "1"
    print(json.dumps(child(steps, products, cpu)))


def _run_child(env: dict[str, str], steps: int, products: bool, cpu: bool) -> dict[str, float]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(steps), str(int(products)), str(int(cpu))]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, cwd=HERE, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"child ({env}) failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(
    variable: str, labels: tuple[str, str], title: str, out: str, rounds: int, steps: int, products: bool, cpu: bool
) -> None:
    """Alternates children with `variable`=0 and =1 for `rounds` rounds; reports the best of each, and on/off."""
    runs: dict[str, list[dict[str, float]]] = {"0": [], "1": []}
    for r in range(rounds):
        for value in runs:
            runs[value].append(_run_child({variable: value}, steps, products, cpu))
            print(f"round {r + 1}: {variable}={value} done", flush=True)
    lines = [
        f"# {title}",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; Python"
        f" {platform.python_version()}. Each figure: the best of {rounds} child process(es) per setting (run"
        f" alternately) of the median over {steps} calls or steps, in ms (counts: the lowest).",
        "",
        f"| what | {variable}=0 ({labels[0]}) | {variable}=1 ({labels[1]}) | 1 / 0 |",
        "|---|---|---|---|",
    ]
    for name in runs["0"][0]:
        off, on = min(r[name] for r in runs["0"]), min(r[name] for r in runs["1"])
        lines.append(f"| {name} | {off:.2f} | {on:.2f} | {on / off:.2f}x |")
    write_report(lines, out)


def main(variable: str, labels: tuple[str, str], title: str, results_name: str, products: bool, cpu: bool) -> None:
    """Command line of a switch benchmark: `--quick` (one round, two steps), `--rounds`, `--steps`, `--out`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one round, few steps (smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=str(HERE / "results" / results_name))
    args = parser.parse_args()
    rounds, steps = (1, 2) if args.quick else (args.rounds, args.steps)
    compare(variable, labels, title, args.out, rounds, steps, products, cpu)


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    child_main(sys.argv[2:])
