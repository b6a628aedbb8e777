"""Decompositions for the tpu backend: PyTorch's registered decompositions, but only for ops that would otherwise
leave the device or that have no tpu kernel of their own (an op with a tpu kernel stays whole: one lowering rule beats
the pieces)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch


def has_tpu_kernel(op: torch._ops.OpOverload) -> bool:
    """True when `op` has a kernel of its own for the tpu (PrivateUse1) key: a lowering rule or a hand-written
    kernel. Ops without one run through a composite kernel or the CPU fallback."""
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1"))


def _stays_whole(op: torch._ops.OpOverload) -> bool:
    """Ops kept as they are: those with a tpu kernel, and views (whatever their kernel, they stay views)."""
    return has_tpu_kernel(op) or bool(getattr(op, "is_view", False))


@functools.cache
def tpu_decompositions() -> dict[torch._ops.OpOverload, Callable[..., Any]]:
    """Decompositions of the ops without a tpu kernel. Composite kernels are decomposed too: their pieces may not be
    lowered (`_native_batch_norm_legit_functional`, which functionalization produces for BatchNorm in training, calls
    `_native_batch_norm_legit`, which would run on the CPU)."""
    from torch._decomp import decomposition_table

    return {
        op: fn
        for op, fn in decomposition_table.items()
        if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten" and not _stays_whole(op)
    }
