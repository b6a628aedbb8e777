"""glibc's default heap policy against the kept host heap (TORCH_TPU_KEEP_HOST_HEAP=0 / 1), side by side.

XLA-CPU's device buffers are host memory from the C allocator. With glibc's defaults, blocks over the mmap
threshold are fresh mmap()s and freed heap tops go back to the OS, so each step faults its memory in again. The
kept heap (one arena, no mmap()ed blocks, no trimming) trades that for host memory that stays at its peak.

Measured in alternating child processes (see `switch_ab.py`): the `eager_modes.py` workloads in fused eager on tpu
and in stock PyTorch CPU eager (the switch applies to the whole process, so CPU eager shows what it does to torch's
own kernels), the child's page faults and its peak resident memory. Writes benchmarks/results/host_heap.md.

Run: `python benchmarks/host_heap.py` (add `--quick` for a smoke run).
"""

from switch_ab import main

if __name__ == "__main__":
    title = "Host heap: glibc defaults vs kept (XLA-CPU)"
    labels = ("glibc defaults", "kept heap")
    main("TORCH_TPU_KEEP_HOST_HEAP", labels, title, "host_heap.md", products=False, cpu=True)
