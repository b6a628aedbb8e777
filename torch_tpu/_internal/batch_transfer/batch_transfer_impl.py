"""Batched host<->tpu copies with one completion handle per batch (TorchTPU's `torch_tpu._internal.batch_transfer`).

How a batch is issued here: every (source, destination) pair becomes one `destination.copy_(source,
non_blocking=True)`, all issued back to back before anything waits. torch_tpu's copy makes that asynchronous when the
host side is pinned (`pin_memory=True`), contiguous and of the same dtype, and the device side is a whole tensor:
an upload starts and the call returns; a download starts and is waited for at the next device synchronisation. Any
other pair (pageable host memory, views, a copy into a slice) is completed synchronously while the batch is issued.
`TransferFuture.wait()` (and `await_all`) then synchronises each tpu device the batch touched once, and for uploads
polls until every destination buffer is defined, so the host sources may be reused afterwards.

Semantics kept from TorchTPU: the destinations are given (`dst_arrs`) and written in place; `src_offsets_major_dim`,
`dst_offsets_major_dim` and `copy_sizes_major_dim` (empty, or one entry per pair) copy
`src[so:so + n]` into `dst[do:do + n]` along dimension 0. TorchTPU copies raw (padded) device buffers, so its host
staging tensors may be larger than the device tensor; here copies are logical, and a host tensor with more elements
than its device partner exchanges its leading elements (row-major), so scripts that size host buffers generously keep
working. Dtypes must match. Additions: `dst_arrs` may be omitted (destinations are then allocated: on the current tpu
device for h2d, in pinned host memory for d2h), and `TransferFuture.result()` waits and returns the destinations.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import torch

from torch_tpu import _C

__all__ = [
    "TransferFuture",
    "batch_transfer_d2h",
    "batch_transfer_h2d",
    "batch_transfer_d2h_sync",
    "batch_transfer_h2d_sync",
    "await_all",
]


class TransferFuture:
    """Completion handle of one batch: `wait()` returns once every copy of the batch has landed.

    `TransferFuture()` with no arguments is an already complete, empty batch.
    """

    def __init__(
        self, destinations: Sequence[torch.Tensor] = (), *, uploads: bool = False, devices: Iterable[int] = ()
    ) -> None:
        self._destinations = list(destinations)
        self._uploads = uploads
        self._devices = sorted(set(devices))
        self._done = not self._destinations

    def wait(self) -> None:
        """Blocks until the batch's copies are complete (device errors, if any, are raised here)."""
        _wait_all([self])

    def result(self) -> list[torch.Tensor]:
        """Waits, then returns the destination tensors in the order of the batch."""
        self.wait()
        return list(self._destinations)

    def __repr__(self) -> str:
        kind = "h2d" if self._uploads else "d2h"
        state = "done" if self._done else "in flight"
        return f"TransferFuture({kind}, {len(self._destinations)} tensors, {state})"


def _wait_all(futures: Sequence[TransferFuture]) -> None:
    pending = [f for f in futures if not f._done]
    devices = sorted({d for f in pending for d in f._devices})
    for device in devices:  # runs what is queued for the device and waits for it, downloads included
        _C._synchronize(device)
    uploaded = [t for f in pending if f._uploads for t in f._destinations if t.device.type == "tpu"]
    delay = 1e-5
    while any(_C._is_in_flight(t) for t in uploaded):  # an upload's buffer is defined once its data arrived
        time.sleep(delay)
        delay = min(delay * 2, 1e-3)
    for f in pending:
        f._done = True


def await_all(futures: Sequence[TransferFuture]) -> None:
    """Waits for every future of `futures`, synchronising each device they touch once."""
    _wait_all(list(futures))


def _check_lists(
    src_arrs: Sequence[torch.Tensor],
    dst_arrs: Sequence[torch.Tensor],
    offsets: tuple[Sequence[int], Sequence[int], Sequence[int]],
) -> bool:
    if len(src_arrs) != len(dst_arrs):
        raise ValueError(f"batch transfer: {len(src_arrs)} sources but {len(dst_arrs)} destinations")
    lengths = {len(o) for o in offsets}
    if lengths == {0}:
        return False
    if lengths != {len(src_arrs)}:
        raise ValueError(
            "batch transfer: src_offsets_major_dim, dst_offsets_major_dim and copy_sizes_major_dim must be empty or"
            f" hold one entry per tensor ({len(src_arrs)}); got lengths {[len(o) for o in offsets]}"
        )
    return True


def _pair(
    src: torch.Tensor, dst: torch.Tensor, upload: bool, window: tuple[int, int, int] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (source, destination) tensors one copy of the batch reads and writes."""
    if src.dtype != dst.dtype:
        raise ValueError(f"batch transfer: source dtype {src.dtype} differs from destination dtype {dst.dtype}")
    if window is not None:
        so, do, n = window
        if src.dim() == 0 or dst.dim() == 0:
            raise ValueError("batch transfer: major-dimension offsets need tensors of at least one dimension")
        if min(so, do, n) < 0 or so + n > src.size(0) or do + n > dst.size(0):
            raise ValueError(
                f"batch transfer: rows [{so}, {so + n}) of a source of {src.size(0)} rows into rows [{do}, {do + n})"
                f" of a destination of {dst.size(0)} rows are out of range"
            )
        src, dst = src.narrow(0, so, n), dst.narrow(0, do, n)
    if src.shape == dst.shape:
        return src, dst
    if window is not None and src.numel() == dst.numel():
        return src.reshape(dst.shape), dst
    if window is None and upload and src.numel() >= dst.numel():  # a host staging buffer at least as large
        return src.reshape(-1)[: dst.numel()].view(dst.shape), dst
    if window is None and not upload and dst.numel() >= src.numel():
        if not dst.is_contiguous():
            raise ValueError("batch transfer: a host destination shaped unlike its source must be contiguous")
        return src, dst.view(-1)[: src.numel()].view(src.shape)
    raise ValueError(
        f"batch transfer: cannot copy a tensor of shape {tuple(src.shape)} into one of shape {tuple(dst.shape)}"
    )


def _issue(
    src_arrs: Sequence[torch.Tensor],
    dst_arrs: Sequence[torch.Tensor] | None,
    offsets: tuple[Sequence[int], Sequence[int], Sequence[int]],
    upload: bool,
) -> TransferFuture:
    src_arrs = list(src_arrs)
    if dst_arrs is None:
        if any(len(o) for o in offsets):
            raise ValueError("batch transfer: offsets need explicit destinations (dst_arrs)")
        if upload:
            dst_arrs = [torch.empty(s.shape, dtype=s.dtype, device="tpu") for s in src_arrs]
        else:
            dst_arrs = [torch.empty(s.shape, dtype=s.dtype, pin_memory=True) for s in src_arrs]
    dst_arrs = list(dst_arrs)
    windowed = _check_lists(src_arrs, dst_arrs, offsets)
    host, device = ("cpu", "tpu") if upload else ("tpu", "cpu")
    for i, (s, d) in enumerate(zip(src_arrs, dst_arrs, strict=True)):
        if s.device.type != host or d.device.type != device:
            raise ValueError(
                f"batch transfer: pair {i} copies {s.device} -> {d.device}; this batch is {host} -> {device}"
            )
    pairs = [
        _pair(s, d, upload, (offsets[0][i], offsets[1][i], offsets[2][i]) if windowed else None)
        for i, (s, d) in enumerate(zip(src_arrs, dst_arrs, strict=True))
    ]
    for s, d in pairs:
        if d.numel():
            d.copy_(s, non_blocking=True)
    tpu_side = dst_arrs if upload else src_arrs
    return TransferFuture(dst_arrs, uploads=upload, devices=(_index(t) for t in tpu_side))


def _index(t: torch.Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.tpu.current_device()


def batch_transfer_h2d(
    src_arrs: Sequence[torch.Tensor],
    dst_arrs: Sequence[torch.Tensor] | None = None,
    src_offsets_major_dim: Sequence[int] = (),
    dst_offsets_major_dim: Sequence[int] = (),
    copy_sizes_major_dim: Sequence[int] = (),
) -> TransferFuture:
    """Starts copying host tensors `src_arrs` into tpu tensors `dst_arrs` (allocated when omitted); returns the
    batch's future."""
    return _issue(src_arrs, dst_arrs, (src_offsets_major_dim, dst_offsets_major_dim, copy_sizes_major_dim), True)


def batch_transfer_d2h(
    src_arrs: Sequence[torch.Tensor],
    dst_arrs: Sequence[torch.Tensor] | None = None,
    src_offsets_major_dim: Sequence[int] = (),
    dst_offsets_major_dim: Sequence[int] = (),
    copy_sizes_major_dim: Sequence[int] = (),
) -> TransferFuture:
    """Starts copying tpu tensors `src_arrs` into host tensors `dst_arrs` (pinned ones allocated when omitted);
    returns the batch's future. Read the host tensors only after the future's `wait()`."""
    return _issue(src_arrs, dst_arrs, (src_offsets_major_dim, dst_offsets_major_dim, copy_sizes_major_dim), False)


def batch_transfer_h2d_sync(
    src_arrs: Sequence[torch.Tensor],
    dst_arrs: Sequence[torch.Tensor],
    src_offsets_major_dim: Sequence[int] = (),
    dst_offsets_major_dim: Sequence[int] = (),
    copy_sizes_major_dim: Sequence[int] = (),
) -> None:
    """`batch_transfer_h2d` followed by waiting for it."""
    batch_transfer_h2d(src_arrs, dst_arrs, src_offsets_major_dim, dst_offsets_major_dim, copy_sizes_major_dim).wait()


def batch_transfer_d2h_sync(
    src_arrs: Sequence[torch.Tensor],
    dst_arrs: Sequence[torch.Tensor],
    src_offsets_major_dim: Sequence[int] = (),
    dst_offsets_major_dim: Sequence[int] = (),
    copy_sizes_major_dim: Sequence[int] = (),
) -> None:
    """`batch_transfer_d2h` followed by waiting for it."""
    batch_transfer_d2h(src_arrs, dst_arrs, src_offsets_major_dim, dst_offsets_major_dim, copy_sizes_major_dim).wait()
