"""Formatting of what `OpTracer` recorded, under TorchTPU's module path."""

from __future__ import annotations

from torch_tpu._internal.utils.utils import OpTracer


def pformat_op_tracer(tracer: OpTracer) -> str:
    """The tracer's log as text: each namespace with its number of distinct ops, then each op and its calls."""
    return tracer.pformat()


__all__ = ["pformat_op_tracer"]
