"""PyTorch's opmath evaluation of a CPU sample, the runner's last measure for bfloat16/float16 results.

Every ATen op that takes bfloat16/float16 tensors is computed on float32 copies and its floating results are rounded
back to the dtypes the op returns: one rounding per op, which is how PyTorch's CUDA kernels (and most of its CPU
kernels) compute in half precision. A few CPU kernels step through their arithmetic in the half type instead (the
scalar tail of a vectorized loop, prod, polygamma), so their answers differ from CUDA's by an ulp here and there, and
a chain of such ops (a backward formula) can magnify that. A tpu result equal to the opmath one within the default
tolerances is what PyTorch's own numerics prescribe.

In-place and view ops run as they are (their results alias their inputs), so a chain through them is compared
as CPU evaluates it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

HALF = (torch.bfloat16, torch.float16)


def _has_half(tree: Any) -> bool:
    return any(isinstance(t, torch.Tensor) and t.dtype in HALF for t in tree_flatten(tree)[0])


def _widen(x: Any) -> Any:
    """float32 for a half tensor, and for a half dtype argument (`input_dtype` of softmax backward, say)."""
    if isinstance(x, torch.dtype):
        return torch.float32 if x in HALF else x
    return x.float() if isinstance(x, torch.Tensor) and x.dtype in HALF else x


def _on_meta(x: Any) -> Any:
    return x.to("meta") if isinstance(x, torch.Tensor) else x


class OpmathMode(TorchDispatchMode):
    """Evaluates half-precision ATen ops in float32, rounding each op's results once."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func._schema.is_mutable or func.is_view or not _has_half((args, kwargs)):
            return func(*args, **kwargs)
        try:
            shapes = func(*tree_map(_on_meta, args), **tree_map(_on_meta, kwargs))  # the dtypes the op returns
        except Exception:  # noqa: BLE001  (no meta kernel: evaluate as it is)
            return func(*args, **kwargs)
        try:
            wide = func(*tree_map(_widen, args), **tree_map(_widen, kwargs))
        except Exception:  # noqa: BLE001  (no float32 form: evaluate as it is)
            return func(*args, **kwargs)
        wanted, spec = tree_flatten(shapes)
        got, _ = tree_flatten(wide)
        if len(wanted) != len(got):
            return func(*args, **kwargs)
        rounded = [
            g.to(w.dtype) if isinstance(g, torch.Tensor) and isinstance(w, torch.Tensor) and g.dtype != w.dtype else g
            for w, g in zip(wanted, got, strict=True)
        ]
        return tree_unflatten(rounded, spec)


def fresh_copy(x: Any) -> Any:
    """A copy of a sample argument whose tensors are new leaves (requires_grad kept), taken before CPU writes them."""

    def copy(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().clone()
        return c.requires_grad_(t.requires_grad) if c.is_floating_point() or c.is_complex() else c

    return tree_map(copy, x)
