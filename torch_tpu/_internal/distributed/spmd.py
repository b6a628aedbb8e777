"""TorchTPU's `spmd_safe` decorator.

TorchTPU runs each eager collective in a graph of its own unless the code is marked SPMD-safe (every rank issues the
same ops in the same order), in which case collectives fuse with the ops around them. torch_tpu's `tpu_dist` always
settles a collective's operands and stages it through host memory, so there is nothing to fuse and the rank-safety
promise changes no scheduling here. The decorator keeps the rest of TorchTPU's contract: the function's tpu inputs
and outputs are handed to the device (pending graphs flushed, without waiting), so no work from outside the function
joins the graphs it produces; under torch.compile it marks the traced nodes with `spmd_safe` metadata instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch.utils import _pytree

__all__ = ["spmd_safe"]

_F = TypeVar("_F", bound=Callable[..., Any])

SPMD_SAFE_METADATA_KEY = "spmd_safe"


def _flush_if_tpu(tree: Any) -> None:
    if any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in _pytree.tree_leaves(tree)):
        from torch_tpu._internal import sync

        sync.synchronize(wait=False)


def spmd_safe(func: _F) -> _F:
    """Marks `func` as issuing the same tpu ops and collectives, in the same order and shapes, on every rank; returns
    a wrapper with `func`'s signature and result."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            with torch.fx.traceback.annotate({SPMD_SAFE_METADATA_KEY: True}):
                return func(*args, **kwargs)
        _flush_if_tpu((args, kwargs))
        result = func(*args, **kwargs)
        _flush_if_tpu(result)
        return result

    return wrapper  # type: ignore[return-value]
