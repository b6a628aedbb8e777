"""Hugging Face Accelerate on tpu: `accelerate launch --num_processes 2 train.py` (and a `Trainer` under it) runs one
process per tpu device over `tpu_dist`, as it does on CUDA over NCCL.

Accelerate 1.16 knows a device only through its own tables: a device type to a process-group backend
(`TORCH_DISTRIBUTED_BACKENDS`), a `DistributedType` named `MULTI_<DEVICE>`, and `PartialState.set_device`, which
accepts a fixed list of devices. `tpu` is in none of them, so every rank ran alone with no process group (and with
`ddp_backend="tpu_dist"`, with a process group but no DDP: ranks trained apart on shards of the data). This adds `tpu`
to each table. Its distributed type is Accelerate's generic multi-device one (`MULTI_GPU`, whose code paths are the
device-neutral ones: DDP with one device per process, RNG broadcast through the process group); the device itself
is `tpu:<local rank>`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

BACKEND = "tpu_dist"
VISIBLE_DEVICES = "TPU_VISIBLE_CHIPS"


def _on_tpu() -> bool:
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "tpu"


def adapt(state: ModuleType) -> None:
    """Adds tpu to Accelerate's tables; `state` is `accelerate.state`, fully imported (so are its utils)."""
    from accelerate.utils import constants
    from accelerate.utils.dataclasses import DistributedType

    constants.TORCH_DISTRIBUTED_BACKENDS.setdefault("tpu", BACKEND)
    constants.DEVICE_VISIBLE_DEVICES_ENV_VARS.setdefault("tpu", VISIBLE_DEVICES)
    # _prepare_backend names the type f"MULTI_{device.upper()}"; the enum is closed, so the name resolves to the
    # generic member instead of raising.
    DistributedType._value2member_map_.setdefault("MULTI_TPU", DistributedType.MULTI_GPU)

    partial_state = state.PartialState
    original = partial_state.set_device
    if getattr(original, "_torch_tpu", False):
        return

    def set_device(self: Any) -> None:
        if self.device is None and self.distributed_type == DistributedType.MULTI_GPU and _on_tpu():
            index = self.local_process_index % torch.tpu.device_count()
            self.device = torch.device("tpu", index)
            torch.tpu.set_device(index)
            return
        original(self)

    set_device._torch_tpu = True  # type: ignore[attr-defined]
    set_device.__doc__ = original.__doc__
    partial_state.set_device = set_device
