"""glibc's default heap policy against the kept host heap (TORCH_TPU_KEEP_HOST_HEAP=0 / 1), side by side.

XLA-CPU's device buffers are host memory from the C allocator. With glibc's defaults, blocks over the mmap
threshold are fresh mmap()s and freed heap tops go back to the OS, so each step faults its memory in again. The
kept heap (one arena, no mmap()ed blocks, no trimming) trades that for host memory that stays at its peak.

Measured in alternating child processes (see `switch_ab.py`): the `eager_modes.py` workloads in fused eager on tpu
and in stock PyTorch CPU eager (the switch applies to the whole process, so CPU eager shows what it does to torch's
own kernels), the child's page faults and its peak resident memory. Writes benchmarks/results/host_heap.md.

Run: `python benchmarks/host_heap.py` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse

from switch_ab import HERE, compare


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one round, few steps (smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=str(HERE / "results" / "host_heap.md"))
    args = parser.parse_args()
    rounds, steps = (1, 2) if args.quick else (args.rounds, args.steps)
    title = "Host heap: glibc defaults vs kept (XLA-CPU)"
    labels = ("glibc defaults", "kept heap")
    compare("TORCH_TPU_KEEP_HOST_HEAP", labels, title, args.out, rounds, steps, products=False, cpu=True)


if __name__ == "__main__":
    main()
