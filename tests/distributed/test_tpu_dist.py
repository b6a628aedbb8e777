"""tpu_dist in real processes (2 ranks, one 4-rank run), each launch under a hard deadline (launcher.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import torch_tpu
from tests.distributed.launcher import REPO, assert_all_ok, free_port, launch
from torch_tpu import config
from torch_tpu import distributed as tpu_dist

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs Gloo")


def test_registered_for_tpu() -> None:
    assert tpu_dist.is_registered()
    assert dist.Backend.TPU_DIST == "tpu_dist"
    assert dist.get_default_backend_for_device("tpu") == "tpu_dist"
    assert dist.Backend.backend_capability["tpu_dist"] == ["tpu"]
    assert dist.Backend.backend_capability["tpu"] == ["tpu"]  # TorchTPU's name for the same backend


def test_config_local_rank_and_device_choice() -> None:
    cfg = config.load({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"})
    assert cfg.local_rank == 3 and cfg.cpu_devices == 4 and cfg.dist_check
    assert config.load({}).local_rank is None and config.load({}).cpu_devices == 2
    assert config.load({"TORCH_TPU_CPU_DEVICES": "1", "LOCAL_WORLD_SIZE": "4"}).cpu_devices == 1
    assert not config.load({"TORCH_TPU_DIST_CHECK": "0"}).dist_check
    gloo = config.load({"TORCH_TPU_DIST_CHECK": "gloo"})
    assert gloo.dist_check and not gloo.dist_check_shared_memory and cfg.dist_check_shared_memory
    assert not config.load({"TORCH_TPU_DIST_CPU_ZERO_COPY": "off"}).dist_cpu_zero_copy
    with pytest.raises(ValueError, match="LOCAL_RANK='x' must be an integer"):
        config.load({"LOCAL_RANK": "x"})
    with pytest.raises(ValueError, match="LOCAL_RANK=-1 must be >= 0"):
        tpu_dist.device_for_local_rank(-1, 2)
    assert tpu_dist.device_for_local_rank(1, 2) == 1
    assert tpu_dist.device_for_local_rank(3, 2) == 1
    with pytest.raises(RuntimeError, match="no tpu device"):
        tpu_dist.device_for_local_rank(0, 0)


def test_single_process_group() -> None:
    """World of one in this process: every call goes through TpuDistBackend and its Work objects."""
    store = dist.HashStore()
    dist.init_process_group("tpu_dist", store=store, rank=0, world_size=1)
    try:
        backend = dist.group.WORLD._get_backend(torch.device("tpu"))
        assert isinstance(backend, torch_tpu._C.TpuDistBackend)
        x = torch.arange(6.0, device="tpu")
        work = dist.all_reduce(x, op=dist.ReduceOp.AVG, async_op=True)
        (value,) = work.get_future().wait()
        assert work.is_completed() and torch.equal(value.cpu(), torch.arange(6.0))
        out = torch.empty(6, device="tpu")
        dist.all_gather_into_tensor(out, x)
        assert torch.equal(out.cpu(), x.cpu())
        with pytest.raises(RuntimeError, match="No backend type associated with device type cpu"):
            dist.all_reduce(torch.ones(2))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_match_gloo(world: int) -> None:
    assert_all_ok(launch("collectives", world))


def test_collectives_match_gloo_through_plugin_transfers() -> None:
    # The staging path of every plugin but XLA-CPU (PJRT transfers both ways), exercised here on XLA-CPU.
    assert_all_ok(launch("collectives", 2, env={"TORCH_TPU_DIST_CPU_ZERO_COPY": "0"}))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_collectives_match_gloo_in_async_eager_modes(mode: str) -> None:
    # Staged reads must wait for enqueued programs (strict) or run the open graph (fused) that produce the operands.
    assert_all_ok(launch("collectives", 2, env={"TORCH_TPU_EAGER_MODE": mode}))


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_all_reduce_in_place_on_xla_cpu(mode: str) -> None:
    assert_all_ok(launch("in_place", 2, env={"TORCH_TPU_EAGER_MODE": mode}))


def test_ddp_in_fused_mode() -> None:
    assert_all_ok(launch("ddp", 2, env={"TORCH_TPU_EAGER_MODE": "fused"}))


def test_collectives_under_distributed_debug_detail() -> None:
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps the backend in ProcessGroupWrapper (needs sequence numbers).
    assert_all_ok(launch("collectives", 2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}))


def test_default_backend_and_local_rank_device() -> None:
    assert_all_ok(launch("default_backend", 2))


def test_visible_chips_restrict_devices() -> None:
    # One visible chip per process: every rank's device 0 is its own chip.
    results = launch(
        "default_backend",
        2,
        env={"EXPECT_DEVICE": "0"},
        rank_env=lambda r: {"TPU_VISIBLE_CHIPS": str(r)},
    )
    assert_all_ok(results)


@pytest.mark.parametrize("check", ["1", "gloo"])
def test_mismatched_shapes_raise_on_every_rank(check: str) -> None:
    assert_all_ok(launch("mismatch", 2, env={"TORCH_TPU_DIST_CHECK": check}))


@pytest.mark.parametrize("mode", ["kill", "hang"])
def test_lost_peer_raises_within_timeout(mode: str) -> None:
    results = launch("peer_lost", 2, mode, "5", deadline_s=60)
    assert results[0].returncode == 0, results[0].describe()
    assert "raised" in results[0].stdout, results[0].describe()


# How a script joins the group: PyTorch's documented default (no backend), the explicit pair, TorchTPU's name.
BACKENDS = ["default", "cpu:gloo,tpu:tpu_dist", "tpu"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_ddp_equals_single_process_full_batch(backend: str) -> None:
    assert_all_ok(launch("ddp", 2, env={"CASE_BACKEND": backend}))


@pytest.mark.parametrize("backend", BACKENDS[:2])
def test_fsdp2_equals_unsharded(backend: str) -> None:
    assert_all_ok(launch("fsdp2", 2, env={"CASE_BACKEND": backend}))


@pytest.mark.parametrize("backend", BACKENDS[:2])
def test_dtensor_on_1d_mesh(backend: str) -> None:
    assert_all_ok(launch("dtensor", 2, env={"CASE_BACKEND": backend}))


def test_distributed_checkpoint_save_load(tmp_path) -> None:
    assert_all_ok(launch("dcp", 2, str(tmp_path / "ckpt")))


def test_mpmd_does_not_deadlock() -> None:
    assert_all_ok(launch("mpmd", 2, deadline_s=120))


def test_example_train_ddp_under_torchrun() -> None:
    """examples/train_ddp.py under the real torchrun (its rendezvous, env vars and OMP settings)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port())]
    cmd += ["examples/train_ddp.py", "--epochs", "2", "--samples", "256"]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    losses = [float(m) for m in re.findall(r"mean loss ([0-9.]+)", proc.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0], proc.stdout


def test_two_nodes_with_torchrun_c10d_rendezvous() -> None:
    """Two torchrun agents (as on two hosts, here both on localhost) meet through the c10d rendezvous."""
    port = free_port()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1"]
    cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "tpu_dist_test"]
    cmd += ["examples/train_ddp.py", "--epochs", "2", "--samples", "256"]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    agents = [
        subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = []
    try:
        for agent in agents:
            outputs.append(agent.communicate(timeout=240))
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
    for agent, (out, err) in zip(agents, outputs, strict=True):
        assert agent.returncode == 0, out[-3000:] + err[-6000:]
    losses = [float(m) for out, _ in outputs for m in re.findall(r"mean loss ([0-9.]+) \(2 ranks", out)]
    assert len(losses) == 2 and losses[1] < losses[0], outputs  # rank 0 prints one line per epoch
