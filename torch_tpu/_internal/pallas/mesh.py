"""TorchTPU's `torch.tpu.pallas.get_pallas_mesh`; raises NotImplementedError (sharded kernels are not supported)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from torch_tpu._internal.pallas._missing import not_yet

__all__ = ["get_pallas_mesh"]


def get_pallas_mesh(
    axis_names: Sequence[str] | str,
    mesh_shape: Sequence[int] | None = None,
    process_group: Any = None,
) -> NoReturn:
    """In TorchTPU, a `jax.sharding.Mesh` whose positions are the devices of the torch ranks. Here it raises
    NotImplementedError: jax_op runs unsharded kernels only."""
    not_yet("get_pallas_mesh")
