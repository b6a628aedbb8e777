"""Meta kernels for the few ATen ops PyTorch ships without one.

torch_tpu takes every lowered op's output sizes and dtypes from its meta kernel (and torch.compile's fake tensors need
one too); an op without a meta kernel would run through the CPU fallback even though it has a lowering rule. These
registrations only describe outputs: same sizes and dtype as PyTorch's CPU kernels produce.
"""

from __future__ import annotations

import torch

_LIB = torch.library.Library("aten", "IMPL")


def _logcumsumexp(self: torch.Tensor, dim: int) -> torch.Tensor:
    torch._check(self.dim() == 0 or -self.dim() <= dim < self.dim(), lambda: f"dim {dim} out of range")
    return torch.empty_like(self, memory_format=torch.contiguous_format)


def _multi_margin_loss_backward(
    grad_output: torch.Tensor,
    self: torch.Tensor,
    target: torch.Tensor,
    p: object,
    margin: object,
    weight: torch.Tensor | None = None,
    reduction: int = 1,
) -> torch.Tensor:
    return torch.empty_like(self, memory_format=torch.contiguous_format)


def _multilabel_margin_loss_backward(
    grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor, reduction: int, is_target: torch.Tensor
) -> torch.Tensor:
    return torch.empty_like(self, memory_format=torch.contiguous_format)


def _register() -> None:
    for name, fn in (
        ("_logcumsumexp", _logcumsumexp),
        ("multi_margin_loss_backward", _multi_margin_loss_backward),
        ("multilabel_margin_loss_backward", _multilabel_margin_loss_backward),
    ):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta"):
            _LIB.impl(name, fn, "Meta")


_register()
