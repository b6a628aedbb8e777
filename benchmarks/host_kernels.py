"""Host kernels on and off (TORCH_TPU_HOST_KERNELS=1 / 0), fused eager on XLA-CPU, side by side.

Measured in alternating child processes (see `switch_ab.py`): the GPT-2-style head product alone (512x256 @
(8192x256)ᵀ, its input gradient and its weight gradient: one fused graph each) and the whole steps of the
`eager_modes.py` workloads. Prints milliseconds and on/off ratios; writes benchmarks/results/host_kernels.md.

Run: `python benchmarks/host_kernels.py` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse

from switch_ab import HERE, compare


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one round, few steps (smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=str(HERE / "results" / "host_kernels.md"))
    args = parser.parse_args()
    rounds, steps = (1, 2) if args.quick else (args.rounds, args.steps)
    title = "Host kernels on vs off (fused eager, XLA-CPU)"
    labels = ("XLA's ops", "torch's kernels")
    compare("TORCH_TPU_HOST_KERNELS", labels, title, args.out, rounds, steps, products=True, cpu=False)


if __name__ == "__main__":
    main()
