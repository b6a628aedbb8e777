"""Does a DataLoader with pin_memory=True overlap host->device copies with compute on tpu?

    python benchmarks/pinned_overlap.py [--batches 30] [--batch-mb 16]

The same loop (upload a batch, run a few matmuls on it, keep the loss on the device) runs with blocking uploads and
with `non_blocking=True` from pinned batches; prints seconds per loop and the speed-up, and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    def __init__(self, n: int, rows: int, cols: int) -> None:
        self.n, self.rows, self.cols = n, rows, cols
        self.data = torch.randn(rows, cols)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.data


def run(loader: DataLoader, w: torch.Tensor, non_blocking: bool, matmuls: int) -> float:
    t0 = time.perf_counter()
    total = torch.zeros((), device="tpu")
    for batch in loader:
        x = batch[0].to("tpu", non_blocking=non_blocking)
        for _ in range(matmuls):
            x = torch.tanh(x @ w)
        total = total + x.mean()
    total.item()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-mb", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--matmuls", type=int, default=1, help="compute per batch (0: upload and a mean only)")
    args = parser.parse_args()
    cols = 512
    rows = args.batch_mb * (1 << 20) // (4 * cols)
    loader = DataLoader(Batches(args.batches, rows, cols), batch_size=1, pin_memory=True, num_workers=0)
    w = torch.randn(cols, cols, device="tpu") / cols**0.5
    run(loader, w, True, args.matmuls)  # compile and warm up
    blocking = min(run(loader, w, False, args.matmuls) for _ in range(args.repeats))
    overlapped = min(run(loader, w, True, args.matmuls) for _ in range(args.repeats))
    print(f"blocking uploads      {blocking:.3f} s")
    print(f"non_blocking uploads  {overlapped:.3f} s   speed-up x{blocking / overlapped:.2f}")
    print(
        json.dumps(
            {
                "blocking_s": blocking,
                "non_blocking_s": overlapped,
                "speedup": blocking / overlapped,
                "batches": args.batches,
                "batch_mb": args.batch_mb,
            }
        )
    )


if __name__ == "__main__":
    main()
