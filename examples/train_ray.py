"""Ray Train's TorchTrainer on tpu: DDP over `tpu_dist`, then a check against one process training on the full batch.

    pip install "ray[train]"        # not a torch_tpu dependency
    python examples/train_ray.py    # starts a local Ray instance with two workers

Each worker imports torch (which loads torch_tpu and registers `tpu_dist`), picks its device from LOCAL_RANK, and
trains a small MLP for a few SGD steps on its half of the batch. The workers save their final weights; the driver
trains the same model on the whole batch in one process and checks that every worker ended with the same weights.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
from torch import nn

import torch_tpu.distributed

STEPS = 3
BATCH = 16


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 1, generator=g)


def build_model() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))


def flat_weights(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().cpu().flatten() for p in model.parameters()])


def train_loop(config: dict) -> None:
    import torch.distributed as dist

    torch_tpu.distributed.select_device()  # LOCAL_RANK -> current device (Ray sets it after torch is imported)
    device = torch_tpu.distributed.local_device()
    rank, world = dist.get_rank(), dist.get_world_size()
    model = nn.parallel.DistributedDataParallel(build_model().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    part = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    for _ in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(model(x[part].to(device)), y[part].to(device)).backward()
        opt.step()
    record = {"weights": flat_weights(model), "device": str(device), "backend": str(dist.get_backend())}
    torch.save(record, Path(config["out"]) / f"rank{rank}.pt")


def main() -> None:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    out = Path(tempfile.mkdtemp(prefix="torch_tpu_ray_"))
    ray.init(num_cpus=2, include_dashboard=False)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"out": str(out)},
        torch_config=TorchConfig(backend="cpu:gloo,tpu:tpu_dist"),
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(out / "ray")),
    )
    trainer.fit()

    reference = build_model()
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, y = data()
    for _ in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(reference(x), y).backward()
        opt.step()
    want = flat_weights(reference)
    records = sorted(out.glob("rank*.pt"))
    assert len(records) == 2, f"expected two worker results in {out}, found {len(records)}"
    for path in records:
        got = torch.load(path)
        diff = (got["weights"] - want).abs().max().item()
        print(f"{path.stem}: {got['device']}, backend {got['backend']}, max |diff| vs one process: {diff:.2e}")
        torch.testing.assert_close(got["weights"], want, rtol=1e-5, atol=1e-6)
    print("Ray Train on tpu: OK", f"(pid {os.getpid()})")


if __name__ == "__main__":
    main()
