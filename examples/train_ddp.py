"""Data-parallel training on tpu with torch.distributed, written exactly as one would for CUDA + NCCL.

    torchrun --nproc-per-node 2 examples/train_ddp.py                 # one host, two ranks
    torchrun --nnodes 2 --node-rank 0 --rdzv-backend c10d \\
             --rdzv-endpoint host0:29500 --nproc-per-node 4 examples/train_ddp.py   # each of two hosts

`import torch` loads torch_tpu, which registers the `tpu_dist` backend and makes LOCAL_RANK's device current.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_dataset(n: int, d_in: int, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, 1, generator=g)
    y = (x @ w).tanh() + 0.05 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--backend", default=None, help="init_process_group's backend (default: PyTorch's choice)")
    parser.add_argument("--accumulate", type=int, default=2, help="micro-batches per optimizer step (no_sync)")
    args = parser.parse_args()

    # With no backend, PyTorch picks the accelerator's: tpu_dist, for tpu tensors (as NCCL for CUDA). Pass
    # --backend cpu:gloo,tpu:tpu_dist to also run collectives on CPU tensors.
    if args.backend:
        dist.init_process_group(args.backend)
    else:
        dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("tpu", torch.tpu.current_device())  # chosen from LOCAL_RANK by torch_tpu

    data = make_dataset(args.samples, 32)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
    model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.MSELoss()

    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros((), device=device)
        batches = 0
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            last_micro = (i + 1) % args.accumulate == 0
            if last_micro:
                loss = loss_fn(model(x), y) / args.accumulate
                loss.backward()  # gradients are averaged across ranks here, bucket by bucket
                opt.step()
                opt.zero_grad()
            else:
                with model.no_sync():  # accumulate locally, no communication
                    loss = loss_fn(model(x), y) / args.accumulate
                    loss.backward()
            total += loss.detach() * args.accumulate
            batches += 1
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {total.item() / batches:.4f} ({world} ranks, {device})", flush=True)
    if rank == 0:
        print(f"done in {time.perf_counter() - t0:.1f}s; LOCAL_RANK={os.environ.get('LOCAL_RANK')}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
