"""Compiled graphs run again without dispatching their ops (the C++ side: csrc/exec/replay.h).

The first call of a compiled graph runs through the fused engine as usual: every op is recorded, and new op
structures are lowered and compiled. A later call is *captured*: its ops, recorded into an otherwise empty graph,
become one program whose arguments are the call's inputs. From then on a call whose inputs look exactly like the
captured ones (dtype, shape, strides, storage sharing, number values) runs that program directly: one execution, no
per-op dispatch, no graph recording. Inputs that differ (another shape under dynamic shapes) get a capture of their
own, up to `MAX_CAPTURES`; a call the engine cannot repeat exactly (a random draw, a host op, a value read back to
the host) is never captured and keeps running through the fused engine.

`TORCH_TPU_COMPILE_REPLAY=0` turns replay off (every call is recorded, as in fused eager).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from torch_tpu import _C, config
from torch_tpu.compile import counters
from torch_tpu.compile.runner import fused

MAX_CAPTURES = 8  # input signatures captured per graph
MAX_FAILED = 3  # captures refused in a row before a graph stops trying

_ENABLED: bool | None = None
last_refusal = ""  # why the most recent capture (of any graph) was refused
_warming = threading.local()  # .on: captures on this thread compile in the background and do not run


def enabled() -> bool:
    global _ENABLED
    if _ENABLED is None:
        _ENABLED = config.load().compile_replay
    return _ENABLED


def set_enabled(on: bool) -> None:
    """Turns replay on or off for graphs called from now on (tests; TORCH_TPU_COMPILE_REPLAY sets the default)."""
    global _ENABLED
    _ENABLED = on


def _device_of(args: Sequence[Any]) -> int | None:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "tpu":
            return a.device.index
    return None


@contextlib.contextmanager
def compile_only() -> Iterator[None]:
    """Captures made on this thread inside the block hand their program to the background compiler and do not run
    it (async_compile's warm-up: the call's results are never computed, so the caller must drop them). A call that
    cannot be captured runs as usual."""
    previous = getattr(_warming, "on", False)
    _warming.on = True
    try:
        yield
    finally:
        _warming.on = previous


class Replayed:
    """A compiled graph's callable (`fn(*args)`) with its captures."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        # (_C.CapturedGraph, what that call of fn returned: tuple, list, or None for one tensor)
        self.captures: list[tuple[Any, type | None]] = []
        self.failed = 0
        self.last_refusal = ""  # why the last capture was refused (for debugging)

    def __call__(self, args: Sequence[Any]) -> Any:
        if not enabled():
            with fused():
                return self.fn(*args)
        for graph, returns in self.captures:
            outs = graph.replay(args)
            if outs is not None:
                counters.bump("replayed_calls")
                if returns is tuple:
                    return tuple(outs)
                return outs if returns is list else outs[0]
        device = _device_of(args)
        if device is None or self.failed >= MAX_FAILED or len(self.captures) >= MAX_CAPTURES:
            with fused():
                return self.fn(*args)
        return self._capture(device, list(args))

    def _capture(self, device: int, args: list[Any]) -> Any:
        outs = None
        with fused():  # the capture ends inside the region: leaving it from debug/strict mode runs the graph
            token = _C._capture_begin(device)
            try:
                outs = self.fn(*args)
            finally:
                flat = None if outs is None else list(outs) if isinstance(outs, (list, tuple)) else [outs]
                graph, why = _C._capture_end(device, token, args, flat, getattr(_warming, "on", False))
        if graph is None:
            global last_refusal
            self.failed += 1
            self.last_refusal = last_refusal = why
            counters.bump("refused_captures")
        else:
            self.failed = 0  # a call's first run at a new shape lowers new op structures: refused, not hopeless
            self.captures.append((graph, type(outs) if isinstance(outs, (list, tuple)) else None))
            counters.bump("captured_graphs")
        return outs
