"""The error both Pallas names raise until issue 31 lands."""

from __future__ import annotations

from typing import NoReturn


def not_yet(name: str) -> NoReturn:
    raise NotImplementedError(
        f"torch.tpu.pallas.{name} is not implemented in torch_tpu yet: running JAX / Pallas kernels on tpu tensors "
        "needs a JAX-to-StableHLO bridge into torch_tpu's programs, which is issue 31 (see docs/anchor_api.md)"
    )
