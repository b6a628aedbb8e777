"""TorchTPU's sync/introspection module: materialize or wait for tensors, ask whether a tensor is still pending, and
look at the program that would produce it.

In fused mode a tensor an op produced is *pending* until its device's graph runs (a host read, `synchronize()`, the
node limit, an optimizer step); then it is *materializing* while the program runs, then materialized.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import torch

from torch_tpu import _C


def _tensors(args: Iterable[Any]) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(_tensors(a))
    return out


def _devices(tensors: list[torch.Tensor]) -> list[int]:
    if not tensors:
        return list(range(torch.tpu.device_count()))
    return sorted({t.device.index for t in tensors if t.device.type == "tpu"})


def synchronize(*tensors: Any, wait: bool = True) -> None:
    """Runs the pending graphs of the tensors' devices (every device when none are given); with `wait`, returns once
    their programs finished (their errors, if any, raised here)."""
    if not wait:
        _C._flush()
        return
    for device in _devices(_tensors(tensors)):
        _C._synchronize(device)


def is_materialized(t: torch.Tensor) -> bool:
    """Whether `t`'s contents are (or are being) computed: False while it is pending in a fused graph."""
    return t.device.type != "tpu" or not _C._is_pending(t)


def is_materializing(t: torch.Tensor) -> bool:
    """Whether the program computing `t` was launched and has not finished yet."""
    return t.device.type == "tpu" and not _C._is_pending(t) and _C._is_in_flight(t)


def computation_mlir(*tensors: Any) -> str:
    """The StableHLO text of what produces the tensors: the program their device's pending graph would run now (fused
    mode), or, for a materialized tensor, the program that reads it out of its storage."""
    flat = _tensors(tensors)
    pending = [t for t in flat if t.device.type == "tpu" and _C._is_pending(t)]
    if pending:
        return "".join(_C._pending_program_text(d) for d in _devices(pending))
    return "".join(_C._view_program_text(t) for t in flat if t.device.type == "tpu")


def computation_graphviz(*tensors: Any) -> str:
    """The pending graph of the tensors' devices as a graphviz digraph (recorded ops as nodes, an edge where an op
    reads what another wrote); empty when nothing is pending."""
    return "".join(_C._pending_graph_dot(d) for d in _devices(_tensors(tensors)))


def _dump(text: str, file_name: str) -> None:
    directory = os.path.dirname(file_name)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(file_name, "w") as f:
        f.write(text)


def dump_computation_graphviz(tensors: list[torch.Tensor], file_name: str) -> None:
    _dump(computation_graphviz(*tensors), file_name)


def dump_computation_mlir(tensors: list[torch.Tensor], file_name: str) -> None:
    _dump(computation_mlir(*tensors), file_name)


__all__ = [
    "computation_graphviz",
    "computation_mlir",
    "dump_computation_graphviz",
    "dump_computation_mlir",
    "is_materialized",
    "is_materializing",
    "synchronize",
]
