"""TorchTPU's `topology_aware_mesh`: the rank layout for a DeviceMesh of a given logical shape.

On a TPU slice TorchTPU places logically adjacent mesh positions on physically adjacent chips of the ICI torus (and
splits axes across slices for multi-slice jobs). XLA-CPU devices have no topology and the job is a single "slice",
so the layout here is row-major: `arange(world_size).reshape(mesh_shape)`. As in TorchTPU, the result is an int64
tensor of global ranks, identical on every rank, to pass as `DeviceMesh("tpu", mesh=...)`.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

__all__ = ["topology_aware_mesh"]


def topology_aware_mesh(
    mesh_shape: tuple[int, ...],
    *,
    dcn_mesh_shape: tuple[int, ...] | None = None,
    allow_split_physical_axes: bool = False,
    contiguous_submeshes: bool = False,
) -> torch.Tensor:
    """int64 tensor of shape `mesh_shape` holding the global ranks 0..world_size-1 in row-major order.

    `mesh_shape`'s product must equal the world size. `dcn_mesh_shape` says which axes span slices: it must have
    `mesh_shape`'s length, divide it elementwise and multiply to the number of slices, which is 1 here (so only an
    all-ones shape is accepted). `allow_split_physical_axes` and `contiguous_submeshes` steer TorchTPU's physical
    placement and change nothing in a row-major layout. RuntimeError when torch.distributed is not initialized.
    """
    if not dist.is_initialized():
        raise RuntimeError("topology_aware_mesh needs an initialized process group: call init_process_group first")
    shape = tuple(int(s) for s in mesh_shape)
    if not shape or any(s <= 0 for s in shape):
        raise ValueError(f"mesh_shape must be a non-empty tuple of positive sizes, got {mesh_shape!r}")
    world = dist.get_world_size()
    if math.prod(shape) != world:
        raise ValueError(f"mesh_shape {shape} has {math.prod(shape)} positions, the world size is {world}")
    if dcn_mesh_shape is not None:
        dcn = tuple(int(s) for s in dcn_mesh_shape)
        if len(dcn) != len(shape) or any(d <= 0 or s % d for s, d in zip(shape, dcn, strict=True)):
            raise ValueError(f"dcn_mesh_shape {dcn_mesh_shape!r} must have {len(shape)} sizes dividing {shape}")
        if math.prod(dcn) != 1:
            raise ValueError(
                f"dcn_mesh_shape {dcn} asks for {math.prod(dcn)} slices; this job runs on 1 (XLA-CPU has no slices)"
            )
    return torch.arange(world, dtype=torch.int64).reshape(shape)
