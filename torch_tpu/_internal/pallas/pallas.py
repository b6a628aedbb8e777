"""TorchTPU's `torch.tpu.pallas.jax_op`; raises NotImplementedError until issue 31."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from torch_tpu._internal.pallas._missing import not_yet

__all__ = ["jax_op"]


def jax_op(
    name: str,
    fn: Callable[..., Any] | None = None,
    /,
    *,
    donate_argnums: Sequence[int] | None = None,
    mesh: Any = None,
    input_partition_specs: tuple[tuple[str, ...], ...] | None = None,
    output_partition_specs: tuple[tuple[str, ...], ...] | None = None,
) -> NoReturn:
    """In TorchTPU, registers the JAX function `fn` (or, used as `@jax_op("ns::name")`, the decorated one) as the
    torch custom op `name`. Here it raises NotImplementedError, in both forms, at the call."""
    not_yet("jax_op")
