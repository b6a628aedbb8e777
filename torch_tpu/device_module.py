"""`torch.tpu`: the CUDA-shaped device module (device selection, sync, RNG, memory, streams, events, AMP)."""

from __future__ import annotations

import contextlib
import os
import types
from collections.abc import Iterator
from typing import Any

import torch

from torch_tpu import _C, runtime

# ----------------------------------------------------------------------------------------------------------------
# Devices


def is_available() -> bool:
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def is_initialized() -> bool:
    return is_available() and not _is_in_bad_fork()


_BAD_FORK_MESSAGE = (
    "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must use the 'spawn' "
    "start method"
)


def init() -> None:
    """Starts the runtime (torch_tpu starts it at import); raises in a child forked after that, as CUDA does."""
    _lazy_init()


def _lazy_init() -> None:
    if _is_in_bad_fork():
        raise RuntimeError(_BAD_FORK_MESSAGE)
    runtime.get()


def _is_in_bad_fork() -> bool:
    """True in a process forked after the tpu runtime started: the runtime's threads stayed in the parent."""
    return bool(_C._is_in_bad_fork())


def _index(device: Any = None) -> int:
    """Device index of `device` (None: current; int; 'tpu:1'; torch.device)."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {d}")
    return current_device() if d.index is None else d.index


def current_device() -> int:
    return _C._current_device()


def set_device(device: Any) -> None:
    index = _index(device)
    if index >= 0:
        _C._set_device(index)


class device:  # noqa: N801 - the name torch.cuda uses
    """Context manager that makes `index` the current tpu device."""

    def __init__(self, index: Any) -> None:
        self.idx = _index(index) if index is not None else -1
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = current_device()
        if self.idx >= 0:
            set_device(self.idx)

    def __exit__(self, *exc: object) -> None:
        if self.idx >= 0:
            set_device(self.prev_idx)


def synchronize(device: Any = None) -> None:
    _lazy_init()
    _C._synchronize(_index(device))


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def _int_attribute(attributes: dict[str, str], *names: str) -> int | None:
    for name in names:
        try:
            return int(attributes[name])
        except (KeyError, ValueError):
            continue
    return None


class _DeviceProperties:
    """What the plugin reports about one device, under torch.cuda's property names where one exists."""

    def __init__(self, index: int) -> None:
        rt = runtime.get()
        info = rt.devices[index]
        kind = info["kind"]
        platform = rt.client.platform_name
        attributes: dict[str, str] = dict(info.get("attributes", {}))
        self.name: str = f"XLA {kind.upper()}" if platform == "cpu" else kind
        self.type = "tpu"
        self.platform: str = platform
        self.platform_version: str = rt.client.platform_version
        self.device_kind: str = kind
        self.description: str = info["description"]
        self.attributes = attributes
        self.index = index
        self.pjrt_id: int = info["id"]
        self.total_memory: int = _C._device_capacity(index)
        # Cores: the plugin's count where it reports one; XLA-CPU devices share the host's cores.
        cores = _int_attribute(attributes, "core_count", "num_cores", "multi_processor_count")
        if cores is None:
            cores = (os.cpu_count() or 1) if platform == "cpu" else 1
        self.multi_processor_count: int = cores
        self.major, self.minor = _capability_of(attributes)
        capability = torch._C._accelerator_getDeviceCapability(index)
        self.supported_dtypes: list[torch.dtype] = sorted(capability["supported_dtypes"], key=str)

    def __repr__(self) -> str:
        return (
            f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
            f"total_memory={self.total_memory // (1 << 20)}MB, multi_processor_count={self.multi_processor_count})"
        )


def _capability_of(attributes: dict[str, str]) -> tuple[int, int]:
    """(major, minor) where the plugin reports one (XLA-CUDA: compute_capability "9.0"), else (0, 0)."""
    text = attributes.get("compute_capability", "")
    parts = text.split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return int(parts[0]), int(parts[1])
    return 0, 0


def get_device_properties(device: Any = None) -> _DeviceProperties:
    index = _index(device)
    if not 0 <= index < device_count():
        raise AssertionError(f"Invalid device id {index}")
    return _DeviceProperties(index)


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor) as torch.cuda returns it: the plugin's compute capability where it has one, else (0, 0).
    torch.accelerator.get_device_capability() gives the supported dtypes."""
    props = get_device_properties(device)
    return props.major, props.minor


# ----------------------------------------------------------------------------------------------------------------
# Random numbers


class _Generators:
    def __getitem__(self, index: int) -> torch.Generator:
        return _C._default_generator(index)

    def __len__(self) -> int:
        return device_count()

    def __iter__(self) -> Iterator[torch.Generator]:
        return (self[i] for i in range(len(self)))


default_generators = _Generators()


def get_rng_state(device: Any = "tpu") -> torch.Tensor:
    return default_generators[_index(device)].get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "tpu") -> None:
    default_generators[_index(device)].set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [g.get_state() for g in default_generators]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for g, s in zip(default_generators, new_states, strict=True):
        g.set_state(s)


def manual_seed(seed: int) -> None:
    default_generators[current_device()].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    default_generators[current_device()].seed()


def seed_all() -> None:
    for g in default_generators:
        g.seed()


def initial_seed() -> int:
    return default_generators[current_device()].initial_seed()


# ----------------------------------------------------------------------------------------------------------------
# Memory


def memory_stats(device: Any = None) -> dict[str, int]:
    return dict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Storages free their device buffers when they die; there is no cache to empty."""


def mem_get_info(device: Any = None) -> tuple[int, int]:
    return tuple(_C._mem_get_info(_index(device)))  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------------------------
# Streams and events (executions on one device are ordered; streams name that queue)


def Stream(device: Any = None, priority: int = 0) -> torch.Stream:  # noqa: N802 - torch.cuda.Stream's name
    """A stream of the given (default: current) tpu device, as torch.Stream."""
    return torch.Stream(device=torch.device("tpu", _index(device)), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:  # noqa: N802
    """A tpu event, as torch.Event."""
    return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device: Any = None) -> torch.Stream:
    return torch._C._accelerator_getStream(_index(device))


def default_stream(device: Any = None) -> torch.Stream:
    s = current_stream(device)
    return torch.Stream(stream_id=0, device_index=s.device_index, device_type=s.device_type)


def set_stream(stream: torch.Stream) -> None:
    torch._C._accelerator_setStream(stream)


@contextlib.contextmanager
def stream(s: torch.Stream | None) -> Iterator[None]:
    if s is None:
        yield
        return
    prev = current_stream(s.device_index)
    set_stream(s)
    try:
        yield
    finally:
        set_stream(prev)


# ----------------------------------------------------------------------------------------------------------------
# Dtypes and AMP


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


# ----------------------------------------------------------------------------------------------------------------
# TorchTPU's names under torch.tpu (the anchor's public table: docs/anchor_api.md)


def device_of(obj: Any) -> contextlib.AbstractContextManager[None]:
    """Runs the block on the tpu device `obj` (a tensor) is on; a no-op for a CPU tensor, as torch.cuda.device_of."""
    if isinstance(obj, torch.Tensor) and obj.device.type == "tpu":
        return device(obj.device.index)
    return contextlib.nullcontext()


def topology_aware_mesh(
    mesh_shape: tuple[int, ...],
    *,
    dcn_mesh_shape: tuple[int, ...] | None = None,
    allow_split_physical_axes: bool = False,
    contiguous_submeshes: bool = False,
) -> torch.Tensor:
    """TorchTPU's deprecated spelling of `torch.tpu.distributed.topology_aware_mesh` (same arguments and result)."""
    import warnings

    from torch_tpu._internal.distributed import mesh

    warnings.warn(
        "torch.tpu.topology_aware_mesh is deprecated: use torch.tpu.distributed.topology_aware_mesh",
        DeprecationWarning,
        stacklevel=2,
    )
    return mesh.topology_aware_mesh(
        mesh_shape,
        dcn_mesh_shape=dcn_mesh_shape,
        allow_split_physical_axes=allow_split_physical_axes,
        contiguous_submeshes=contiguous_submeshes,
    )


def _execution_mode() -> Any:
    from torch_tpu._internal import execution_mode

    return execution_mode


def set_eager_mode(mode: Any) -> Any:
    """TorchTPU's set_eager_mode: sets the mode now; `with` restores the previous one at the block's end."""
    return _execution_mode().set_eager_mode(mode)


def precision(mode: Any) -> contextlib.AbstractContextManager[None]:
    """TorchTPU's precision(mode): the block's matrix products run at `mode` (torch_tpu/_internal/precision.py)."""
    from torch_tpu._internal import precision as p

    return p.precision(mode)


def _get_cache_stats() -> Any:
    """Compile-cache requests, hits and per-program stats (torch_tpu/_internal/compile_cache.py)."""
    from torch_tpu._internal import compile_cache

    return compile_cache.get_cache_stats()


def _clear_cache() -> None:
    """Drops the compiled programs from memory and the disk cache."""
    from torch_tpu._internal import compile_cache

    compile_cache.clear_cache()


def _hbm_usage_summary() -> str:
    """Device memory per tpu device, one line each (XLA-CPU's 'HBM' is host memory)."""
    lines = []
    for index in range(device_count()):
        stats = memory_stats(index)
        free, total = mem_get_info(index)
        lines.append(
            f"tpu:{index}: allocated {stats.get('allocated_bytes.all.current', 0)} B, "
            f"peak {stats.get('allocated_bytes.all.peak', 0)} B, free {free} B of {total} B"
        )
    return "\n".join(lines)


def __getattr__(name: str) -> Any:
    if name == "EagerMode":  # imported on first use: the enum's module needs the extension loaded
        return _execution_mode().EagerMode
    if name == "Precision":
        from torch_tpu._internal import precision as p

        return p.Precision
    raise AttributeError(f"module 'torch.tpu' has no attribute {name!r}")


class TpuModule(types.ModuleType):
    """torch.tpu's module type: `torch.tpu.eager_mode` is a property (TorchTPU's), read and set like the module
    property of torch_tpu._internal.execution_mode."""

    @property
    def eager_mode(self) -> Any:
        return _execution_mode().eager_mode

    @eager_mode.setter
    def eager_mode(self, mode: Any) -> None:
        _execution_mode().set_eager_mode(mode)

    @property
    def allow_excess_precision(self) -> bool:
        from torch_tpu._internal import compile_cache

        return compile_cache.allow_excess_precision()

    @allow_excess_precision.setter
    def allow_excess_precision(self, value: bool) -> None:
        from torch_tpu._internal import compile_cache

        compile_cache.set_allow_excess_precision(value)
