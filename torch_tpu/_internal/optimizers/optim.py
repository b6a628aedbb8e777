"""The functional optimizer interface TorchTPU's `torch.tpu.optimizers` share, and helpers for its implementations.

A functional optimizer owns no tensors. `init_param_group(params)` builds a ParamGroup (a dataclass holding the
parameters and every state tensor, registered as a pytree so a traced train step can flatten it), and
`step(param_group, grads)` updates that group's tensors in place and returns it. Hyperparameters are plain Python
numbers fixed when the optimizer is built: a traced step bakes them in as constants, so changing one means building a
new optimizer.
"""

from __future__ import annotations

import abc
import dataclasses
import types
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch.utils import _pytree

__all__ = ["Optimizer"]


class Optimizer(abc.ABC):
    """Base class of the stateless optimizers: hyperparameters in, ParamGroup transformations out.

    Subclasses set `ParamGroup` (their state dataclass) and `_HYPERPARAMETER_NAMES` (the constructor arguments that
    `defaults` reports; each lives in the attribute of that name prefixed with an underscore).
    """

    ParamGroup: ClassVar[Any]
    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = ("lr", "weight_decay")

    def __init__(self, lr: float = 1e-3, weight_decay: float = 0.0) -> None:
        self._lr = lr
        self._weight_decay = weight_decay

    @property
    def defaults(self) -> Mapping[str, Any]:
        """The hyperparameters, by constructor argument name, as a read-only mapping."""
        return types.MappingProxyType({name: getattr(self, f"_{name}") for name in self._HYPERPARAMETER_NAMES})

    @abc.abstractmethod
    def init_param_group(self, params: dict[str, torch.Tensor] | torch.nn.Module) -> Any:
        """Builds a fresh ParamGroup (zeroed state) for a dict of tensors or a module's parameters."""

    @abc.abstractmethod
    def step(self, param_group: Any, grads: dict[str, torch.Tensor]) -> Any:
        """Applies one update to `param_group` (in place) from `grads`, keyed like its params; returns the group."""

    def __call__(self, param_group: Any, grads: dict[str, torch.Tensor]) -> Any:
        return self.step(param_group, grads)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.defaults.items())
        return f"{type(self).__name__}({args})"


def named_params(params: dict[str, torch.Tensor] | torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors an optimizer updates: a dict as given, or a module's parameters, detached (they share storage with
    the module's) and keyed by their dotted names with the dots turned into underscores."""
    if isinstance(params, torch.nn.Module):
        return {name.replace(".", "_"): p.detach() for name, p in params.named_parameters()}
    return dict(params)


def zeros_like_each(params: dict[str, torch.Tensor], dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """A zero tensor per parameter, same shape, layout and device (and dtype unless `dtype` is given)."""
    return {
        name: torch.zeros_like(p, dtype=dtype, memory_format=torch.preserve_format, device=p.device)
        for name, p in params.items()
    }


def step_counters(params: dict[str, torch.Tensor], start: float) -> dict[str, torch.Tensor]:
    """A float32 scalar step counter per parameter, on the parameter's device, starting at `start`."""
    return {name: torch.tensor(start, dtype=torch.float32, device=p.device) for name, p in params.items()}


def compute_dtype(param: torch.Tensor) -> torch.dtype:
    """The dtype an update is computed in: the parameter's own when it is float32/float64, float32 otherwise (so
    low-precision parameters and moments are updated from float32 arithmetic)."""
    return param.dtype if param.dtype in (torch.float32, torch.float64) else torch.float32


def register_param_group(cls: type) -> type:
    """Registers a ParamGroup dataclass as a pytree node whose children are its fields, in declaration order."""
    names = tuple(f.name for f in dataclasses.fields(cls))

    def flatten(group: Any) -> tuple[list[Any], None]:
        return [getattr(group, n) for n in names], None

    def unflatten(children: Any, _context: Any) -> Any:
        return cls(**dict(zip(names, children, strict=True)))

    _pytree.register_pytree_node(cls, flatten, unflatten)
    return cls
