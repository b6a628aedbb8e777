"""TorchTPU's `torch_tpu._internal.dynamism`: bounded dynamic dims for torch.compile.

`mark_dynamic(t, dim, lower_bound, upper_bound)` marks dims of an input as dynamic within bounds (Dynamo's
`mark_dynamic` with min/max): a compiled graph is traced once with a symbolic size, and where padding is provably
safe (compile/bucketing.py) each length runs padded to a bucket, the largest bucket being the upper bound, so a
sweep over every length inside the bound compiles at most one program per bucket. A length outside the bounds
raises ValueError (`compile/bounds.py`) instead of tracing the graph again. `get_dynamism_info(t)` says what is
marked.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["get_dynamism_info", "mark_dynamic"]


def mark_dynamic(
    t: torch.Tensor, dim: int | Sequence[int], lower_bound: int | None = None, upper_bound: int | None = None
) -> None:
    """Marks `dim` (one or several) of `t` dynamic, between `lower_bound` and `upper_bound` inclusive."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mark_dynamic: expected a tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"mark_dynamic: dim {d} out of range for a {t.dim()}-d tensor")
        size = t.shape[d]
        if lower_bound is not None and upper_bound is not None and lower_bound > upper_bound:
            raise ValueError(f"mark_dynamic: lower_bound {lower_bound} > upper_bound {upper_bound}")
        if (lower_bound is not None and size < lower_bound) or (upper_bound is not None and size > upper_bound):
            raise ValueError(
                f"mark_dynamic: dim {d} has size {size}, outside the bounds [{lower_bound}, {upper_bound}]"
            )
    torch._dynamo.mark_dynamic(t, [d % t.dim() for d in dims], min=lower_bound, max=upper_bound)


def get_dynamism_info(t: torch.Tensor) -> dict[int, dict[str, int | None]]:
    """The dims of `t` marked dynamic, each with its bounds (None where unbounded)."""
    marked = getattr(t, "_dynamo_dynamic_indices", set())
    ranges = {r.dim: r for r in getattr(t, "_dynamo_dynamic_range", set())}
    return {
        d: {
            "lower_bound": getattr(ranges.get(d), "min", None),
            "upper_bound": getattr(ranges.get(d), "max", None),
        }
        for d in sorted(marked)
    }
