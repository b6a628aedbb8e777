"""TorchTPU's deprecated `custom_jax_kernel`: a JAX function called directly on torch tensors (no custom op, so no
autograd and no torch.compile graph of its own; `jax_op` has both). Static arguments are named by position or
name; every other argument is a tensor. Results come back in the JAX function's own structure."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from torch_tpu._internal.pallas._bridge import Bridge, run

__all__ = ["JaxCallable", "custom_jax_kernel"]


class JaxCallable:
    def __init__(self, fn: Callable[..., Any], name: str, static: set[str]) -> None:
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise TypeError(f"custom_jax_kernel: {name} takes *{p.name}; name its parameters")
        self.name = name
        self._bridge = Bridge(name, fn, sig, [n for n in sig.parameters if n not in static])

    def __repr__(self) -> str:
        return f"JaxCallable({self.name})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        outs, tree = run(self._bridge, self._bridge.bind(args, kwargs))
        return jax.tree_util.tree_unflatten(tree, outs)


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
    torch tensors; the inputs are never donated or aliased (`donate_argnums`, `input_output_aliases` are accepted)."""
    if mesh is not None or input_partition_specs is not None or output_partition_specs is not None:
        raise NotImplementedError("custom_jax_kernel: sharded kernels (mesh, partition specs) are not supported yet")
    del donate_argnums, input_output_aliases
    if warn_deprecated:
        warnings.warn("custom_jax_kernel is deprecated; use torch.tpu.pallas.jax_op", DeprecationWarning, stacklevel=2)

    def wrap(fn: Callable[..., Any]) -> JaxCallable:
        params = list(inspect.signature(fn).parameters)
        static = set(static_argnames) | {params[i] for i in static_argnums}
        return JaxCallable(fn, name or getattr(fn, "__name__", "jax_kernel"), static)

    return wrap if jax_fn is None else wrap(jax_fn)
