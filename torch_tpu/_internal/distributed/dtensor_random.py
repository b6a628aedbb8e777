"""Random ops on sharded DTensors for devices whose generator is CPU's (tpu).

DTensor's default tracker (``OffsetBasedRNGTracker``) assumes a CUDA-style Philox state of 16 bytes (seed, offset)
and moves the offset so that each shard draws its own slice of one global stream. tpu's generator is CPU's
Mersenne Twister (a tpu draw equals the CPU draw for the same seed), which has no offset, so that tracker fails on
its first random op. Without a tracker, as on CPU, every rank draws locally from the same state and the shards of
one parameter come out identical (duplicated rows after ``fully_shard``).

``ShardStreamRNGTracker`` gives each shard a stream of its own instead: on entering a random op it draws two seeds
from the current state (the same on every rank once ranks are seeded alike), seeds the generator from the first
mixed with the shard's linear index for the op, and afterwards seeds it from the second, so ranks stay in step.
Replicas of one shard get equal values, different shards different ones. Unlike CUDA, a sharded draw is not a
slice of the unsharded one (it depends on the mesh): that is the documented difference.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

_SEED_BOUND = 2**63 - 1
_MIX = 0x9E3779B97F4A7C15  # odd 64-bit constant: distinct shard indices give distinct seeds


def _shard_index(spec: Any) -> int:
    """This rank's shard of ``spec`` as one integer: ranks that hold the same data get the same index."""
    from torch.distributed.tensor.placement_types import Shard

    mesh = spec.mesh
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return 0
    index = 0
    for mesh_dim, placement in enumerate(spec.placements):
        if isinstance(placement, Shard):
            index = index * mesh.size(mesh_dim) + coordinate[mesh_dim]
    return index


def _state_seeded(seed: int) -> torch.Tensor:
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator.get_state()


class ShardStreamRNGTracker:
    """A DTensor RNG tracker (the interface of ``torch.distributed.tensor._random._RNGStateTracker``)."""

    def __init__(self, device_types: tuple[str, ...] = ("tpu",)) -> None:
        self._device_types = device_types
        self._use_distribute_region = True

    @property
    def distribute_region_enabled(self) -> bool:
        return self._use_distribute_region

    @distribute_region_enabled.setter
    def distribute_region_enabled(self, value: bool) -> None:
        self._use_distribute_region = value

    @contextlib.contextmanager
    def _distribute_region(self, spec: Any, generator: torch.Generator | None = None) -> Iterator[None]:
        device_type = spec.mesh.device_type
        if not self._use_distribute_region or device_type not in self._device_types:
            yield
            return
        draw = torch.Generator()
        draw.set_state(_get_state(device_type, generator))
        region_seed, next_seed = torch.randint(0, _SEED_BOUND, (2,), generator=draw).tolist()
        shard_seed = (region_seed + _MIX * _shard_index(spec)) % _SEED_BOUND
        _set_state(device_type, generator, _state_seeded(shard_seed))
        try:
            yield
        finally:
            _set_state(device_type, generator, _state_seeded(next_seed))


def _get_state(device_type: str, generator: torch.Generator | None) -> torch.Tensor:
    return (generator or _default_rng(device_type)).get_state()


def _set_state(device_type: str, generator: torch.Generator | None, state: torch.Tensor) -> None:
    (generator or _default_rng(device_type)).set_state(state)


def _default_rng(device_type: str) -> torch.Generator:
    """The generator a random op on `device_type` draws from when it is given none."""
    if device_type == "cpu":
        return torch.default_generator
    module = getattr(torch, device_type)
    return module.default_generators[module.current_device()]


def install(device_types: tuple[str, ...] = ("tpu",)) -> bool:
    """Make DTensor use ``ShardStreamRNGTracker``, unless a tracker is already in place. True when installed."""
    from torch.distributed.tensor import _random

    if _random._rng_tracker is not None:
        return isinstance(_random._rng_tracker, ShardStreamRNGTracker)
    _random._rng_tracker = ShardStreamRNGTracker(device_types)  # type: ignore[assignment]
    return True
