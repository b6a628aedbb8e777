"""Runs a function on CPU tensors and on tpu copies of them, and compares outputs and gradients."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

import torch_tpu
from torch_tpu import runtime


def _to(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        y = x.detach().to(device)
        return y.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


def _flat(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return []


def check(
    fn: Callable[..., Any],
    *args: Any,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    grad: bool = True,
    allow_fallback: Sequence[str] = (),
    **kwargs: Any,
) -> None:
    """fn(*args) on tpu must match CPU; with grad, so must the gradients of every floating input.

    Fails when any op fell back to the CPU, except the ones named in allow_fallback.
    """
    torch_tpu.reset_op_counts()
    cpu_args = [
        a.detach().requires_grad_(grad and a.is_floating_point()) if isinstance(a, torch.Tensor) else a for a in args
    ]
    tpu_args = _to(cpu_args, "tpu")
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*tpu_args, **kwargs)
    exp_list, act_list = _flat(expected), _flat(actual)
    assert len(exp_list) == len(act_list)
    for e, a in zip(exp_list, act_list, strict=True):
        assert a.device.type == "tpu", f"result on {a.device}"
        assert a.dtype == e.dtype, f"dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"shape {tuple(a.shape)} != {tuple(e.shape)}"
        torch.testing.assert_close(a.cpu(), e.detach(), rtol=rtol, atol=atol, equal_nan=True)
    if grad:
        leaves = [(c, t) for c, t in zip(_flat(cpu_args), _flat(tpu_args), strict=True) if c.requires_grad]
        outs = [(e, a) for e, a in zip(exp_list, act_list, strict=True) if e.requires_grad and e.is_floating_point()]
        if leaves and outs:
            gen = torch.Generator().manual_seed(0)
            seeds = [torch.randn(e.shape, generator=gen, dtype=e.dtype) for e, _ in outs]
            torch.autograd.backward([e for e, _ in outs], seeds)
            torch.autograd.backward([a for _, a in outs], [s.to("tpu") for s in seeds])
            for c, t in leaves:
                assert (c.grad is None) == (t.grad is None)
                if c.grad is not None:
                    torch.testing.assert_close(t.grad.cpu(), c.grad, rtol=rtol * 10, atol=atol * 10, equal_nan=True)
    fallbacks = {k: v for k, v in torch_tpu.metrics()["fallback_ops"].items() if k not in allow_fallback}
    assert not fallbacks, f"ops fell back to the CPU: {fallbacks}"


@contextlib.contextmanager
def dumped_programs(directory: Path) -> Iterator[list[str]]:
    """Yields a list that holds, once the block ends, the StableHLO text of every program compiled inside it (use
    shapes no other test compiles, so that the programs are fresh)."""
    programs: list[str] = []
    cache = runtime.get().cache
    cache.set_dump_directory(str(directory))
    try:
        yield programs
    finally:
        cache.set_dump_directory("")
    programs.extend(p.read_text() for p in directory.iterdir())
