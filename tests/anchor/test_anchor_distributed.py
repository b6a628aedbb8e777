"""torch.tpu.distributed and the collective torch.tpu.ops: a 2-rank run on CPU-hosted tpu devices with `tpu_dist`
(tests/anchor/dist_cases.py, launched by tests/distributed/launcher.py), and the single-process parts."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401
from tests.distributed.launcher import assert_all_ok, launch

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs Gloo")

tdist = torch.tpu.distributed

LAUNCH_VARS = (
    "TORCH_TPU_XPROF_SESSION_ID",
    "TPU_WORKER_HOSTNAMES",
    "JOB_COMPLETION_INDEX",
    "TORCH_TPU_SLICEBUILDER_ADDRESSES",
    "TORCH_TPU_TOPOLOGY",
    "NNODES",
    "NODE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCH_TPU_BASE_PORT",
    "TORCH_TPU_DEVICES_PER_HOST",
)


def test_two_ranks_gather_scatter_send_recv_ragged_all_to_all_and_meshes() -> None:
    """all_gather_dim, reduce_scatter_dim (sum/max/avg/bxor), send/recv of one and of two tensors, ragged_all_to_all
    with its gradients, topology_aware_mesh into a DeviceMesh, spmd_safe: each against CPU-computed values."""
    assert_all_ok(launch("anchor_ops", 2, deadline_s=120.0))


@pytest.fixture
def _launch_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LAUNCH_VARS:  # setenv first, so that teardown also removes what the test's calls set
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


@pytest.mark.usefixtures("_launch_env")
def test_set_tpu_launch_env_single_host() -> None:
    tdist.set_tpu_launch_env(nproc_per_node=3)
    addresses = os.environ["TORCH_TPU_SLICEBUILDER_ADDRESSES"].split(",")
    assert len(addresses) == 3 and all(a.startswith("localhost:") and int(a.split(":")[1]) > 0 for a in addresses)
    assert os.environ["TORCH_TPU_TOPOLOGY"] == "3,1,1"
    session = os.environ["TORCH_TPU_XPROF_SESSION_ID"]
    assert session.isdigit()
    tdist.set_tpu_launch_env(nproc_per_node=5)  # set variables are never overwritten
    assert os.environ["TORCH_TPU_SLICEBUILDER_ADDRESSES"].split(",") == addresses
    assert os.environ["TORCH_TPU_XPROF_SESSION_ID"] == session
    assert "MASTER_ADDR" not in os.environ and "NODE_RANK" not in os.environ


@pytest.mark.usefixtures("_launch_env")
def test_set_tpu_launch_env_single_host_defaults_to_the_device_count() -> None:
    tdist.set_tpu_launch_env()
    assert len(os.environ["TORCH_TPU_SLICEBUILDER_ADDRESSES"].split(",")) == torch.tpu.device_count()


@pytest.mark.usefixtures("_launch_env")
def test_set_tpu_launch_env_multi_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "h0,h1")
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    monkeypatch.setenv("TORCH_TPU_DEVICES_PER_HOST", "2")
    tdist.set_tpu_launch_env()
    assert os.environ["TORCH_TPU_SLICEBUILDER_ADDRESSES"] == "h0:8070,h0:8071,h1:8070,h1:8071"
    assert (os.environ["NNODES"], os.environ["NODE_RANK"]) == ("2", "1")
    assert (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]) == ("h0", "29500")


@pytest.mark.usefixtures("_launch_env")
def test_set_tpu_launch_env_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "h0,h1")
    with pytest.raises(ValueError, match="nnodes=3 does not match the 2 host"):
        tdist.set_tpu_launch_env(nnodes=3)
    with pytest.raises(ValueError, match="NODE_RANK is unset and cannot be derived"):
        tdist.set_tpu_launch_env(nnodes=2)
    monkeypatch.delenv("TPU_WORKER_HOSTNAMES")
    monkeypatch.delenv("TORCH_TPU_SLICEBUILDER_ADDRESSES", raising=False)
    with pytest.raises(ValueError, match="needs TPU_WORKER_HOSTNAMES"):
        tdist.set_tpu_launch_env(nnodes=2)


def test_window_settings_are_validated_module_properties() -> None:
    from torch_tpu._internal import distributed as impl

    before = (tdist.window_num_stripes, tdist.window_stripe_chunk_mb)
    assert all(isinstance(v, int) and v > 0 for v in before)
    try:
        tdist.window_num_stripes = 8
        tdist.window_stripe_chunk_mb = 16
        assert (tdist.window_num_stripes, tdist.window_stripe_chunk_mb) == (8, 16)
        assert (impl.window_num_stripes, impl.window_stripe_chunk_mb) == (8, 16)
        with pytest.raises(ValueError, match="window_num_stripes must be positive"):
            tdist.window_num_stripes = 0
        with pytest.raises(TypeError, match="window_stripe_chunk_mb must be an int"):
            tdist.window_stripe_chunk_mb = 2.5
        assert tdist.window_num_stripes == 8
    finally:
        tdist.window_num_stripes, tdist.window_stripe_chunk_mb = before


def test_topology_aware_mesh_needs_a_process_group() -> None:
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="initialized process group"):
        tdist.topology_aware_mesh((2,))


def test_one_rank_world() -> None:
    """In a world of one, the collectives are identities and the mesh is [0]; the reduce op names are checked."""
    dist.init_process_group("tpu_dist", store=dist.HashStore(), rank=0, world_size=1)
    try:
        x = torch.randn(3, 4)
        torch.testing.assert_close(torch.tpu.ops.all_gather_dim(x.to("tpu"), 1).cpu(), x)
        torch.testing.assert_close(torch.tpu.ops.reduce_scatter_dim(x.to("tpu"), 0, reduce_op="max").cpu(), x)
        with pytest.raises(ValueError, match="reduce_op must be one of"):
            torch.tpu.ops.reduce_scatter_dim(x.to("tpu"), 0, reduce_op="mean")
        with pytest.raises(ValueError, match="needs an integer dtype"):
            torch.tpu.ops.reduce_scatter_dim(x.to("tpu"), 0, reduce_op="band")
        assert tdist.topology_aware_mesh((1, 1)).tolist() == [[0]]
    finally:
        dist.destroy_process_group()


def test_spmd_safe_keeps_the_function() -> None:
    @tdist.spmd_safe
    def double(x: torch.Tensor) -> torch.Tensor:
        """Doubles."""
        return x * 2

    assert double.__name__ == "double" and double.__doc__ == "Doubles."
    torch.testing.assert_close(double(torch.arange(3.0, device="tpu")).cpu(), torch.tensor([0.0, 2.0, 4.0]))
