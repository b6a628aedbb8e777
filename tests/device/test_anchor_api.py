"""TorchTPU's API (Google's torch-tpu 0.2.0) on torch_tpu: the names of docs/anchor_api.md resolve as marked, the
execution-mode API keeps its two views of the mode in agreement with ours, and the sync module tells pending from
materialized tensors and shows the pending program."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import torch

import torch_tpu
from torch_tpu import config
from torch_tpu._internal import execution_mode as em
from torch_tpu._internal import sync

TABLE = Path(__file__).resolve().parents[2] / "docs" / "anchor_api.md"


def resolves(name: str) -> bool:
    """Whether the dotted `name` is importable or an attribute of an importable module."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return False
        return True
    return False


def _table() -> list[tuple[str, str]]:
    return re.findall(r"^\| `([^`]+)` \| (done|missing) \|", TABLE.read_text(), flags=re.M)


def test_table_lists_the_71_public_names() -> None:
    assert len([n for n, _ in _table() if n.startswith("torch.tpu.") and not n.startswith("torch.tpu._")]) == 71


@pytest.mark.parametrize("name,state", _table())
def test_name_resolves_as_the_table_says(name: str, state: str) -> None:
    assert resolves(name) == (state == "done"), f"{name} is marked {state}: update docs/anchor_api.md"


def test_modes_agree_across_both_apis() -> None:
    before = torch_tpu.get_eager_mode()
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_NEVER):
        assert torch_tpu.get_eager_mode() == "strict" and torch.tpu.eager_mode == em.EagerMode.DEFER_NEVER
        em.eager_mode = em.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
        assert torch_tpu.get_eager_mode() == "debug"
        with torch_tpu.set_eager_mode("fused"):  # ours, used as a context manager
            assert em.eager_mode == em.EagerMode.DEFER_AND_FUSE == em.EagerMode.OPTIMIZED
        assert torch_tpu.get_eager_mode() == "debug"
    assert torch_tpu.get_eager_mode() == before
    switch = torch_tpu.set_eager_mode("strict")  # ours, used as a setter
    assert torch.tpu.eager_mode == em.EagerMode.DEFER_NEVER
    torch_tpu.set_eager_mode(switch.previous)
    with pytest.raises(ValueError, match="eager mode must be one of"):
        torch_tpu.set_eager_mode("lazy")


@pytest.mark.parametrize(
    "env,mode",
    [
        ({"TORCH_TPU_DEFER_AND_FUSE": "1"}, "fused"),
        ({"TORCH_TPU_DEFER_AND_FUSE": "0"}, "strict"),
        ({"TORCH_TPU_LAUNCH_BLOCKING": "1"}, "debug"),
        ({"TORCH_TPU_LAUNCH_BLOCKING": "1", "TORCH_TPU_EAGER_MODE": "debug"}, "debug"),
        ({}, "fused"),
    ],
)
def test_torchtpu_environment_switches(env: dict[str, str], mode: str) -> None:
    assert config.load(env).eager_mode == mode


def test_environment_switches_that_disagree_are_refused() -> None:
    with pytest.raises(ValueError, match="disagree"):
        config.load({"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_EAGER_MODE": "strict"})


def test_pending_then_materialized_and_the_pending_program() -> None:
    with torch_tpu.eager_mode("fused"):
        for _ in range(2):  # the second pass records known structures: an op-level graph
            x = torch.ones(6, device="tpu") * 3 + 1
            assert not sync.is_materialized(x)
            text = sync.computation_mlir(x)
            assert "func.func @main" in text and "stablehlo.multiply" in text or "stablehlo.add" in text
            assert sync.computation_graphviz(x).startswith("digraph pending")
            assert not sync.is_materialized(x)  # looking ran nothing
            sync.synchronize(x)
            assert sync.is_materialized(x) and not sync.is_materializing(x)
        assert "func.func @main" in sync.computation_mlir(x)  # a materialized tensor: the program reading it
        torch.testing.assert_close(x.cpu(), torch.full((6,), 4.0))


def test_inplace_donation_switch() -> None:
    x = torch.zeros(8, device="tpu")
    x.add_(1).cpu()
    before = torch_tpu.metrics()["donations"]
    em.disable_inplace_buffer_donation = True
    try:
        x.add_(1).cpu()
        assert torch_tpu.metrics()["donations"] == before
    finally:
        em.disable_inplace_buffer_donation = False
    x.add_(1).cpu()
    assert torch_tpu.metrics()["donations"] > before
    torch.testing.assert_close(x.cpu(), torch.full((8,), 3.0))


def test_cpu_fallback_switch() -> None:
    em.enable_cpu_fallback = False
    try:
        with pytest.raises(NotImplementedError, match="TORCH_TPU_FALLBACK=error"):
            torch.linalg.eigvals(torch.eye(2, device="tpu"))
    finally:
        em.enable_cpu_fallback = True
    assert em.enable_cpu_fallback


def test_device_of() -> None:
    x = torch.ones(1, device="tpu:1") if torch.tpu.device_count() > 1 else torch.ones(1, device="tpu")
    with torch.tpu.device_of(x):
        assert torch.tpu.current_device() == x.device.index
    with torch.tpu.device_of(torch.ones(1)):
        pass  # a CPU tensor: no device change
