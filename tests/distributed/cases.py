"""Rank programs for tests/distributed (run by launcher.py, one process per rank): `python -m tests.distributed.cases
<case> [args]`. A case exits 0 when every check on its rank passed; assertion messages name the rank and the check."""

from __future__ import annotations

import datetime
import faulthandler
import os
import signal
import sys
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401  (registers tpu_dist; `import torch` already autoloads it)

TPU = "tpu"


def _init(backend: str | None = "cpu:gloo,tpu:tpu_dist", timeout_s: float = 60.0) -> tuple[int, int]:
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def _assert_tpu_dist_backend() -> None:
    backend = dist.group.WORLD._get_backend(torch.device(TPU))
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL":  # wrapped in ProcessGroupWrapper (checks via Gloo)
        return
    assert isinstance(backend, torch_tpu._C.TpuDistBackend), type(backend)


def _data(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 6, shape, generator=g, dtype=torch.int64).to(dtype)


def _same(name: str, got: list[torch.Tensor], want: list[torch.Tensor], exact: bool = True) -> None:
    assert len(got) == len(want), f"rank {dist.get_rank()} {name}: {len(got)} outputs, expected {len(want)}"
    for g, w in zip(got, want, strict=True):
        assert g.device.type == TPU, f"{name}: output on {g.device}"
        g = g.cpu()
        if exact:
            assert torch.equal(g, w), f"rank {dist.get_rank()} {name}: tpu_dist {g} != gloo {w}"
        else:
            torch.testing.assert_close(g, w, msg=lambda m, n=name: f"rank {dist.get_rank()} {n}: {m}")


def _both(name: str, fn: Callable[[str], list[torch.Tensor]], exact: bool = True) -> None:
    """fn(device) runs a collective and returns its outputs: on cpu tensors (Gloo) and on tpu tensors (tpu_dist)."""
    _same(name, fn(TPU), fn("cpu"), exact)


# ------------------------------------------------------------------------------------------------------------------
def case_collectives() -> None:
    """Every collective on tpu tensors (tpu_dist) equals the same collective on cpu tensors (Gloo)."""
    rank, world = _init()
    _assert_tpu_dist_backend()
    last = world - 1

    def rank_data(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, salt: int = 0) -> torch.Tensor:
        return _data(shape, dtype, 1000 * salt + rank)

    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT):

            def all_reduce(dev: str, op: dist.ReduceOp = op, dtype: torch.dtype = dtype) -> list[torch.Tensor]:
                x = rank_data((5, 3), dtype).to(dev)
                dist.all_reduce(x, op=op)
                return [x]

            _both(f"all_reduce {op} {dtype}", all_reduce)

        def all_reduce_avg(dev: str, dtype: torch.dtype = dtype) -> list[torch.Tensor]:
            x = rank_data((7,), dtype).to(dev)
            if dev == "cpu":  # Gloo has no AVG: the reference is SUM / world (truncating for integers, as NCCL)
                dist.all_reduce(x)
                return [x / world if dtype.is_floating_point else torch.div(x, world, rounding_mode="trunc")]
            dist.all_reduce(x, op=dist.ReduceOp.AVG)
            return [x]

        _both(f"all_reduce AVG {dtype}", all_reduce_avg, exact=False)

    def premul(dev: str) -> list[torch.Tensor]:
        x = rank_data((6,)).to(dev)
        if dev == "cpu":
            dist.all_reduce(x)
            return [x * 0.25]
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.25))
        return [x]

    _both("all_reduce PREMUL_SUM", premul, exact=False)

    def broadcast(dev: str) -> list[torch.Tensor]:
        x = rank_data((4, 4)).to(dev)
        dist.broadcast(x, src=last)
        return [x]

    _both("broadcast", broadcast)

    def reduce(dev: str) -> list[torch.Tensor]:
        x = rank_data((9,)).to(dev)
        dist.reduce(x, dst=0)
        return [x if rank == 0 else rank_data((9,)).to(dev)]  # non-root contents are unspecified under Gloo

    _both("reduce", reduce)

    def reduce_keeps_nonroot(dev: str) -> list[torch.Tensor]:
        x = rank_data((9,)).to(dev)
        dist.reduce(x, dst=0)
        return [x if rank == 0 else x]

    if rank != 0:  # tpu_dist leaves a non-root tensor as it was (NCCL semantics)
        _same("reduce non-root unchanged", reduce_keeps_nonroot(TPU), [rank_data((9,))])
    else:
        reduce_keeps_nonroot(TPU)

    def all_gather(dev: str) -> list[torch.Tensor]:
        out = [torch.empty(3, 2, device=dev) for _ in range(world)]
        dist.all_gather(out, rank_data((3, 2)).to(dev))
        return out

    _both("all_gather", all_gather)

    def all_gather_into_tensor(dev: str) -> list[torch.Tensor]:
        out = torch.empty(world * 4, 3, device=dev)
        dist.all_gather_into_tensor(out, rank_data((4, 3)).to(dev))
        return [out]

    _both("all_gather_into_tensor", all_gather_into_tensor)

    def reduce_scatter(dev: str) -> list[torch.Tensor]:
        out = torch.empty(5, device=dev)
        dist.reduce_scatter(out, [rank_data((5,), salt=i).to(dev) for i in range(world)])
        return [out]

    _both("reduce_scatter", reduce_scatter)

    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):

        def reduce_scatter_tensor(dev: str, op: dist.ReduceOp = op) -> list[torch.Tensor]:
            out = torch.empty(3, 2, device=dev)
            dist.reduce_scatter_tensor(out, rank_data((world * 3, 2)).to(dev), op=op)
            return [out]

        _both(f"reduce_scatter_tensor {op}", reduce_scatter_tensor)

    def reduce_scatter_tensor_avg(dev: str) -> list[torch.Tensor]:
        out = torch.empty(4, device=dev)
        if dev == "cpu":
            dist.reduce_scatter_tensor(out, rank_data((world * 4,)).to(dev))
            return [out / world]
        dist.reduce_scatter_tensor(out, rank_data((world * 4,)).to(dev), op=dist.ReduceOp.AVG)
        return [out]

    _both("reduce_scatter_tensor AVG", reduce_scatter_tensor_avg, exact=False)

    def all_to_all(dev: str) -> list[torch.Tensor]:
        out = [torch.empty(2, device=dev) for _ in range(world)]
        dist.all_to_all(out, [rank_data((2,), salt=i).to(dev) for i in range(world)])
        return out

    _both("all_to_all", all_to_all)

    def all_to_all_single(dev: str) -> list[torch.Tensor]:
        out = torch.empty(world * 3, device=dev)
        dist.all_to_all_single(out, rank_data((world * 3,)).to(dev))
        return [out]

    _both("all_to_all_single", all_to_all_single)

    def all_to_all_single_uneven(dev: str) -> list[torch.Tensor]:
        # rank r sends (j + 1) elements to rank j, so it receives (r + 1) from each.
        inp = rank_data((sum(j + 1 for j in range(world)),)).to(dev)
        out = torch.empty(world * (rank + 1), device=dev)
        dist.all_to_all_single(out, inp, [rank + 1] * world, [j + 1 for j in range(world)])
        return [out]

    _both("all_to_all_single uneven", all_to_all_single_uneven)

    def gather(dev: str) -> list[torch.Tensor]:
        out = [torch.empty(4, device=dev) for _ in range(world)] if rank == 0 else None
        dist.gather(rank_data((4,)).to(dev), out, dst=0)
        return out or []

    _both("gather", gather)

    def scatter(dev: str) -> list[torch.Tensor]:
        out = torch.empty(2, 2, device=dev)
        chunks = [_data((2, 2), torch.float32, 77 + i).to(dev) for i in range(world)] if rank == last else None
        dist.scatter(out, chunks, src=last)
        return [out]

    _both("scatter", scatter)

    def ring(dev: str) -> list[torch.Tensor]:
        # isend to the next rank and irecv from the previous one: both outstanding at once (no deadlock).
        got = torch.empty(3, device=dev)
        recv = dist.irecv(got, src=(rank - 1) % world)
        send = dist.isend(rank_data((3,)).to(dev), dst=(rank + 1) % world)
        send.wait()
        recv.wait()
        return [got]

    _both("isend/irecv ring", ring)

    def send_recv(dev: str) -> list[torch.Tensor]:
        x = torch.zeros(4, dtype=torch.int32, device=dev)
        if rank == 0:
            for peer in range(1, world):
                dist.send(torch.full((4,), peer * 10, dtype=torch.int32, device=dev), dst=peer)
        else:
            dist.recv(x, src=0)
        return [x]

    _both("send/recv", send_recv)

    def async_work(dev: str) -> list[torch.Tensor]:
        # Two async all_reduces on the same tensor, then one more on a view: later ones must see earlier results.
        x = rank_data((6,)).to(dev)
        if dev == "cpu":  # the reference runs them one after the other (Gloo may run async ones concurrently)
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.SUM, dist.ReduceOp.MAX):
                dist.all_reduce(x, op=op)
            return [x]
        w1 = dist.all_reduce(x, async_op=True)
        w2 = dist.all_reduce(x, async_op=True)
        w2.wait()
        w1.wait()
        assert w1.is_completed() and w2.is_completed()
        fut = dist.all_reduce(x, op=dist.ReduceOp.MAX, async_op=True).get_future()
        (value,) = fut.wait()
        assert value is x or torch.equal(value.cpu(), x.cpu())
        return [x]

    _both("async work chain + future", async_work)

    def strided_view(dev: str) -> list[torch.Tensor]:
        base = rank_data((4, 6)).to(dev)
        view = base[:, 1:4]  # not contiguous: tpu_dist stages it and copies the result back into the view
        if dev == "cpu":
            flat = view.contiguous()
            dist.all_reduce(flat)
            view.copy_(flat)
        else:
            dist.all_reduce(view)
        return [base]

    _both("all_reduce into a strided view", strided_view)

    # A subgroup of the even ranks has its own tpu_dist backend; odd ranks are not members.
    evens = list(range(0, world, 2))
    sub = dist.new_group(evens)
    if rank in evens:
        y = torch.full((3,), float(rank), device=TPU)
        dist.all_reduce(y, group=sub)
        assert torch.equal(y.cpu(), torch.full((3,), float(sum(evens)))), f"rank {rank} subgroup: {y.cpu()}"

    dist.barrier()
    objs: list[object] = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(world)]
    dist.destroy_process_group()
    print(f"rank {rank}: collectives ok")


# ------------------------------------------------------------------------------------------------------------------
def case_default_backend() -> None:
    """init_process_group() with no backend picks tpu_dist for tpu tensors; LOCAL_RANK / TPU_VISIBLE_CHIPS pick the
    device."""
    rank, world = _init(backend=None)
    local_rank = int(os.environ["LOCAL_RANK"])
    expected = int(os.environ.get("EXPECT_DEVICE", local_rank))
    assert torch.tpu.current_device() == expected, (torch.tpu.current_device(), expected)
    assert dist.get_default_backend_for_device(TPU) == "tpu_dist"
    _assert_tpu_dist_backend()
    x = torch.full((3,), float(rank + 1), device=TPU)
    assert x.device.index == expected
    dist.all_reduce(x)
    assert torch.equal(x.cpu(), torch.full((3,), float(world * (world + 1) // 2))), x
    dist.barrier()
    objs: list[object] = [None] * world  # object collectives on a tpu-only group travel as tpu tensors
    dist.all_gather_object(objs, ("rank", rank))
    assert objs == [("rank", r) for r in range(world)], objs
    dist.destroy_process_group()
    print(f"rank {rank}: default backend ok on tpu:{expected}")


# ------------------------------------------------------------------------------------------------------------------
def case_in_place() -> None:
    """all_reduce on XLA-CPU reduces a tensor that only its storage holds in its device buffer (no staging copy in
    or out); whatever still holds the old value (a clone, a pending or enqueued program reading it) keeps it."""
    rank, world = _init()
    _assert_tpu_dist_backend()
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        for op, want in (
            (dist.ReduceOp.SUM, sum(torch.arange(6) + r for r in range(world))),
            (dist.ReduceOp.MAX, torch.arange(6) + world - 1),
            (dist.ReduceOp.AVG, None),
        ):
            if op == dist.ReduceOp.AVG and dtype == torch.int32:
                continue
            x = (torch.arange(6) + rank).to(dtype).to(TPU)
            view = x.view(2, 3)
            torch.tpu.synchronize()
            before = torch_tpu.metrics()["dist_in_place"]
            dist.all_reduce(x, op=op)
            assert torch_tpu.metrics()["dist_in_place"] == before + 1, f"rank {rank} {dtype} {op}: staged"
            expected = (sum(torch.arange(6.0) + r for r in range(world)) / world) if want is None else want
            expected = expected.to(dtype)
            assert torch.equal(x.cpu(), expected), f"rank {rank} {dtype} {op}: {x.cpu()} != {expected}"
            assert torch.equal(view.cpu(), expected.view(2, 3)), f"rank {rank} {dtype} {op}: view"
    old = torch.arange(6.0) + rank
    want = sum(torch.arange(6.0) + r for r in range(world))
    for _ in range(3):
        x = old.to(TPU)
        clone = x.clone()
        reader = x * 1  # enqueued (strict) or pending in the open graph (fused): reads the old value
        dist.all_reduce(x)
        assert torch.equal(x.cpu(), want), f"rank {rank}: {x.cpu()} != {want}"
        assert torch.equal(reader.cpu(), old), f"rank {rank}: a reader saw the reduced value"
        assert torch.equal(clone.cpu(), old), f"rank {rank}: a clone saw the reduced value"
    dist.destroy_process_group()
    print(f"rank {rank}: in place ok")


# ------------------------------------------------------------------------------------------------------------------
def case_mismatch() -> None:
    """Mismatched shapes or dtypes across ranks raise on every rank, and the group stays usable afterwards. Ranks on
    one host compare through a shared-memory mailbox unless TORCH_TPU_DIST_CHECK=gloo."""
    rank, world = _init(timeout_s=30)
    _assert_tpu_dist_backend()
    backend = dist.group.WORLD._get_backend(torch.device(TPU))
    via_gloo = os.environ.get("TORCH_TPU_DIST_CHECK") == "gloo"
    assert backend.uses_mailbox == (not via_gloo), f"rank {rank}: uses_mailbox={backend.uses_mailbox}"
    dtypes = (torch.float32, torch.int32)
    bad = [
        ("all_reduce shape", lambda: dist.all_reduce(torch.ones(4 + rank, device=TPU))),
        ("all_reduce dtype", lambda: dist.all_reduce(torch.ones(4, device=TPU, dtype=dtypes[rank % 2]))),
        ("broadcast shape", lambda: dist.broadcast(torch.ones(2, 2 + rank, device=TPU), src=0)),
        (
            "all_gather_into_tensor shape",
            lambda: dist.all_gather_into_tensor(torch.empty(world * 3, device=TPU), torch.ones(3 + rank, device=TPU)),
        ),
    ]
    for name, call in bad:
        t0 = time.monotonic()
        try:
            call()
        except RuntimeError as exc:
            assert "ranks disagree" in str(exc), f"{name}: unexpected error {exc}"
        else:
            raise AssertionError(f"rank {rank}: {name} with mismatched tensors did not raise")
        assert time.monotonic() - t0 < 10, f"{name}: took {time.monotonic() - t0:.1f}s to raise"
    x = torch.ones(4, device=TPU)
    dist.all_reduce(x)
    assert torch.equal(x.cpu(), torch.full((4,), float(world)))
    dist.destroy_process_group()
    print(f"rank {rank}: mismatch ok")


# ------------------------------------------------------------------------------------------------------------------
def case_peer_lost(mode: str, timeout_s: str) -> None:
    """Rank 1 dies (mode=kill) or stops responding (mode=hang) after one collective; rank 0's next collective must
    raise within the group's timeout instead of hanging."""
    timeout = float(timeout_s)
    rank, world = _init(timeout_s=timeout)
    x = torch.ones(4, device=TPU)
    dist.all_reduce(x)
    if rank == 1:
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(2 * timeout + 3)  # hang: never joins the next collective in time
        os._exit(0)
    time.sleep(0.5)
    t0 = time.monotonic()
    try:
        dist.all_reduce(x)
    except Exception as exc:  # noqa: BLE001 - any error type is fine; a hang or success is not
        elapsed = time.monotonic() - t0
        print(f"rank {rank}: raised {type(exc).__name__} after {elapsed:.2f}s: {str(exc)[:200]}")
        assert elapsed <= timeout + 2.0, f"took {elapsed:.1f}s, timeout is {timeout}s"
        sys.stdout.flush()
        os._exit(0)  # the group is broken: skip teardown (it would wait for the lost peer)
    raise AssertionError(f"rank {rank}: all_reduce with a lost peer returned")


CASES: dict[str, Callable[..., None]] = {
    "collectives": case_collectives,
    "default_backend": case_default_backend,
    "mismatch": case_mismatch,
    "in_place": case_in_place,
    "peer_lost": case_peer_lost,
}


def main() -> None:
    name, args = sys.argv[1], sys.argv[2:]
    faulthandler.dump_traceback_later(float(os.environ.get("CASE_TRACEBACK_AFTER", "200")), exit=True)
    if name.startswith("anchor_"):  # torch.tpu's TorchTPU-named collectives (tests/anchor/dist_cases.py)
        from tests.anchor import dist_cases

        dist_cases.CASES[name](*args)
        return
    if name not in CASES:
        from tests.distributed import training_cases

        training_cases.CASES[name](*args)
        return
    CASES[name](*args)


if __name__ == "__main__":
    main()
