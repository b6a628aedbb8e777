"""TorchTPU's deprecated `custom_jax_kernel`: a JAX function called directly on torch tensors (no custom op, so no
autograd and no torch.compile graph of its own; `jax_op` has both). Static arguments are named by position or
name; every other argument is a tensor. Results come back in the JAX function's own structure.

`input_output_aliases` ({argument position: result index}, as TorchTPU's) writes a result back into its argument
after the call, as TorchTPU does: the argument tensor holds the result's values afterwards (a kernel that updates a
cache in place relies on it). `donate_argnums` only lets TorchTPU reuse a buffer; the arguments stay valid here."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_tpu._internal.pallas._bridge import Bridge, run

__all__ = ["JaxCallable", "custom_jax_kernel"]


class JaxCallable:
    def __init__(
        self, fn: Callable[..., Any], name: str, static: set[str], aliases: dict[int, int] | None = None
    ) -> None:
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise TypeError(f"custom_jax_kernel: {name} takes *{p.name}; name its parameters")
        self.name = name
        self._bridge = Bridge(name, fn, sig, [n for n in sig.parameters if n not in static])
        params = list(sig.parameters)
        self._aliases: dict[str, int] = {}
        for position, result in (aliases or {}).items():
            if not 0 <= position < len(params) or params[position] in static:
                raise ValueError(
                    f"custom_jax_kernel: {name}: input_output_aliases names argument {position}, "
                    "which is not a tensor parameter"
                )
            self._aliases[params[position]] = int(result)

    def __repr__(self) -> str:
        return f"JaxCallable({self.name})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        call = self._bridge.bind(args, kwargs)
        outs, tree = run(self._bridge, call)
        given = dict(zip(call.names, call.tensors, strict=True))
        writes = [
            (given[arg], self._aliased(arg, given[arg], outs, result))
            for arg, result in self._aliases.items()
            if arg in given
        ]
        with torch.no_grad():  # every alias checked first: a bad one leaves every argument as it was
            for target, out in writes:
                target.copy_(out)
        return jax.tree_util.tree_unflatten(tree, outs)

    def _aliased(self, arg: str, target: torch.Tensor, outs: list[torch.Tensor], result: int) -> torch.Tensor:
        """The result written back into `target`, checked."""
        if not 0 <= result < len(outs):
            raise ValueError(
                f"custom_jax_kernel: {self.name}: input_output_aliases sends result {result} to {arg!r}, "
                f"but the function returns {len(outs)} result(s)"
            )
        out = outs[result]
        if out.shape != target.shape or out.dtype != target.dtype:
            raise ValueError(
                f"custom_jax_kernel: {self.name}: result {result} ({out.dtype}{list(out.shape)}) cannot be written "
                f"into argument {arg!r} ({target.dtype}{list(target.shape)}): an alias needs the same shape and dtype"
            )
        return out


def custom_jax_kernel(
    jax_fn: Callable[..., Any] | None = None,
    name: str | None = None,
    static_argnums: Sequence[int] = (),
    donate_argnums: Sequence[int] | None = None,
    input_output_aliases: dict[int, int] | None = None,
    mesh: Any = None,
    input_partition_specs: Any = None,
    output_partition_specs: Any = None,
    *,
    static_argnames: Sequence[str] = (),
    warn_deprecated: bool = True,
) -> Any:
    """Deprecated in TorchTPU in favour of `jax_op`. `jax_fn` (or, without it, the decorated function) callable on
    torch tensors. `input_output_aliases` writes results back into their arguments (given with `donate_argnums`,
    the two must name the same arguments); donated arguments stay valid."""
    if mesh is not None or input_partition_specs is not None or output_partition_specs is not None:
        raise NotImplementedError("custom_jax_kernel: sharded kernels (mesh, partition specs) are not supported yet")
    if input_output_aliases is not None:
        warnings.warn(
            "custom_jax_kernel: input_output_aliases is deprecated; use donate_argnums",
            DeprecationWarning,
            stacklevel=2,
        )
        if donate_argnums is not None and set(donate_argnums) != set(input_output_aliases):
            raise ValueError("custom_jax_kernel: donate_argnums must be None or the keys of input_output_aliases")
    if warn_deprecated:
        warnings.warn("custom_jax_kernel is deprecated; use torch.tpu.pallas.jax_op", DeprecationWarning, stacklevel=2)

    def wrap(fn: Callable[..., Any]) -> JaxCallable:
        params = list(inspect.signature(fn).parameters)
        static = set(static_argnames) | {params[i] for i in static_argnums}
        return JaxCallable(fn, name or getattr(fn, "__name__", "jax_kernel"), static, input_output_aliases)

    return wrap if jax_fn is None else wrap(jax_fn)
