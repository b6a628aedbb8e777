"""SGD with optional momentum, dampening, Nesterov and weight decay as a functional optimizer
(`torch.tpu.optimizers.Sgd`).

The arithmetic is torch.optim.SGD's, in plain tensor ops. The momentum buffer exists from `init_param_group` on (zeros)
and each parameter's step counter starts at 1: on the step whose counter reads 1 the buffer takes the (decayed)
gradient as is, as torch.optim.SGD does when it creates its buffer, and later steps apply momentum and dampening. That
choice is made with `torch.where` on the counter tensor, so a traced step needs no host value.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch

from torch_tpu._internal.optimizers import optim as _optim

__all__ = ["Sgd"]


class Sgd(_optim.Optimizer):
    """Functional SGD: `init_param_group` makes a momentum buffer per parameter (only when `momentum` is non-zero) and a
    step counter; `step` updates the parameters in place.

    `maximize` is honoured. `foreach`, `fused` and `has_sparse_grad` are accepted and listed in `defaults` but select
    nothing (dense gradients, one implementation). `grad_scale`/`found_inf` are refused: unscale gradients first.
    """

    @dataclasses.dataclass
    class ParamGroup:
        """The parameters and SGD's per-parameter state: momentum buffers (empty without momentum) and step counters."""

        params: dict[str, torch.Tensor]
        opt_state_m: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_steps: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = (
        "lr",
        "momentum",
        "dampening",
        "weight_decay",
        "nesterov",
        "maximize",
        "foreach",
        "fused",
        "grad_scale",
        "found_inf",
        "has_sparse_grad",
    )

    def __init__(
        self,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        maximize: bool = False,
        foreach: bool | None = False,
        fused: bool | None = True,
        grad_scale: torch.Tensor | None = None,
        found_inf: torch.Tensor | None = None,
        has_sparse_grad: bool = False,
    ) -> None:
        if grad_scale is not None or found_inf is not None:
            raise NotImplementedError("Sgd(grad_scale=..., found_inf=...): unscale the gradients before step()")
        super().__init__(lr=lr, weight_decay=weight_decay)
        self._momentum = momentum
        self._dampening = dampening
        self._nesterov = nesterov
        self._maximize = maximize
        self._foreach = foreach
        self._fused = fused
        self._grad_scale = grad_scale
        self._found_inf = found_inf
        self._has_sparse_grad = has_sparse_grad

    def init_param_group(self, params: dict[str, torch.Tensor] | torch.nn.Module) -> Sgd.ParamGroup:
        """Zero momentum buffers (none when momentum is 0) and step counters at 1 for every parameter."""
        params = _optim.named_params(params)
        if not params:
            return self.ParamGroup(params={})
        buffers = _optim.zeros_like_each(params) if self._momentum != 0.0 else {}
        return self.ParamGroup(params=params, opt_state_m=buffers, opt_steps=_optim.step_counters(params, 1.0))

    @torch.no_grad()
    def step(self, param_group: Sgd.ParamGroup, grads: dict[str, torch.Tensor]) -> Sgd.ParamGroup:
        """One SGD update of every parameter of the group, in place; returns the group."""
        for name, param in param_group.params.items():
            counter = param_group.opt_steps[name]
            self._update(param, grads[name], param_group.opt_state_m.get(name), counter)
            counter.add_(1.0)
        return param_group

    def _update(self, param: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor | None, step: torch.Tensor) -> None:
        dtype = _optim.compute_dtype(param)
        p = param.to(dtype)
        d_p = grad.to(dtype)
        if self._maximize:
            d_p = -d_p
        if self._weight_decay != 0.0:
            d_p = d_p.add(p, alpha=self._weight_decay)
        if self._momentum != 0.0 and buf is not None:
            later = buf.to(dtype).mul(self._momentum).add(d_p, alpha=1.0 - self._dampening)
            new_buf = torch.where(step == 1.0, d_p, later)
            buf.copy_(new_buf)
            d_p = d_p.add(new_buf, alpha=self._momentum) if self._nesterov else new_buf
        param.copy_(p.add(d_p, alpha=-self._lr))


_optim.register_param_group(Sgd.ParamGroup)
