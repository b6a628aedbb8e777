"""`torch_tpu._loader`, the module TorchTPU's wheel names as its `torch.backends` hook and that Ray's TPU device
manager calls (`torch_tpu._loader.load()`) to register the `tpu_dist` backend. Here importing torch_tpu does the
whole setup, so both functions only make sure that has happened; they are safe to call any number of times."""

from __future__ import annotations

import importlib


def load() -> None:
    """Sets up the `tpu` device, `torch.tpu`, the `tpu_dist` c10d backend and the `tpu` compile backend."""
    importlib.import_module("torch_tpu")


def _init_device(name: str = "tpu") -> None:
    """TorchTPU's device initialisation for the PrivateUse1 name `name`; only "tpu" is served."""
    if name != "tpu":
        raise ValueError(f"torch_tpu registers PyTorch's PrivateUse1 device as 'tpu', not {name!r}")
    load()
