"""Profiler overhead on small tpu ops: the same loop unprofiled, under torch.profiler (Kineto, CPU + PrivateUse1
activities) and under the PrivateUse1 fallback profiler (use_kineto=False, the device's profiler stubs).

    python benchmarks/profiler_overhead.py [--iters 200] [--repeats 5]

Prints µs per iteration (best of `repeats`) and the ratio to the unprofiled loop, and a JSON line with the same.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile


def _loop(x: torch.Tensor, iters: int) -> None:
    for _ in range(iters):
        y = (x + 1.0) * 2.0
        y = y.relu()
    torch.tpu.synchronize()


def _best(fn: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    x = torch.randn(64, 64, device="tpu")
    _loop(x, 5)  # compile every program first

    def plain() -> None:
        _loop(x, args.iters)

    inner: dict[str, list[float]] = {"kineto_cpu_tpu": [], "fallback_stubs": []}

    def timed_loop(name: str) -> None:
        t0 = time.perf_counter()
        _loop(x, args.iters)
        inner[name].append(time.perf_counter() - t0)

    def kineto() -> None:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
            timed_loop("kineto_cpu_tpu")
        p.key_averages()

    def fallback() -> None:
        with torch.autograd.profiler.profile(use_device="tpu", use_kineto=False) as p:
            timed_loop("fallback_stubs")
        p.key_averages()

    # Interleaved repeats (plain, Kineto, fallback, plain, ...) so drift on a shared machine hits all three alike.
    plain_times: list[float] = []
    whole_times: dict[str, list[float]] = {"kineto_cpu_tpu": [], "fallback_stubs": []}
    for _ in range(args.repeats):
        plain_times.append(_best(plain, 1))
        whole_times["kineto_cpu_tpu"].append(_best(kineto, 1))
        whole_times["fallback_stubs"].append(_best(fallback, 1))
    base = min(plain_times)
    # Whole: entering the profiler, the loop, leaving it and building key_averages(). Loop: the loop alone, inside.
    whole = {k: min(v) for k, v in whole_times.items()}
    loop = {k: min(v) for k, v in inner.items()}
    print(f"{'unprofiled':16s} {base / args.iters * 1e6:9.1f} us/iter")
    report: dict[str, object] = {
        "iters": args.iters,
        "ops_per_iter": 3,
        "unprofiled_us_per_iter": base / args.iters * 1e6,
    }
    for k in whole:
        print(
            f"{k:16s} loop {loop[k] / args.iters * 1e6:9.1f} us/iter  x{loop[k] / base:.2f}   "
            f"with start/stop/key_averages x{whole[k] / base:.2f}"
        )
        report[k] = {
            "loop_us_per_iter": loop[k] / args.iters * 1e6,
            "loop_ratio": loop[k] / base,
            "whole_ratio": whole[k] / base,
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
