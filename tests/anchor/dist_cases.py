"""Rank programs for tests/anchor/test_anchor_distributed.py, run by tests/distributed/launcher.py (its case runner
hands names starting with `anchor_` to this module). Every check compares tpu results with values computed on CPU
from data each rank can regenerate for every other rank."""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from tests.distributed.cases import _init

TPU = "tpu"


def _data(rank: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 64, shape, generator=g, dtype=torch.int64).to(dtype)


def _check(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.device.type == TPU, f"rank {dist.get_rank()} {name}: result on {got.device}"
    torch.testing.assert_close(
        got.cpu(), want, rtol=1e-5, atol=1e-5, msg=lambda m: f"rank {dist.get_rank()} {name}: {m}"
    )


def _gather_and_scatter(rank: int, world: int) -> None:
    ops = torch.tpu.ops
    every = [_data(r, (2, 4, 3)) for r in range(world)]
    for dim in (0, 1, -1):
        _check(f"all_gather_dim({dim})", ops.all_gather_dim(every[rank].to(TPU), dim), torch.cat(every, dim))
    for op, reduce in (("sum", sum), ("max", lambda ts: torch.stack(ts).amax(0)), ("avg", lambda ts: sum(ts) / world)):
        for dim in (1, -3):
            want = reduce(every).chunk(world, dim)[rank]
            _check(f"reduce_scatter_dim({op}, {dim})", ops.reduce_scatter_dim(every[rank].to(TPU), dim, None, op), want)
    ints = [_data(r, (4, 2), torch.int32) for r in range(world)]
    want = (ints[0] ^ ints[1]).chunk(world, 0)[rank]
    _check("reduce_scatter_dim(bxor)", ops.reduce_scatter_dim(ints[rank].to(TPU), 0, reduce_op="bxor"), want)
    try:
        ops.reduce_scatter_dim(every[rank].to(TPU), 2)  # 3 rows over 2 ranks
    except ValueError as e:
        assert "does not divide" in str(e)
    else:
        raise AssertionError("reduce_scatter_dim accepted an indivisible dim")


def _send_recv(rank: int) -> None:
    ops = torch.tpu.ops
    a, b = _data(0, (2, 3)), _data(0, (5,), torch.int64)
    c = _data(1, (4,))
    if rank == 0:
        ops.send([a.to(TPU), b.to(TPU)], 1, 7).wait()
        got = torch.zeros(4, device=TPU)
        ops.recv([got], 1, 8).wait()
        _check("recv(one tensor)", got, c)
    else:
        ga, gb = torch.zeros(2, 3, device=TPU), torch.zeros(5, dtype=torch.int64, device=TPU)
        work = ops.recv([ga, gb], 0, 7)
        assert work.wait() is not False
        _check("recv(two tensors) a", ga, a)
        _check("recv(two tensors) b", gb, b)
        ops.send([c.to(TPU)], 0, 8).wait()


# Ragged all-to-all with two ranks: (input_offsets, send_sizes, output_offsets) per rank; output has 7 rows.
PLAN = {0: ([0, 2], [1, 3], [0, 0]), 1: ([1, 3], [2, 2], [3, 4])}


def _ragged_reference(operands: list[torch.Tensor], outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    results = [o.clone() for o in outputs]
    for src, (in_off, send, out_off) in PLAN.items():
        for dst in range(2):
            rows = operands[src][in_off[dst] : in_off[dst] + send[dst]]
            results[dst] = torch.cat([results[dst][: out_off[dst]], rows, results[dst][out_off[dst] + send[dst] :]])
    return results


def _ragged_all_to_all(rank: int) -> None:
    operands = [_data(r, (6, 2)).requires_grad_(True) for r in range(2)]
    outputs = [torch.full((7, 2), -1.0, requires_grad=True) for _ in range(2)]
    weights = [_data(10 + r, (7, 2)) for r in range(2)]
    want = _ragged_reference(operands, outputs)
    sum((w * r).sum() for w, r in zip(weights, want, strict=True)).backward()

    in_off, send, out_off = PLAN[rank]
    recv = [PLAN[src][1][rank] for src in range(2)]
    operand = operands[rank].detach().to(TPU).requires_grad_(True)
    output = torch.full((7, 2), -1.0, device=TPU, requires_grad=True)
    i64 = {"dtype": torch.int64, "device": TPU}
    args = (torch.tensor(in_off, **i64), torch.tensor(send, **i64), torch.tensor(out_off, **i64))
    got = torch.tpu.ops.ragged_all_to_all(
        operand, output, *args, torch.tensor(recv, **i64), dist.group.WORLD.group_name
    )
    _check("ragged_all_to_all", got, want[rank].detach())
    (weights[rank].to(TPU) * got).sum().backward()
    _check("ragged_all_to_all d/operand", operand.grad, operands[rank].grad)
    _check("ragged_all_to_all d/output", output.grad, outputs[rank].grad)


def _meshes(rank: int, world: int) -> None:
    layout = torch.tpu.distributed.topology_aware_mesh((1, world))
    assert layout.dtype == torch.int64 and layout.tolist() == [list(range(world))], layout
    mesh = DeviceMesh(TPU, mesh=torch.tpu.distributed.topology_aware_mesh((world,)))
    x = torch.full((3,), float(rank + 1), device=TPU)
    dist.all_reduce(x, group=mesh.get_group())
    _check("all_reduce over the mesh", x, torch.full((3,), float(sum(range(1, world + 1)))))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.tpu.topology_aware_mesh((world, 1)).tolist() == [[r] for r in range(world)]
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    for bad, kwargs in (((world + 1,), {}), ((world,), {"dcn_mesh_shape": (world,)})):
        try:
            torch.tpu.distributed.topology_aware_mesh(bad, **kwargs)
        except ValueError:
            continue
        raise AssertionError(f"topology_aware_mesh{bad} {kwargs} was accepted")


def _spmd_safe(rank: int, world: int) -> None:
    @torch.tpu.distributed.spmd_safe
    def scaled_all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x * 5
        dist.all_reduce(y)
        return y

    got = scaled_all_reduce(torch.full((4,), float(rank), device=TPU))
    _check("spmd_safe all_reduce", got, torch.full((4,), 5.0 * sum(range(world))))
    assert scaled_all_reduce.__name__ == "scaled_all_reduce"


def case_anchor_ops() -> None:
    rank, world = _init()
    assert world == 2, "these cases are written for two ranks"
    try:
        _gather_and_scatter(rank, world)
        _send_recv(rank)
        _ragged_all_to_all(rank)
        _meshes(rank, world)
        _spmd_safe(rank, world)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    print(f"rank {rank}: anchor ops ok")


CASES = {"anchor_ops": case_anchor_ops}
