"""Ray Train on tpu: a TorchTrainer with 2 workers on one machine, each on its tpu device, process group `tpu_dist`
(`TorchConfig(backend="tpu_dist")`), trains a small model with DDP and with FSDP2; losses (averaged over the ranks)
and every parameter after the last step equal a single-process run over the full batch on the CPU.

Ray 2.60 knows torch_tpu (its TPU device manager imports `torch_tpu._loader`), but `use_tpu=True` with several
workers asks Ray to reserve a real TPU slice (`topology`, `accelerator_type`), so on a host without one the workers
take CPU resources, the backend is named in TorchConfig, and the model is moved to tpu before `prepare_model(...,
move_to_device=False)`. Runs in its own CI step (`make test-ray`, which installs the pinned Ray); skipped without Ray.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip("ray")
pytest.importorskip("ray.train.torch")

REPO = Path(__file__).resolve().parents[2]
STEPS, LR = 3, 0.1


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)


def _worker(config: dict) -> None:
    """One Ray worker: half the batch on its tpu device, DDP or FSDP2 over tpu_dist; writes losses and params."""
    import ray.train.torch as rtt
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from tests.ecosystem.test_ray_train import _data, _model, _sgd_steps

    assert dist.get_backend() == "tpu_dist", dist.get_backend()
    rank, world = dist.get_rank(), dist.get_world_size()
    import torch_tpu.distributed

    torch_tpu.distributed.select_device()  # Ray sets LOCAL_RANK after the worker imported torch (and torch_tpu)
    dev = torch_tpu.distributed.local_device()
    model = _model().to(dev)
    if config["strategy"] == "ddp":
        model = rtt.prepare_model(model, move_to_device=False)
    else:
        mesh = init_device_mesh("tpu", (world,))
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    x, y = _data()
    losses = _sgd_steps(model, x[rank::world].to(dev), y[rank::world].to(dev))
    params = [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu().tolist() for p in model.parameters()]
    out = Path(config["out"]) / f"rank{rank}.json"
    out.write_text(json.dumps({"losses": losses, "params": params, "device": str(dev)}))


def _sgd_steps(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int = STEPS) -> list[float]:
    """`steps` steps of SGD on the mean squared error; the losses."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _cpu_reference(steps: int = STEPS) -> tuple[list[float], list[torch.Tensor]]:
    model = _model()
    losses = _sgd_steps(model, *_data(), steps=steps)
    return losses, [p.detach() for p in model.parameters()]


RESUMED_STEPS, KILLED_AT = 6, 3


def _resumable_worker(config: dict) -> None:
    """DDP on tpu_dist that reports a checkpoint after every step and resumes from Ray's latest one; on the first
    attempt rank 1 dies (os._exit) in the middle of step KILLED_AT."""
    import tempfile

    import ray.train
    import ray.train.torch as rtt
    import torch.distributed as dist

    import torch_tpu.distributed
    from tests.ecosystem.test_ray_train import _data, _model

    rank, world = dist.get_rank(), dist.get_world_size()
    torch_tpu.distributed.select_device()
    dev = torch_tpu.distributed.local_device()
    model, start, losses = _model().to(dev), 0, []
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            state = torch.load(Path(d) / "state.pt")
        model.load_state_dict(state["model"])
        start, losses = state["step"], state["losses"]
    model = rtt.prepare_model(model, move_to_device=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = _data()
    x, y = x[rank::world].to(dev), y[rank::world].to(dev)
    marker = Path(config["out"]) / "killed"
    for step in range(start, RESUMED_STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if rank == 1 and step == KILLED_AT and not marker.exists():
            marker.touch()
            os._exit(1)  # a worker lost between the backward and the step
        opt.step()
        full = loss.detach().clone()
        dist.all_reduce(full, op=dist.ReduceOp.AVG)
        losses.append(full.item())
        with tempfile.TemporaryDirectory() as d:
            if rank == 0:
                state = {k: v.cpu() for k, v in model.module.state_dict().items()}
                torch.save({"model": state, "step": step + 1, "losses": losses}, Path(d) / "state.pt")
            saved = ray.train.Checkpoint.from_directory(d) if rank == 0 else None
            ray.train.report({"step": step + 1, "loss": losses[-1]}, checkpoint=saved)
    if rank == 0:
        params = [p.detach().cpu().tolist() for p in model.parameters()]
        result = {"losses": losses, "params": params, "resumed_from": start}
        (Path(config["out"]) / "resumed.json").write_text(json.dumps(result))


@pytest.fixture(scope="module")
def cluster():
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_torch_trainer_on_tpu_dist_equals_one_cpu_process(cluster, strategy: str, tmp_path: Path) -> None:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        _worker,
        train_loop_config={"strategy": strategy, "out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1}),
        torch_config=TorchConfig(backend="tpu_dist"),
        run_config=RunConfig(storage_path=str(tmp_path / "ray")),
    )
    trainer.fit()
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["device"] for r in ranks] == ["tpu:0", "tpu:1"]  # one device per worker, by LOCAL_RANK
    want_losses, want_params = _cpu_reference()
    # each rank's loss is the mean over its half; the full batch's loss is the mean of the two halves
    got_losses = [(a + b) / 2 for a, b in zip(ranks[0]["losses"], ranks[1]["losses"], strict=True)]
    torch.testing.assert_close(torch.tensor(got_losses), torch.tensor(want_losses), rtol=1e-5, atol=1e-6)
    for r in ranks:
        for got, want in zip(r["params"], want_params, strict=True):
            torch.testing.assert_close(torch.tensor(got), want, rtol=1e-5, atol=1e-6)


def test_worker_killed_mid_run_resumes_from_the_last_checkpoint(cluster, tmp_path: Path) -> None:
    """Ray's failure handling (FailureConfig(max_failures=1)) restarts the worker group after a worker dies; the run
    goes on from the last reported checkpoint and ends where an uninterrupted run ends."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        _resumable_worker,
        train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1}),
        torch_config=TorchConfig(backend="tpu_dist"),
        run_config=RunConfig(storage_path=str(tmp_path / "ray"), failure_config=FailureConfig(max_failures=1)),
    )
    trainer.fit()
    assert (tmp_path / "killed").exists()
    got = json.loads((tmp_path / "resumed.json").read_text())
    # from a reported checkpoint, not from scratch: the latest one Ray had committed when the worker died (the one of
    # step KILLED_AT, reported just before, may still be in flight then)
    assert 1 <= got["resumed_from"] <= KILLED_AT, got["resumed_from"]
    want_losses, want_params = _cpu_reference(RESUMED_STEPS)
    torch.testing.assert_close(torch.tensor(got["losses"]), torch.tensor(want_losses), rtol=1e-5, atol=1e-6)
    for p, want in zip(got["params"], want_params, strict=True):
        torch.testing.assert_close(torch.tensor(p), want, rtol=1e-5, atol=1e-6)
