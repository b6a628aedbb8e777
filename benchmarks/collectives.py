"""all_reduce bus bandwidth: tpu_dist on tpu tensors vs Gloo on cpu tensors, same processes, same run.

    python benchmarks/collectives.py                 # 2 local ranks, 4 KiB .. 64 MiB, markdown table on stdout
    python benchmarks/collectives.py --ranks 2 --min-kib 4 --max-mib 64 --rounds 3

The script launches its own ranks like torchrun on one host, including torchrun's OMP_NUM_THREADS=1 (idle OpenMP
threads spinning in a rank slow the XLA-CPU plugin's host copies down by ~10 ms each). Each rank joins one process group
"cpu:gloo,tpu:tpu_dist" (with the agreement check, the default) and a second one with TORCH_TPU_DIST_CHECK=0, so the
table shows what the check costs. Time per op is the slowest rank's mean over `iters` back-to-back synchronous
all_reduces, best of `rounds` (interleaved); bus bandwidth = bytes * 2 * (n - 1) / n / time (the NCCL-tests convention).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sizes(min_kib: int, max_mib: int) -> list[int]:
    sizes, size = [], min_kib * 1024
    while size <= max_mib * 1024 * 1024:
        sizes.append(size)
        size *= 4
    return sizes


def _time_once(dist, x, group, iters: int) -> float:  # noqa: ANN001 - torch types, imported late
    import torch

    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    if x.device.type == "tpu":
        torch.tpu.synchronize()
    elapsed = torch.tensor([(time.perf_counter() - t0) / iters])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # cpu tensor: Gloo
    return float(elapsed)


def _rank_main(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    import torch_tpu

    timeout = datetime.timedelta(seconds=120)
    dist.init_process_group("cpu:gloo,tpu:tpu_dist", timeout=timeout)
    os.environ["TORCH_TPU_DIST_CHECK"] = "0"  # read when a group's backend is created
    unchecked = dist.new_group(backend="cpu:gloo,tpu:tpu_dist", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("tpu", torch.tpu.current_device())
    rows = []
    for size in _sizes(args.min_kib, args.max_mib):
        n = size // 4
        iters = max(5, min(100, (256 << 20) // size))
        cpu = torch.ones(n)
        tpu = torch.ones(n, device=dev)
        for x in (cpu, tpu):  # warm up: connections, compiled copy programs
            dist.all_reduce(x)
            dist.all_reduce(x, group=unchecked)
        best = [float("inf")] * 3
        for _ in range(args.rounds):  # interleaved, so load changes on a shared host hit all three alike
            for i, (x, group) in enumerate(((cpu, None), (tpu, None), (tpu, unchecked))):
                best[i] = min(best[i], _time_once(dist, x, group, iters))
        rows.append((size, *best))
    if rank == 0:
        factor = 2 * (world - 1) / world
        print(
            f"all_reduce fp32, {world} ranks on one host ({platform.node()}), torch {torch.__version__}, "
            f"torch_tpu {torch_tpu.__version__}, plugin {torch_tpu.runtime.get().client.platform_name}, "
            f"{os.cpu_count()} CPUs\n"
        )
        print("| size | Gloo cpu: us | GB/s | tpu_dist: us | GB/s | ratio | tpu_dist no check: us | GB/s | ratio |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size, tg, tt, tn in rows:
            bw = [size * factor / t / 1e9 for t in (tg, tt, tn)]
            label = f"{size // 1024} KiB" if size < (1 << 20) else f"{size >> 20} MiB"
            print(
                f"| {label} | {tg * 1e6:.0f} | {bw[0]:.2f} | {tt * 1e6:.0f} | {bw[1]:.2f} | {bw[1] / bw[0]:.2f} "
                f"| {tn * 1e6:.0f} | {bw[2]:.2f} | {bw[2] / bw[0]:.2f} |"
            )
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--min-kib", type=int, default=4)
    parser.add_argument("--max-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_process:
        _rank_main(args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(args.ranks):
        env = dict(
            os.environ,
            OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
            RANK=str(rank),
            WORLD_SIZE=str(args.ranks),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(args.ranks),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )
        procs.append(
            subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank-process", *sys.argv[1:]], env=env)
        )
    codes = [p.wait(timeout=1800) for p in procs]
    sys.exit(max(abs(c) for c in codes))


if __name__ == "__main__":
    main()
