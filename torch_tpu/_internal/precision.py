"""TorchTPU's precision API: `Precision` and the `precision(mode)` context manager (also `torch.tpu.Precision` and
`torch.tpu.precision`).

The precision is StableHLO's `precision_config` of every matrix product (dot_general, convolution) in the programs
torch_tpu builds. Outside any `precision(...)` block it follows PyTorch's float32 matmul precision:
`torch.set_float32_matmul_precision("highest" | "high" | "medium")` gives HIGHEST, HIGH, DEFAULT (PyTorch's default
is "highest", so products are exact float32 unless a script asks otherwise). Inside a block the block's mode wins;
blocks nest. On a TPU, DEFAULT multiplies float32 operands in one bfloat16 pass, HIGH in three, HIGHEST in float32;
on XLA-CPU every mode computes in float32. Ops record their precision with the graph they join (a graph's products
share one precision), and compiled programs and replayed `torch.compile` graphs are keyed by it.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Iterator

import torch

from torch_tpu import _C


class Precision(enum.Enum):
    """StableHLO's precision of a matrix product's operands (the enum's values are StableHLO's)."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


_lock = threading.Lock()
_stack: list[Precision] = []


def current() -> Precision:
    """The precision the next matrix products get."""
    return Precision[str(_C._current_precision())]


@contextlib.contextmanager
def precision(mode: Precision) -> Iterator[None]:
    """Runs the block's matrix products (matmul, linear, bmm, convolution, ...) at `mode`."""
    torch._dynamo.graph_break()  # a compiled region's programs carry one precision: run the block eagerly
    if not isinstance(mode, Precision):
        raise ValueError(f"precision mode must be Precision.DEFAULT, Precision.HIGH or Precision.HIGHEST, not {mode!r}")
    with _lock:
        _stack.append(mode)
        _C._set_precision_override(mode.value)
    try:
        yield
    finally:
        with _lock:
            _stack.pop()
            _C._set_precision_override(_stack[-1].value if _stack else -1)


__all__ = ["Precision", "precision"]
