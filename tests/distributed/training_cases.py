"""Rank programs for training-level tests: DDP, FSDP2, DTensor, distributed checkpoint, MPMD (run by launcher.py
through `python -m tests.distributed.cases <case>`)."""

from __future__ import annotations

import copy
import datetime
import os
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

TPU = "tpu"
RTOL, ATOL = 1e-5, 1e-6


def _init(timeout_s: float = 90.0) -> tuple[int, int, torch.device]:
    """Joins the group the way CASE_BACKEND says: a backend string, or "default" for init_process_group() with none."""
    backend = os.environ.get("CASE_BACKEND", "cpu:gloo,tpu:tpu_dist")
    timeout = datetime.timedelta(seconds=timeout_s)
    if backend == "default":
        dist.init_process_group(timeout=timeout)
    else:
        dist.init_process_group(backend, timeout=timeout)
    return dist.get_rank(), dist.get_world_size(), torch.device(TPU, torch.tpu.current_device())


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))


def _batch(n: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g), torch.randn(n, 4, generator=g)


def _close(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    where = f"rank {dist.get_rank()} {name}"
    got, want = got.detach().cpu(), want.detach().cpu()
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, msg=lambda m: f"{where}: {m}")


# ------------------------------------------------------------------------------------------------------------------
def case_ddp() -> None:
    """DDP (several gradient buckets, no_sync accumulation) equals single-process training on the full batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world, dev = _init()
    ref = _model().to(dev)
    ddp = DDP(copy.deepcopy(ref), bucket_cap_mb=0.0005)  # ~500 bytes per bucket: several buckets for this model
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    accum, per_rank = 2, 4
    loss_fn = nn.MSELoss()
    for step in range(3):
        x, y = _batch(accum * per_rank * world, seed=10 + step)
        micro_x, micro_y = x.chunk(accum), y.chunk(accum)
        opt_ref.zero_grad()
        for mx, my in zip(micro_x, micro_y, strict=True):
            (loss_fn(ref(mx.to(dev)), my.to(dev)) / accum).backward()
        opt_ref.step()

        opt.zero_grad()
        for i, (mx, my) in enumerate(zip(micro_x, micro_y, strict=True)):
            lx = mx[rank * per_rank : (rank + 1) * per_rank].to(dev)
            ly = my[rank * per_rank : (rank + 1) * per_rank].to(dev)
            if i < accum - 1:
                with ddp.no_sync():  # accumulate locally, no all_reduce
                    (loss_fn(ddp(lx), ly) / accum).backward()
            else:
                (loss_fn(ddp(lx), ly) / accum).backward()
        opt.step()
    # The first iteration runs one bucket; DDP then rebuilds them in gradient order under bucket_cap_mb.
    buckets = str(ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", ""))
    assert len(buckets.split(",")) > 1, f"expected several gradient buckets, got sizes {buckets!r}"
    for (name, p), p_ref in zip(ddp.module.named_parameters(), ref.parameters(), strict=True):
        assert p.device.type == TPU
        _close(f"DDP param {name}", p, p_ref)
    dist.destroy_process_group()
    print(f"rank {rank}: ddp ok")


# ------------------------------------------------------------------------------------------------------------------
def case_fsdp2() -> None:
    """fully_shard training steps equal unsharded training on the full batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    rank, world, dev = _init()
    mesh = init_device_mesh(TPU, (world,))
    ref = _model().to(dev)
    model = copy.deepcopy(ref)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=0.01)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    per_rank = 4
    for step in range(2):
        x, y = _batch(per_rank * world, seed=20 + step)
        opt_ref.zero_grad()
        nn.functional.mse_loss(ref(x.to(dev)), y.to(dev)).backward()
        opt_ref.step()
        opt.zero_grad()
        sl = slice(rank * per_rank, (rank + 1) * per_rank)
        nn.functional.mse_loss(model(x[sl].to(dev)), y[sl].to(dev)).backward()
        opt.step()
    for (name, p), p_ref in zip(model.named_parameters(), ref.parameters(), strict=True):
        assert p.to_local().device.type == TPU, p.to_local().device
        _close(f"FSDP2 param {name}", p.full_tensor(), p_ref)
    dist.destroy_process_group()
    print(f"rank {rank}: fsdp2 ok")


# ------------------------------------------------------------------------------------------------------------------
def case_dtensor() -> None:
    """DTensor basics on a 1-D tpu DeviceMesh."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    rank, world, dev = _init()
    mesh = init_device_mesh(TPU, (world,))
    g = torch.Generator().manual_seed(5)
    a = torch.randn(4 * world, 6, generator=g)
    b = torch.randn(6, 3, generator=g)
    da = distribute_tensor(a.to(dev), mesh, [Shard(0)])
    db = distribute_tensor(b.to(dev), mesh, [Replicate()])
    assert da.to_local().shape == (4, 6) and da.to_local().device.type == TPU
    _close("local shard", da.to_local(), a[rank * 4 : (rank + 1) * 4])
    _close("elementwise", (da * 2 + 1).full_tensor(), a * 2 + 1)
    _close("matmul", (da @ db).full_tensor(), a @ b)
    _close("sum (partial -> replicate)", da.sum().full_tensor(), a.sum())
    _close("Shard(0) -> Replicate", da.redistribute(mesh, [Replicate()]).to_local(), a)
    _close("Shard(0) -> Shard(1)", da.redistribute(mesh, [Shard(1)]).full_tensor(), a)
    _dtensor_random(mesh, dev)
    dist.destroy_process_group()
    print(f"rank {rank}: dtensor ok")


def _dtensor_random(mesh: object, dev: torch.device) -> None:
    """Random ops on DTensors (as in a sharded model's init): shards draw different values, replicas equal ones, and
    the ranks' generators stay in step; the same seed gives the same values again."""
    import torch.distributed.tensor as dt
    from torch.distributed.tensor import Replicate, Shard

    world = dist.get_world_size()

    def draw() -> list[torch.Tensor]:
        torch.manual_seed(11)
        sharded = dt.zeros(4 * world, 6, device_mesh=mesh, placements=[Shard(0)])
        sharded.normal_()
        replicated = dt.zeros(5, device_mesh=mesh, placements=[Replicate()])
        replicated.uniform_()
        created = dt.randn(2 * world, 3, device_mesh=mesh, placements=[Shard(0)])
        after = torch.randn(3, device=dev)
        return [t.cpu() for t in (sharded.full_tensor(), replicated.to_local(), created.full_tensor(), after)]

    first, second = draw(), draw()
    for got, want in zip(first, second, strict=True):
        assert torch.equal(got, want), "the same seed drew different values"
    sharded, replicated, created, after = first
    assert not torch.equal(sharded[:4], sharded[4:8]), "shards of one DTensor drew the same values"
    assert not torch.equal(created[:2], created[2:4])
    assert 0.5 < sharded.std().item() < 1.5 and 0 <= replicated.min().item() and replicated.max().item() < 1
    for name, local in (("replicated", replicated), ("generator after the ops", after)):
        gathered = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather_object(gathered, local)
        assert all(torch.equal(g, local) for g in gathered), f"ranks disagree: {name}"


# ------------------------------------------------------------------------------------------------------------------
def case_dcp(directory: str) -> None:
    """torch.distributed.checkpoint saves an FSDP2-sharded model and loads it into a fresh sharded model."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    rank, world, dev = _init()
    mesh = init_device_mesh(TPU, (world,))
    saved = _model(seed=1).to(dev)
    fully_shard(saved, mesh=mesh)
    dcp.save(saved.state_dict(), checkpoint_id=directory)
    loaded = _model(seed=2).to(dev)
    fully_shard(loaded, mesh=mesh)
    state = loaded.state_dict()
    dcp.load(state, checkpoint_id=directory)
    loaded.load_state_dict(state)
    for (name, p), q in zip(loaded.named_parameters(), saved.parameters(), strict=True):
        assert p.to_local().device.type == TPU
        assert torch.equal(p.full_tensor().cpu(), q.full_tensor().cpu()), f"rank {rank}: {name} differs after load"
    dist.destroy_process_group()
    print(f"rank {rank}: dcp ok")


# ------------------------------------------------------------------------------------------------------------------
def case_mpmd() -> None:
    """Ranks run different programs between collectives (rank 0 logs, syncs and computes extra): no deadlock, right
    results."""
    rank, world, dev = _init(timeout_s=60)
    x = torch.full((16,), float(rank + 1), device=dev)
    for step in range(3):
        work = dist.all_reduce(x, async_op=True)
        if rank == 0:
            w = torch.randn(32, 32, device=dev)
            for _ in range(5):
                w = torch.tanh(w @ w.t() / 32)
            print(f"step {step}: extra work norm {w.norm().item():.4f}", flush=True)
            dist.send(torch.tensor([float(step)], device=dev), dst=world - 1)
        if rank == world - 1:
            got = torch.empty(1, device=dev)
            dist.recv(got, src=0)
            assert got.item() == step
        work.wait()
    expected = float(sum(range(1, world + 1))) * world**2
    assert torch.equal(x.cpu(), torch.full((16,), expected)), x.cpu()
    sub = dist.new_group([0])  # every rank calls new_group; only rank 0 is a member and uses it
    if rank == 0:
        y = torch.ones(2, device=dev)
        dist.all_reduce(y, group=sub)
        assert torch.equal(y.cpu(), torch.ones(2))
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: mpmd ok")


CASES: dict[str, Callable[..., None]] = {
    "ddp": case_ddp,
    "fsdp2": case_fsdp2,
    "dtensor": case_dtensor,
    "dcp": case_dcp,
    "mpmd": case_mpmd,
}
