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


aten = torch.ops.aten

# Functional ops whose registered decompositions (PyTorch's references) write into a view of a fresh tensor with
# prims.copy_to, which AOTAutograd rejects ("expected to have an entirely functional graph"). They stay whole and run
# through their composite kernels, whose pieces have tpu kernels.
_MUTATING_DECOMPOSITIONS = {
    aten.diagonal_scatter.default,
    aten.constant_pad_nd.default,  # lowered whole anyway (a tpu kernel)
}


# Dtype conversion: its decomposition is prims.convert_element_type, which has no vmap batching rule, so under vmap
# (FlexAttention's score_mod and mask_mod) functorch's fallback unrolls it element by element (4096 slices for one
# 64x64 score). Its composite kernel (an empty tensor and copy_) has tpu kernels.
_KEPT_FOR_VMAP = {aten._to_copy.default}


def _stays_whole(op: torch._ops.OpOverload) -> bool:
    """Ops kept as they are: those with a tpu kernel, views (whatever their kernel, they stay views) and the ops
    whose decompositions are not functional or not batchable."""
    return (
        has_tpu_kernel(op)
        or bool(getattr(op, "is_view", False))
        or op in _MUTATING_DECOMPOSITIONS
        or op in _KEPT_FOR_VMAP
    )


def _batch_norm_functional(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, ...]:
    """BatchNorm in training as functionalization emits it: torch_tpu's native_batch_norm rule (one op, no running
    statistics given, so nothing is mutated) plus the running-statistics update as new values. PyTorch's own
    decomposition spells the normalization out in ~10 ops, which runs about half as fast here."""
    out, mean, invstd = aten.native_batch_norm.default(x, weight, bias, None, None, training, momentum, eps)
    if not training:
        return out, mean, invstd, running_mean, running_var
    n = x.numel() // x.shape[1]
    unbiased_var = (invstd.pow(-2) - eps) * (n / max(n - 1, 1))
    new_mean = torch.lerp(running_mean, mean.to(running_mean.dtype), momentum)
    new_var = torch.lerp(running_var, unbiased_var.to(running_var.dtype), momentum)
    return out, mean, invstd, new_mean, new_var


def _batch_norm_no_stats(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, ...]:
    return aten.native_batch_norm.default(x, weight, bias, None, None, training, momentum, eps)


def _batch_norm_eval(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, ...]:
    return aten.native_batch_norm.default(x, weight, bias, running_mean, running_var, False, momentum, eps)


# Rewrites onto ops torch_tpu lowers whole (they take precedence over PyTorch's decompositions).
_OWN: dict[torch._ops.OpOverload, Callable[..., Any]] = {
    aten._native_batch_norm_legit_functional.default: _batch_norm_functional,
    aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    aten._native_batch_norm_legit_no_training.default: _batch_norm_eval,
}


@functools.cache
def tpu_decompositions() -> dict[torch._ops.OpOverload, Callable[..., Any]]:
    """Decompositions of the ops without a tpu kernel. Composite kernels are decomposed too: their pieces may not be
    lowered (`_native_batch_norm_legit_functional`, which functionalization produces for BatchNorm in training, calls
    `_native_batch_norm_legit`, which would run on the CPU)."""
    from torch._decomp import decomposition_table

    table = {
        op: fn
        for op, fn in decomposition_table.items()
        if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten" and not _stays_whole(op)
    }
    if has_tpu_kernel(aten.native_batch_norm.default):
        table.update(_OWN)
    return table
