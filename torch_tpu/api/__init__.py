"""Entry points other projects call by name (PyTorch's torch.tpu shim, Dynamo's TpuInterface, Ray, vLLM)."""

from __future__ import annotations

import torch


def tpu_device() -> torch.device:
    """Initialises torch_tpu and returns torch.device('tpu')."""
    from torch_tpu import _registration

    _registration.register()
    return torch.device("tpu")


__all__ = ["tpu_device"]
