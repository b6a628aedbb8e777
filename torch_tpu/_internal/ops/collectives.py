"""TorchTPU's collective ops (`torch.tpu.ops.all_gather_dim`, `reduce_scatter_dim`, `send`, `recv`), written over
torch.distributed, so they run on whatever backend the group has for the tensors' device: `tpu_dist` for tpu tensors
(host-staged, see torch_tpu/distributed.py), Gloo for CPU tensors. Like TorchTPU's, they record no autograd.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["all_gather_dim", "recv", "reduce_scatter_dim", "send"]

_REDUCE_OPS: dict[str, Any] = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "band": dist.ReduceOp.BAND,
    "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}
_BITWISE = ("band", "bor", "bxor")

# torch 2.13 renamed the single-tensor collectives (the old names warn); older torch has only the old ones.
_all_gather_single = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)


def group_or_world(group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    """`group`, or the default group; ValueError when torch.distributed was not initialized."""
    if group is not None:
        return group
    if not dist.is_initialized() or dist.group.WORLD is None:
        raise ValueError("the default process group is not initialized: call torch.distributed.init_process_group")
    return dist.group.WORLD  # type: ignore[return-value]


def _dim(x: torch.Tensor, dim: int, op: str) -> int:
    if x.dim() == 0:
        raise ValueError(f"{op}: input must have at least one dimension")
    if not -x.dim() <= dim < x.dim():
        raise IndexError(f"{op}: dim {dim} is out of range for a {x.dim()}D input")
    return dim % x.dim()


def all_gather_dim(
    input: torch.Tensor,
    dim: int,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Every rank's `input`, concatenated along `dim` in rank order (`size(dim) * group.size()` along `dim`)."""
    pg = group_or_world(group)
    d = _dim(input, dim, "all_gather_dim")
    front = input.detach().movedim(d, 0).contiguous()
    out = torch.empty((front.shape[0] * pg.size(), *front.shape[1:]), dtype=front.dtype, device=front.device)
    _all_gather_single(out, front, group=pg)
    return out.movedim(0, d)


def reduce_scatter_dim(
    input: torch.Tensor,
    dim: int,
    group: dist.ProcessGroup | None = None,
    reduce_op: str = "sum",
) -> torch.Tensor:
    """This rank's chunk along `dim` of the elementwise reduction of every rank's `input`.

    `input.size(dim)` must divide by the group size; rank r gets the r-th of the equal chunks. `reduce_op` is one of
    "sum", "avg", "product", "min", "max", "band", "bor", "bxor" (the last three need an integer or bool dtype).
    """
    pg = group_or_world(group)
    d = _dim(input, dim, "reduce_scatter_dim")
    if reduce_op not in _REDUCE_OPS:
        raise ValueError(f"reduce_scatter_dim: reduce_op must be one of {sorted(_REDUCE_OPS)}, got {reduce_op!r}")
    if reduce_op in _BITWISE and (input.dtype.is_floating_point or input.dtype.is_complex):
        raise ValueError(f"reduce_scatter_dim: reduce_op {reduce_op!r} needs an integer dtype, got {input.dtype}")
    world = pg.size()
    if input.shape[d] % world:
        raise ValueError(f"reduce_scatter_dim: size {input.shape[d]} of dim {dim} does not divide by {world} ranks")
    front = input.detach().movedim(d, 0).contiguous()
    out = torch.empty((front.shape[0] // world, *front.shape[1:]), dtype=front.dtype, device=front.device)
    if reduce_op == "avg" and not (front.dtype.is_floating_point or front.dtype.is_complex):
        raise ValueError(f"reduce_scatter_dim: reduce_op 'avg' needs a floating dtype, got {front.dtype}")
    _reduce_scatter_single(out, front, op=_REDUCE_OPS[reduce_op], group=pg)
    return out.movedim(0, d)


class _PackedWork:
    """The Work of a point-to-point transfer of several tensors packed into one byte buffer: `wait()` waits for the
    transfer and then, for a receive, unpacks the bytes into the caller's tensors."""

    def __init__(self, work: Any, unpack: Any = None) -> None:
        self._work = work
        self._unpack = unpack

    def wait(self, timeout: Any = None) -> bool:
        done = self._work.wait() if timeout is None else self._work.wait(timeout)
        if self._unpack is not None:
            self._unpack()
            self._unpack = None
        return bool(done) if done is not None else True

    def is_completed(self) -> bool:
        return self._unpack is None and bool(self._work.is_completed())

    def is_success(self) -> bool:
        return bool(self._work.is_success())

    def exception(self) -> Any:
        return self._work.exception()


def _as_list(tensors: Sequence[torch.Tensor], op: str) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor):
        raise TypeError(f"{op}: tensors must be a sequence of tensors, got a single tensor (wrap it in a list)")
    out = list(tensors)
    if not out or not all(isinstance(t, torch.Tensor) for t in out):
        raise TypeError(f"{op}: tensors must be a non-empty sequence of tensors")
    if len({t.device for t in out}) != 1:
        raise ValueError(f"{op}: all tensors must be on one device")
    return out


def _bytes(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


def send(tensors: Sequence[torch.Tensor], dst: int, tag: int) -> Any:
    """Sends `tensors` to rank `dst` of the default group, matched by the `recv` on `dst` with the same `tag`;
    returns a Work whose `wait()` waits for the send. Several tensors travel packed into one message."""
    ts = _as_list(tensors, "send")
    pg = group_or_world(None)
    if len(ts) == 1:
        return dist.isend(ts[0].detach().contiguous(), dst, group=pg, tag=tag)
    packed = torch.cat([_bytes(t) for t in ts])
    return _PackedWork(dist.isend(packed, dst, group=pg, tag=tag))


def recv(tensors: Sequence[torch.Tensor], src: int, tag: int) -> Any:
    """Receives into `tensors` (same shapes and dtypes as the ones rank `src` sent with `tag`); returns a Work: call
    its `wait()` before reading `tensors`."""
    ts = _as_list(tensors, "recv")
    pg = group_or_world(None)
    if len(ts) == 1 and ts[0].is_contiguous():
        return dist.irecv(ts[0], src, group=pg, tag=tag)
    sizes = [t.numel() * t.element_size() for t in ts]
    packed = torch.empty(sum(sizes), dtype=torch.uint8, device=ts[0].device)

    def unpack() -> None:
        with torch.no_grad():
            for t, chunk in zip(ts, torch.split(packed, sizes), strict=True):
                t.copy_(chunk.view(t.dtype).reshape(t.shape))

    return _PackedWork(dist.irecv(packed, src, group=pg, tag=tag), unpack)
