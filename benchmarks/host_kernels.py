"""Host kernels on and off (TORCH_TPU_HOST_KERNELS=1 / 0), fused eager on XLA-CPU, side by side.

Measured in alternating child processes (see `switch_ab.py`): the GPT-2-style head product alone (512x256 @
(8192x256)ᵀ, its input gradient and its weight gradient: one fused graph each) and the whole steps of the
`eager_modes.py` workloads. Prints milliseconds and on/off ratios; writes benchmarks/results/host_kernels.md.

Run: `python benchmarks/host_kernels.py` (add `--quick` for a smoke run).
"""

from switch_ab import main

if __name__ == "__main__":
    title = "Host kernels on vs off (fused eager, XLA-CPU)"
    labels = ("XLA's ops", "torch's kernels")
    main("TORCH_TPU_HOST_KERNELS", labels, title, "host_kernels.md", products=True, cpu=False)
