"""ATen ops that run on tpu as PyTorch's own decompositions (torch._decomp) instead of through the CPU fallback.

Each op here has no lowering rule of its own; its decomposition is made of lowered ops, so it runs on the device
(registered as the op's PrivateUse1 kernel). Only ops whose decomposition needs no host read are listed.
torch._decomp is imported on the first call, not with torch_tpu: importing it registers Python kernels that change
how other ops dispatch (autograd's zero tensors among them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_LIB = torch.library.Library("aten", "IMPL")

# Creation ops whose result is a small index pattern built from arange and comparisons.
_OPS = ("tril_indices", "triu_indices")


def _decomposed(name: str) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        from torch._decomp import decomposition_table

        return decomposition_table[getattr(torch.ops.aten, name).default](*args, **kwargs)

    return kernel


def _register() -> None:
    for name in _OPS:
        _LIB.impl(name, _decomposed(name), "PrivateUse1")


_register()
