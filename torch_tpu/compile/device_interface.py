"""The DeviceInterface Dynamo and Inductor use for the `tpu` device: torch.tpu's answers.

torch 2.13 ships its own `TpuInterface` (device 0 only, no f64/f16, availability = "torch.tpu exists") and installs it
unconditionally the first time any interface is looked up, so `install()` forces that lookup first and then
replaces the entry.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import torch
from torch._dynamo import device_interface as _di

_Properties = namedtuple("_Properties", ["multi_processor_count", "name", "total_memory"])


def _tpu() -> Any:
    return torch.tpu  # type: ignore[attr-defined]  # the device module torch_tpu registers


class TpuDeviceInterface(_di.DeviceInterface):
    """Device selection, sync, streams and properties of torch_tpu's `tpu` device."""

    class device:  # noqa: N801 - DeviceInterface's name
        def __new__(cls, device: Any) -> Any:
            return _tpu().device(device)

    class Event(torch.Event):  # a torch.Event, so Dynamo can trace it
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("device", "tpu")
            return torch.Event(*args, **kwargs)

    class Stream(torch.Stream):
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return _tpu().Stream(*args, **kwargs)

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            _tpu().set_device(device)

        @staticmethod
        def current_device() -> int:
            return int(_tpu().current_device())

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            props = _tpu().get_device_properties(device)
            return _Properties(1, props.name, getattr(props, "total_memory", 0))

    @staticmethod
    def current_device() -> int:
        return int(_tpu().current_device())

    @staticmethod
    def set_device(device: Any) -> None:
        _tpu().set_device(device)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        previous = int(_tpu().current_device())
        if device >= 0 and device != previous:
            _tpu().set_device(device)
        return previous

    @staticmethod
    def exchange_device(device: int) -> int:
        return TpuDeviceInterface.maybe_exchange_device(device)

    @staticmethod
    def device_count() -> int:
        return int(_tpu().device_count())

    @staticmethod
    def is_available() -> bool:
        return bool(_tpu().is_available())

    @staticmethod
    def stream(stream: torch.Stream) -> Any:
        return _tpu().stream(stream)

    @staticmethod
    def current_stream() -> torch.Stream:
        return _tpu().current_stream()

    @staticmethod
    def set_stream(stream: torch.Stream) -> None:
        _tpu().set_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _tpu().set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return int(_tpu().current_stream(device_idx).stream_id)

    @staticmethod
    def synchronize(device: Any = None) -> None:
        _tpu().synchronize(device)

    @staticmethod
    def get_compute_capability(device: Any = None) -> Any:
        major, minor = _tpu().get_device_capability(device)
        return major * 10 + minor

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return dtype is not torch.complex32

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return int(_tpu().memory_allocated(device))

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False


def install() -> None:
    """Makes TpuDeviceInterface the interface Dynamo returns for "tpu" and "tpu:N"."""
    dict(_di.get_registered_device_interfaces())  # runs init_device_reg now, which would overwrite a later entry
    _di.register_interface_for_device("tpu", TpuDeviceInterface)
    for index in range(TpuDeviceInterface.device_count()):
        _di.register_interface_for_device(f"tpu:{index}", TpuDeviceInterface)
