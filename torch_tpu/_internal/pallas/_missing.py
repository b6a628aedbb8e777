"""The error of the Pallas names not implemented yet."""

from __future__ import annotations

from typing import NoReturn


def not_yet(name: str) -> NoReturn:
    raise NotImplementedError(
        f"torch.tpu.pallas.{name} is not implemented in torch_tpu yet: sharded JAX / Pallas kernels (a mesh over the "
        "torch ranks) are issue 31's open part; unsharded ones run through torch.tpu.pallas.jax_op (docs/anchor_api.md)"
    )
