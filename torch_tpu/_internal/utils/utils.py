"""TorchTPU's testing helpers under its module path: `assert_close` (a tpu result against a CPU reference, with
a report of where and by how much they differ) and `OpTracer` (which ATen ops a block dispatches, and how often)."""

from __future__ import annotations

import collections
import contextlib
import enum
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# A tolerance: a number, or (for `atol` only) a function of one expected value giving the absolute error allowed.
Tolerance: TypeAlias = float | Callable[[float], float]

_FLOAT8 = {getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)}
_SHOWN = 5  # mismatching elements listed in a failure


class CheckValueMode(enum.Enum):
    """How `assert_close` compares values. SKIP: shapes and dtypes only. LOOSE: PyTorch's rule,
    ``|actual - expected| <= atol + rtol * |expected|``. STRICT (the default): both bounds on their own,
    ``|actual - expected| <= atol`` and ``|actual - expected| <= rtol * |expected|`` (with an absolute slack of
    1e-7, none for float8, so that 0 and -0 agree); a small non-zero result against an exact 0 fails in STRICT."""

    SKIP = "skip"
    LOOSE = "loose"
    STRICT = "strict"


def _is_sequence(x: Any) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def assert_close(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: Tolerance | None = None,
    preamble: str | None = None,
    check_value: CheckValueMode = CheckValueMode.STRICT,
    check_dtype: bool = True,
) -> None:
    """Raises AssertionError unless `actual` and `expected` (tensors, None, or equally long sequences of those,
    compared item by item) agree in shape, dtype and value. Tensors may live on any device (tpu results against
    CPU references): both are brought to the host first.

    `rtol`/`atol` default to PyTorch's per-dtype tolerances. A callable `atol` is applied to each expected element
    and gives the error allowed there (then `rtol` must be None, and the check is elementwise). `preamble` starts
    the failure message. `check_dtype=False` compares both at their promoted dtype.
    """
    if actual is None or expected is None:
        assert actual is None and expected is None, (
            f"{_lead(preamble)}one side is None and the other is not: actual={actual!r}, expected={expected!r}"
        )
        return
    if _is_sequence(actual) or _is_sequence(expected):
        assert _is_sequence(actual) and _is_sequence(expected), (
            f"{_lead(preamble)}one side is a sequence and the other is not: {type(actual)} vs {type(expected)}"
        )
        assert len(actual) == len(expected), (
            f"{_lead(preamble)}sequences differ in length: {len(actual)} actual, {len(expected)} expected"
        )
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, rtol, atol, preamble, check_value, check_dtype)
        return
    assert isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor), (
        f"{_lead(preamble)}can only compare tensors, got {type(actual).__name__} and {type(expected).__name__}"
    )
    _compare(actual, expected, rtol, atol, preamble, CheckValueMode(check_value), check_dtype)


def _lead(preamble: str | None) -> str:
    return preamble.rstrip() + "\n" if preamble else ""


def _host(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu") if t.device.type != "cpu" else t.detach()


def _compare(
    actual: torch.Tensor,
    expected: torch.Tensor,
    rtol: float | None,
    atol: Tolerance | None,
    preamble: str | None,
    mode: CheckValueMode,
    check_dtype: bool,
) -> None:
    a, e = _host(actual), _host(expected)
    if not check_dtype and a.dtype != e.dtype:
        common = torch.promote_types(a.dtype, e.dtype)
        a, e = a.to(common), e.to(common)
    lead = _lead(preamble)
    if a.shape != e.shape:
        raise AssertionError(f"{lead}shapes differ: actual {tuple(a.shape)}, expected {tuple(e.shape)}")
    if a.dtype != e.dtype:
        raise AssertionError(f"{lead}dtypes differ: actual {a.dtype}, expected {e.dtype}")
    if mode is CheckValueMode.SKIP:
        return
    if callable(atol):
        if rtol is not None:
            raise ValueError(f"rtol must be None when atol is a callable, got rtol={rtol}")
        _compare_elementwise(a, e, atol, lead)
        return
    default_rtol, default_atol = torch.testing._comparison.default_tolerances(a, e)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    if mode is CheckValueMode.LOOSE:
        checks = [(rtol, atol)]
    else:
        checks = [(0.0, atol), (rtol, 0.0 if a.dtype in _FLOAT8 else 1e-7)]
    for r, t in checks:
        try:
            torch.testing.assert_close(a, e, rtol=r, atol=t, equal_nan=True, check_device=False)
        except AssertionError as failure:
            raise AssertionError(f"{lead}{failure}\n{_report(a, e, mode)}") from None


def _compare_elementwise(a: torch.Tensor, e: torch.Tensor, atol: Callable[[float], float], lead: str) -> None:
    bad = []
    for index in range(a.numel()):
        x, y = a.reshape(-1)[index].item(), e.reshape(-1)[index].item()
        allowed = atol(y)
        same_nan = isinstance(x, float) and math.isnan(x) and math.isnan(y)
        if not same_nan and not abs(x - y) <= allowed:
            bad.append(f"  at {_unravel(index, a.shape)}: expected {y}, actual {x}, |diff| {abs(x - y)} > {allowed}")
    if bad:
        raise AssertionError(
            f"{lead}{len(bad)} of {a.numel()} elements differ by more than atol(expected):\n" + "\n".join(bad)
        )


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _report(a: torch.Tensor, e: torch.Tensor, mode: CheckValueMode) -> str:
    """The largest differences, and the tolerances that would let this comparison pass."""
    if a.dtype == torch.bool or a.is_complex():
        return ""
    x, y = a.double(), e.double()
    diff = (x - y).abs()
    diff = torch.where(torch.isnan(x) & torch.isnan(y), torch.zeros_like(diff), diff)
    rel = torch.where(diff == 0, torch.zeros_like(diff), diff / y.abs())
    flat = diff.reshape(-1)
    worst = torch.argsort(torch.nan_to_num(flat, nan=math.inf), descending=True)[:_SHOWN]
    lines = ["Largest differences:"]
    for i in worst.tolist():
        if flat[i] == 0:
            break
        idx = _unravel(i, a.shape)
        lines.append(
            f"  at {idx}: expected {y.reshape(-1)[i].item()}, actual {x.reshape(-1)[i].item()}, "
            f"|diff| {flat[i].item():.3g}, relative {rel.reshape(-1)[i].item():.3g}"
        )
    max_abs, max_rel = float(diff.max()) if diff.numel() else 0.0, float(rel.max()) if rel.numel() else 0.0
    if mode is CheckValueMode.STRICT:
        need = f"atol >= {max_abs:.3g} and rtol >= {max_rel:.3g}"
        if math.isinf(max_rel):
            need += " (an expected 0 met a non-zero value: no rtol passes STRICT; use LOOSE)"
    else:
        need = f"atol >= {max_abs:.3g} (rtol=0), or rtol >= {max_rel:.3g} (atol=0)"
    lines.append(f"To pass {mode.name}: {need}")
    return "\n".join(lines)


class OpTracer(TorchDispatchMode, contextlib.ContextDecorator):
    """Records every op dispatched while it is active: `ops_log` maps a namespace ("aten", "prims", ...) to
    ``{op overload name ("aten.add.Tensor"): number of calls}``, in first-call order. Use it as a context manager
    (``with OpTracer() as tracer:``) or a decorator (``OpTracer()(fn)`` / ``@tracer``); every entry starts a fresh
    log. The ops are those that reach the dispatcher below autograd, so composite ops show as what they decompose
    into. Ops run unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.ops_log: collections.defaultdict[str, dict[str, int]] = collections.defaultdict(dict)

    def __enter__(self) -> OpTracer:
        self.ops_log = collections.defaultdict(dict)
        super().__enter__()
        return self

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        calls = self.ops_log[func.namespace]
        name = str(func)
        calls[name] = calls.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    def num_atens(self) -> int:
        """Calls of ATen ops recorded."""
        return sum(self.ops_log.get("aten", {}).values())

    def _pformat(self) -> str:
        out = []
        for namespace in sorted(self.ops_log):
            ops = self.ops_log[namespace]
            out.append(f"Ops for namespace: '{namespace}' ({len(ops)} ops)")
            out.extend(f"  {op}: {n}" for op, n in ops.items())
        return "\n".join(out)

    def pformat(self) -> str:
        """One line per namespace (with its number of distinct ops), then one line per op with its call count."""
        return self._pformat()


__all__ = ["CheckValueMode", "OpTracer", "Tolerance", "assert_close"]
