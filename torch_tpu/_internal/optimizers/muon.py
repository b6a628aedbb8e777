"""Muon as a functional optimizer (`torch.tpu.optimizers.Muon`): momentum whose update direction is orthogonalised by a
Newton-Schulz iteration before it is applied.

The update is the one of `torch.optim._muon` (which TorchTPU's version calls), in plain tensor ops: the momentum
buffer moves towards the gradient by `1 - momentum`; the direction is the buffer, or with Nesterov the gradient moved
towards the buffer by `momentum`; the direction is normalised by its Frobenius norm and run through `ns_steps`
quintic Newton-Schulz steps with coefficients (a, b, c) = (3.4445, -4.7750, 2.0315), in bfloat16 and on the wide
orientation of the matrix; the parameter decays by `lr * weight_decay` and moves by the orthogonalised direction times
`lr` scaled by `adjust_lr_fn`. Only 2-D parameters are accepted.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import torch

from torch_tpu._internal.optimizers import optim as _optim

__all__ = ["Muon"]

DEFAULT_A: float = 3.4445
DEFAULT_B: float = -4.7750
DEFAULT_C: float = 2.0315
DEFAULT_NS_STEPS: int = 5
EPS: float = 1e-7


def orthogonalize(
    matrix: torch.Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int, eps: float
) -> torch.Tensor:
    """Approximately replaces the singular values of the 2-D `matrix` by ~1 (its "zeroth power"), in bfloat16.

    The matrix is scaled to Frobenius norm 1 (at least `eps` in the divisor), transposed when it has more rows than
    columns so the Gram matrix is the small one, then iterated X <- a X + (b G + c G^2) X with G = X X^T.
    """
    if ns_steps >= 100:
        raise ValueError("Muon: ns_steps must be below 100")
    if matrix.dim() != 2:
        raise ValueError("Muon: the Newton-Schulz iteration takes a 2-D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Muon: ns_coefficients must hold exactly three numbers")
    a, b, c = ns_coefficients
    tall = matrix.size(0) > matrix.size(1)
    x = matrix.to(torch.bfloat16)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.addmm(x, poly, x, beta=a)
    return x.T if tall else x


def adjusted_lr(lr: float, adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """The learning rate Muon applies to a parameter of `shape` (rows A, columns B).

    None or "original": lr * sqrt(max(1, A/B)); "match_rms_adamw": lr * 0.2 * sqrt(max(A, B));
    "spectral_unclamped": lr * sqrt(A/B); any other value: lr unchanged.
    """
    rows, cols = shape[0], shape[1]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    if adjust_lr_fn == "spectral_unclamped":
        return lr * math.sqrt(rows / cols)
    return lr


class Muon(_optim.Optimizer):
    """Functional Muon: `init_param_group` zeroes a momentum buffer (bfloat16 with `use_bfloat16_moments`) and makes a
    step counter (starting at 1) per parameter; `step` updates the parameters in place.

    `foreach` is accepted and listed in `defaults` but selects nothing; `has_complex=True` is refused, as torch's Muon
    refuses it. With bfloat16 moments the momentum arithmetic is float32 and the new buffer is rounded into bfloat16.
    """

    @dataclasses.dataclass
    class ParamGroup:
        """The parameters and Muon's per-parameter state: momentum buffers and step counters."""

        params: dict[str, torch.Tensor]
        opt_state_m: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_steps: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = (
        "lr",
        "weight_decay",
        "momentum",
        "nesterov",
        "ns_coefficients",
        "eps",
        "ns_steps",
        "adjust_lr_fn",
        "use_bfloat16_moments",
        "foreach",
        "has_complex",
    )

    def __init__(
        self,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
        eps: float = EPS,
        ns_steps: int = DEFAULT_NS_STEPS,
        adjust_lr_fn: str | None = None,
        use_bfloat16_moments: bool = False,
        foreach: bool | None = False,
        has_complex: bool = False,
    ) -> None:
        super().__init__(lr=lr, weight_decay=weight_decay)
        self._momentum = momentum
        self._nesterov = nesterov
        self._ns_coefficients = ns_coefficients
        self._eps = eps
        self._ns_steps = ns_steps
        self._adjust_lr_fn = adjust_lr_fn
        self._use_bfloat16_moments = use_bfloat16_moments
        self._foreach = foreach
        self._has_complex = has_complex

    def init_param_group(self, params: dict[str, torch.Tensor] | torch.nn.Module) -> Muon.ParamGroup:
        """Zero momentum buffers and step counters at 1 for every parameter."""
        params = _optim.named_params(params)
        if not params:
            return self.ParamGroup(params={})
        moment_dtype = torch.bfloat16 if self._use_bfloat16_moments else None
        return self.ParamGroup(
            params=params,
            opt_state_m=_optim.zeros_like_each(params, moment_dtype),
            opt_steps=_optim.step_counters(params, 1.0),
        )

    @torch.no_grad()
    def step(self, param_group: Muon.ParamGroup, grads: dict[str, torch.Tensor]) -> Muon.ParamGroup:
        """One Muon update of every (2-D) parameter of the group, in place; returns the group."""
        if self._has_complex:
            raise ValueError("Muon: complex parameters are not supported")
        for name, param in param_group.params.items():
            self._update(param, grads[name], param_group.opt_state_m[name])
            param_group.opt_steps[name].add_(1.0)
        return param_group

    def _update(self, param: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor) -> None:
        if grad.dim() != 2:
            raise ValueError(f"Muon updates 2-D parameters only; got a gradient of shape {tuple(grad.shape)}")
        dtype = _optim.compute_dtype(param)
        g = grad.to(dtype)
        buf.copy_(buf.to(dtype).lerp(g, 1.0 - self._momentum))
        momentum = buf.to(dtype)
        direction = g.lerp(momentum, self._momentum) if self._nesterov else momentum
        ortho = orthogonalize(direction, self._ns_coefficients, self._ns_steps, self._eps)
        p = param.to(dtype).mul(1.0 - self._lr * self._weight_decay)
        scale = adjusted_lr(self._lr, self._adjust_lr_fn, param.shape)
        param.copy_(p.add(ortho.to(dtype), alpha=-scale))


_optim.register_param_group(Muon.ParamGroup)
