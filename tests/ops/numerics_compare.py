"""Comparison helpers shared by the numerics tests: run a function on CPU tensors and on tpu copies and require
the same values (NaN-aware) or the same exception, with nothing falling back to the CPU."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

import torch_tpu


@contextmanager
def lowered_only() -> Iterator[None]:
    torch_tpu.reset_op_counts()
    yield
    fallbacks = torch_tpu.metrics()["fallback_ops"]
    assert not fallbacks, f"ops fell back to the CPU: {fallbacks}"


def tpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(tpu(v) for v in x)
    return x


def flat(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in flat(v)]
    return []


def assert_same(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None) -> None:
    acts, exps = flat(actual), flat(expected)
    assert len(acts) == len(exps)
    for a, e in zip(acts, exps, strict=True):
        assert a.device.type == "tpu"
        a = a.cpu()
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, e.dtype, a.shape, e.shape)
        if e.is_floating_point():
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert torch.equal(a, e), (a, e)


def message(error: BaseException) -> str:
    """The first line of an error; for dtype dispatch errors only the dtype part, since CPU names its kernel
    ("ceil_vml_cpu" not implemented for 'Bool')."""
    text = str(error).split("\n")[0]
    marker = " not implemented for "
    return text[text.index(marker) :] if marker in text else text


def compare(fn: Callable[..., Any], *args: Any, rtol: float | None = None, atol: float | None = None) -> None:
    """fn on CPU tensors and on tpu copies: same values, or the same exception type and message."""
    try:
        expected = fn(*args)
    except Exception as cpu_error:  # noqa: BLE001 - any CPU error must be reproduced
        with lowered_only(), pytest.raises(type(cpu_error)) as tpu_error:
            fn(*tpu(args))
        assert message(tpu_error.value) == message(cpu_error)
        return
    with lowered_only():
        actual = fn(*tpu(args))
        assert_same(actual, expected, rtol, atol)


def t(values: list[Any], dtype: torch.dtype | None = None) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)
