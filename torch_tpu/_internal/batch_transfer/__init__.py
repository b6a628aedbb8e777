"""Batched copies between host memory and tpu with one future per batch (TorchTPU's
`torch_tpu._internal.batch_transfer`); see `batch_transfer_impl` for how a batch is issued and awaited."""

from __future__ import annotations

from torch_tpu._internal.batch_transfer.batch_transfer_impl import (
    TransferFuture,
    await_all,
    batch_transfer_d2h,
    batch_transfer_d2h_sync,
    batch_transfer_h2d,
    batch_transfer_h2d_sync,
)

__all__ = [
    "TransferFuture",
    "batch_transfer_d2h",
    "batch_transfer_h2d",
    "batch_transfer_d2h_sync",
    "batch_transfer_h2d_sync",
    "await_all",
]
