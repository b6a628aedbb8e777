"""ATen ops that run on tpu as PyTorch's own decompositions (torch._decomp) instead of through the CPU fallback.

Each op here has no lowering rule of its own; its decomposition is made of lowered ops, so it runs on the device
(registered as the op's PrivateUse1 kernel). Only ops whose decomposition needs no host read are listed.
"""

from __future__ import annotations

import torch
from torch._decomp import decomposition_table  # imported by `import torch` already

_LIB = torch.library.Library("aten", "IMPL")

# Creation ops whose result is a small index pattern built from arange and comparisons.
_OPS = ("tril_indices", "triu_indices")


def _register() -> None:
    for name in _OPS:
        fn = decomposition_table.get(getattr(torch.ops.aten, name).default)
        if fn is not None:  # a torch without this decomposition: the op keeps the CPU fallback
            _LIB.impl(name, fn, "PrivateUse1")


_register()
