"""DLPack for tpu tensors.

PyTorch exports a PrivateUse1 tensor as a kDLExtDev capsule (device_id = index, data = data_ptr()) and imports
kDLExtDev capsules as PrivateUse1 tensors over that pointer; torch_tpu's storages find the exporter's device buffer
from the pointer (csrc/exec/device_data.cpp), so `from_dlpack(to_dlpack(t))` shares t's storage. Only
`Tensor.__dlpack_device__` needs help: it compares the device type with the literal "privateuse1", which a renamed
backend never matches.
"""

from __future__ import annotations

from typing import Any

import torch

_original_dlpack_device: Any = None


def _dlpack_device(self: torch.Tensor) -> tuple[Any, int]:
    if self.device.type == torch._C._get_privateuse1_backend_name() and not torch.overrides.has_torch_function_unary(
        self
    ):
        from torch.utils.dlpack import DLDeviceType

        return (DLDeviceType.kDLExtDev, self.device.index if self.device.index is not None else 0)
    return _original_dlpack_device(self)


def install() -> None:
    """Idempotent: route tpu tensors' `__dlpack_device__` to kDLExtDev, everything else to PyTorch's method."""
    global _original_dlpack_device
    if _original_dlpack_device is not None:
        return
    _original_dlpack_device = torch.Tensor.__dlpack_device__
    torch.Tensor.__dlpack_device__ = _dlpack_device  # type: ignore[method-assign]
