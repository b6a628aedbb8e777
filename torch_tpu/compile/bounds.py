"""Lengths outside the bounds of `mark_dynamic(t, dim, lower_bound, upper_bound)` are errors, not recompiles.

A graph traced with a bounded dynamic dim carries a guard on its range; a call with a length outside it fails the
guard and Dynamo traces the frame again, which silently turns the bound into a hint. TorchTPU raises instead. The
first graph of a frame, and any later one traced with bounds, records per input the dims whose symbol has bounds;
a recompile of the same frame (Dynamo's frame id) without them, for a length outside those bounds, raises
ValueError naming the input, the dim, the length and the bounds.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

_DEFAULT_LOWER = 2  # what Dynamo gives a dynamic dim with no lower bound (0 and 1 are specialised)


@dataclass(frozen=True)
class Bound:
    source: str  # Dynamo's name of the input, e.g. L['x']
    dim: int
    lower: int | None
    upper: int | None


_lock = threading.Lock()
_bounds: dict[int, list[Bound]] = {}  # Dynamo frame id -> bounded dims of its first graph


def _compile_id() -> tuple[int, int] | None:
    """(frame id, how many times that frame was compiled before), or None outside Dynamo."""
    compile_id = torch._guards.CompileContext.current_compile_id()
    frame, count = getattr(compile_id, "frame_id", None), getattr(compile_id, "frame_compile_id", None)
    return None if frame is None or count is None else (frame, count)


def _source(node: torch.fx.Node) -> str | None:
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    name = getattr(source, "name", None)
    return (name() if callable(name) else name) if source is not None else None


def _finite(value: Any) -> int | None:
    if isinstance(value, (int, sympy.Integer)) and abs(int(value)) < 1 << 62:
        return int(value)
    return None


def _bounded_dims(gm: torch.fx.GraphModule) -> list[Bound]:
    found = []
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val")) if node.op == "placeholder" else None
        name = _source(node) if isinstance(value, torch.Tensor) else None
        if name is None:
            continue
        for dim, size in enumerate(value.shape):
            if not isinstance(size, torch.SymInt) or not isinstance(size.node.expr, sympy.Symbol):
                continue
            ranges = size.node.shape_env.var_to_range.get(size.node.expr)
            upper = _finite(ranges.upper) if ranges is not None else None
            lower = _finite(ranges.lower) if ranges is not None else None
            if upper is not None or (lower is not None and lower > _DEFAULT_LOWER):
                found.append(Bound(name, dim, lower, upper))
    return found


def check(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Records the bounded dims of a frame's first graph; raises ValueError when a later graph of that frame was
    traced for a length outside them."""
    ids = _compile_id()
    if ids is None:
        return
    frame, count = ids
    found = _bounded_dims(gm)
    with _lock:
        # a frame's first graph (also after torch._dynamo.reset(), which reuses frame ids), or one traced for new
        # bounds (the caller marked again), sets what later graphs of the frame are held to
        if count == 0 or found:
            if found:
                _bounds[frame] = found
            else:
                _bounds.pop(frame, None)
            return
        recorded = _bounds.get(frame)
    if recorded is None:
        return
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    by_source = {_source(n): x for n, x in zip(placeholders, example_inputs, strict=False)}
    for b in recorded:
        x = by_source.get(b.source)
        if not isinstance(x, torch.Tensor) or b.dim >= x.dim():
            continue
        size = x.shape[b.dim]
        length = size.node.hint if isinstance(size, torch.SymInt) else int(size)
        if length is None:
            continue
        below = b.lower is not None and b.lower > _DEFAULT_LOWER and length < b.lower
        if below or (b.upper is not None and length > b.upper):
            raise ValueError(
                f"dim {b.dim} of {b.source} has length {length}, outside the bounds [{b.lower}, {b.upper}] given "
                "to mark_dynamic; torch_tpu does not recompile past a bound (mark a wider one)"
            )
