"""Running compiled graphs: every ATen op of a call is recorded into the fused engine's open graph, so one call is
one StableHLO program (compiled once per structure: the engine's cache hits when the program text repeats)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from torch_tpu import _C


@contextlib.contextmanager
def fused() -> Iterator[None]:
    """Records the block into the fused graph. Entered from debug/strict mode, leaving runs the graph (the block is
    one program); entered from fused mode, the block joins the open graph and runs at the caller's next sync."""
    previous = str(_C._get_eager_mode())
    if previous == "fused":
        yield
        return
    _C._set_eager_mode("fused")
    try:
        yield
    finally:
        _C._set_eager_mode(previous)


def run_fused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (called with positional arguments) run inside `fused()`."""

    def call(*args: Any) -> Any:
        with fused():
            return fn(*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call
