"""AdamW as a functional optimizer (`torch.tpu.optimizers.AdamW`).

The update is torch.optim.AdamW's (decoupled weight decay, bias-corrected moments), written with plain tensor ops so
the same code runs eagerly on tpu or CPU tensors and traces under make_fx. TorchTPU's version hands its lists to
`torch.optim.adamw.adamw` with `capturable=True`; the step counters are tensors here as there, so a traced step needs
no host value.

`use_bfloat16_moments=True` (the default, as TorchTPU's) stores both moments in bfloat16; each step computes in float32
(the parameter's dtype when that is float64) and rounds the new moments back into the bfloat16 state, whose rounded
values then drive the parameter update.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch

from torch_tpu._internal.optimizers import optim as _optim

__all__ = ["AdamW"]


class AdamW(_optim.Optimizer):
    """Functional AdamW: `init_param_group` zeroes m, v and a step counter per parameter; `step` updates in place.

    The flags TorchTPU forwards to torch's functional AdamW (`foreach`, `capturable`, `differentiable`, `fused`) are
    accepted and listed in `defaults` but select nothing: there is one implementation. `maximize` is honoured.
    `amsgrad`, `grad_scale` and `found_inf` need state or inputs TorchTPU's ParamGroup does not carry (its call fails
    at the first step with them); here they are refused when the optimizer is built.
    """

    @dataclasses.dataclass
    class ParamGroup:
        """The parameters and AdamW's per-parameter state: first moments, second moments and step counters."""

        params: dict[str, torch.Tensor]
        opt_state_m: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_state_v: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_steps: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = (
        "lr",
        "weight_decay",
        "beta1",
        "beta2",
        "eps",
        "use_bfloat16_moments",
        "amsgrad",
        "maximize",
        "foreach",
        "capturable",
        "differentiable",
        "fused",
        "grad_scale",
        "found_inf",
    )

    def __init__(
        self,
        lr: float = 1e-3,
        weight_decay: float = 1e-2,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        use_bfloat16_moments: bool = True,
        amsgrad: bool = False,
        maximize: bool = False,
        foreach: bool | None = False,
        capturable: bool = True,
        differentiable: bool = False,
        fused: bool | None = False,
        grad_scale: torch.Tensor | None = None,
        found_inf: torch.Tensor | None = None,
    ) -> None:
        if amsgrad:
            raise NotImplementedError("AdamW(amsgrad=True): the ParamGroup has no max-second-moment state")
        if grad_scale is not None or found_inf is not None:
            raise NotImplementedError("AdamW(grad_scale=..., found_inf=...): unscale the gradients before step()")
        super().__init__(lr=lr, weight_decay=weight_decay)
        self._beta1 = beta1
        self._beta2 = beta2
        self._eps = eps
        self._use_bfloat16_moments = use_bfloat16_moments
        self._amsgrad = amsgrad
        self._maximize = maximize
        self._foreach = foreach
        self._capturable = capturable
        self._differentiable = differentiable
        self._fused = fused
        self._grad_scale = grad_scale
        self._found_inf = found_inf

    def init_param_group(self, params: dict[str, torch.Tensor] | torch.nn.Module) -> AdamW.ParamGroup:
        """Zero moments (bfloat16 with `use_bfloat16_moments`) and step counters at 0 for every parameter."""
        params = _optim.named_params(params)
        if not params:
            return self.ParamGroup(params={})
        moment_dtype = torch.bfloat16 if self._use_bfloat16_moments else None
        return self.ParamGroup(
            params=params,
            opt_state_m=_optim.zeros_like_each(params, moment_dtype),
            opt_state_v=_optim.zeros_like_each(params, moment_dtype),
            opt_steps=_optim.step_counters(params, 0.0),
        )

    @torch.no_grad()
    def step(self, param_group: AdamW.ParamGroup, grads: dict[str, torch.Tensor]) -> AdamW.ParamGroup:
        """One AdamW update of every parameter of the group, in place; returns the group."""
        for name, param in param_group.params.items():
            self._update(
                param,
                grads[name],
                param_group.opt_state_m[name],
                param_group.opt_state_v[name],
                param_group.opt_steps[name],
            )
        return param_group

    def _update(
        self, param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: torch.Tensor
    ) -> None:
        step.add_(1.0)
        dtype = _optim.compute_dtype(param)
        g = grad.to(dtype)
        if self._maximize:
            g = -g
        m.copy_(m.to(dtype).lerp(g, 1.0 - self._beta1))
        v.copy_(v.to(dtype).mul(self._beta2).addcmul(g, g, value=1.0 - self._beta2))
        t = step.to(dtype)
        bias1 = 1.0 - torch.pow(self._beta1, t)
        bias2_sqrt = (1.0 - torch.pow(self._beta2, t)).sqrt()
        denom = v.to(dtype).sqrt() / bias2_sqrt + self._eps
        update = m.to(dtype) / denom * (self._lr / bias1)
        p = param.to(dtype)
        if self._weight_decay != 0.0:
            p = p * (1.0 - self._lr * self._weight_decay)
        param.copy_(p - update)


_optim.register_param_group(AdamW.ParamGroup)
