"""TorchTPU's `torch.tpu.ops.ragged_all_to_all` over torch.distributed.

Each rank sends `send_sizes[j]` rows of `operand`, starting at row `input_offsets[j]`, to rank `j`, which writes
them into its copy of `output` from row `output_offsets[j]` on (offsets into the receiver's output, as the sender
sees them); `recv_sizes[j]` is how many rows arrive from rank `j`. Here the offsets and sizes are read on the host
(a sync), the receivers' offsets are exchanged with one small all_to_all, and the rows travel in one uneven
`all_to_all_single`; on tpu tensors both run on `tpu_dist`. The result is differentiable in `operand` (the backward
sends the result's gradient rows back the same way) and in `output` (rows that were overwritten get no gradient).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

__all__ = ["ragged_all_to_all"]


def _host_ints(t: torch.Tensor, world: int, what: str) -> list[int]:
    if t.dim() != 1 or t.shape[0] != world:
        raise ValueError(f"ragged_all_to_all: {what} must be 1D, one entry per rank ({world}), got {tuple(t.shape)}")
    values = [int(v) for v in t.detach().cpu().tolist()]
    if any(v < 0 for v in values):
        raise ValueError(f"ragged_all_to_all: {what} must be non-negative, got {values}")
    return values


def _exchange(rows: torch.Tensor, send: list[int], recv: list[int], pg: dist.ProcessGroup) -> list[torch.Tensor]:
    """all_to_all_single of `rows` (split by `send`), returned split by `recv`."""
    got = torch.empty((sum(recv), *rows.shape[1:]), dtype=rows.dtype, device=rows.device)
    dist.all_to_all_single(got, rows.contiguous(), output_split_sizes=recv, input_split_sizes=send, group=pg)
    return list(torch.split(got, recv))


class _Plan:
    """Host-side layout of one call: where this rank's outgoing rows start, and where incoming rows land."""

    def __init__(
        self,
        pg: dist.ProcessGroup,
        input_offsets: torch.Tensor,
        send_sizes: torch.Tensor,
        output_offsets: torch.Tensor,
        recv_sizes: torch.Tensor,
        device: torch.device,
    ) -> None:
        world = pg.size()
        self.pg = pg
        self.in_offsets = _host_ints(input_offsets, world, "input_offsets")
        self.send = _host_ints(send_sizes, world, "send_sizes")
        self.recv = _host_ints(recv_sizes, world, "recv_sizes")
        _host_ints(output_offsets, world, "output_offsets")
        theirs = torch.empty(world, dtype=torch.int64, device=device)
        dist.all_to_all_single(theirs, output_offsets.detach().to(device=device, dtype=torch.int64), group=pg)
        self.out_offsets = [int(v) for v in theirs.cpu().tolist()]  # where rank j's rows go in my output

    def gather_outgoing(self, operand: torch.Tensor) -> torch.Tensor:
        for o, n in zip(self.in_offsets, self.send, strict=True):
            if o + n > operand.shape[0]:
                raise ValueError(f"ragged_all_to_all: rows [{o}, {o + n}) exceed operand's {operand.shape[0]} rows")
        return torch.cat([operand[o : o + n] for o, n in zip(self.in_offsets, self.send, strict=True)])

    def check_landing(self, rows: int) -> None:
        for o, n in zip(self.out_offsets, self.recv, strict=True):
            if o + n > rows:
                raise ValueError(f"ragged_all_to_all: rows [{o}, {o + n}) exceed output's {rows} rows")


def _forward(plan: _Plan, operand: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    plan.check_landing(output.shape[0])
    chunks = _exchange(plan.gather_outgoing(operand), plan.send, plan.recv, plan.pg)
    result = output.clone()
    for o, n, chunk in zip(plan.out_offsets, plan.recv, chunks, strict=True):
        if n:
            result[o : o + n] = chunk
    return result


class _RaggedAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, plan: _Plan, operand: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        ctx.plan = plan
        ctx.operand_shape = operand.shape
        return _forward(plan, operand, output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, torch.Tensor]:
        plan: _Plan = ctx.plan
        outgoing = torch.cat([grad[o : o + n] for o, n in zip(plan.out_offsets, plan.recv, strict=True)])
        returned = _exchange(outgoing, plan.recv, plan.send, plan.pg)
        grad_operand = grad.new_zeros(ctx.operand_shape)
        for o, n, chunk in zip(plan.in_offsets, plan.send, returned, strict=True):
            if n:
                grad_operand[o : o + n] += chunk
        grad_output = grad.clone()
        for o, n in zip(plan.out_offsets, plan.recv, strict=True):
            if n:
                grad_output[o : o + n] = 0
        return None, grad_operand, grad_output


def ragged_all_to_all(
    operand: torch.Tensor,
    output: torch.Tensor,
    input_offsets: torch.Tensor,
    send_sizes: torch.Tensor,
    output_offsets: torch.Tensor,
    recv_sizes: torch.Tensor,
    process_group_name: str,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """A copy of `output` with the rows every rank sent here written in (see the module docstring); `operand`,
    `output` and the 1D offset/size tensors (one entry per rank) are this rank's. `process_group_name` is the group's
    `group_name`. With `out`, the result is written there and `out` is returned (no autograd)."""
    if operand.dim() == 0 or output.dim() == 0 or operand.shape[1:] != output.shape[1:]:
        raise ValueError(
            "ragged_all_to_all: operand and output must have the same shape past their first dimension, got "
            f"{tuple(operand.shape)} and {tuple(output.shape)}"
        )
    if operand.dtype != output.dtype:
        raise TypeError(f"ragged_all_to_all: operand is {operand.dtype}, output is {output.dtype}")
    pg = distributed_c10d._resolve_process_group(process_group_name)
    plan = _Plan(pg, input_offsets, send_sizes, output_offsets, recv_sizes, operand.device)
    if out is None:
        return _RaggedAllToAll.apply(plan, operand, output)
    with torch.no_grad():
        out.copy_(_forward(plan, operand, output))
    return out
