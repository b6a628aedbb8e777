"""Grouped (ragged) matrix products, as used by Mixture-of-Experts layers: TorchTPU's `torch.tpu.ops.ragged_dot`
and `torch.tpu.ops.ragged_dot_weight_grad`.

The rows of `lhs` form `g` consecutive groups whose sizes `group_sizes` holds; group `i` is multiplied by `rhs[i]`.
On tpu tensors with JAX importable, both run `jax.lax.ragged_dot` as a `jax_op` kernel (`jax_kernels.py`), whose
lowering the JAX platform picks (a grouped kernel on a TPU). Otherwise these reference implementations in plain torch
ops run: the row-to-group membership is computed on the device from `group_sizes` (no host read, so nothing waits in
the fused eager mode), and the grouped product is one dense matmul of the rows spread over the `g` groups against
`rhs` viewed as `(g*k, n)` (`g` times the FLOPs of a grouped kernel, as JAX's own CPU lowering does). Rows past
`sum(group_sizes)` belong to no group: their result rows are zero, and they add nothing to the weight gradient.
"""

from __future__ import annotations

import torch

from torch_tpu._internal.ops import jax_kernels

__all__ = ["ragged_dot", "ragged_dot_weight_grad"]


def _check_group_sizes(group_sizes: torch.Tensor) -> None:
    if group_sizes.dim() != 1:
        raise ValueError(f"group_sizes must be 1D, got shape {tuple(group_sizes.shape)}")
    if group_sizes.dtype.is_floating_point or group_sizes.dtype.is_complex or group_sizes.dtype == torch.bool:
        raise TypeError(f"group_sizes must have an integer dtype, got {group_sizes.dtype}")


def _membership(group_sizes: torch.Tensor, rows: int, dtype: torch.dtype) -> torch.Tensor:
    """(rows, g) matrix: 1 where row r lies in group i, else 0 (`group_sizes` checked by the caller)."""
    ends = torch.cumsum(group_sizes.to(torch.int64), 0)
    starts = ends - group_sizes.to(torch.int64)
    r = torch.arange(rows, device=group_sizes.device, dtype=torch.int64).unsqueeze(1)
    return ((r >= starts.unsqueeze(0)) & (r < ends.unsqueeze(0))).to(dtype)


def _spread(lhs: torch.Tensor, member: torch.Tensor) -> torch.Tensor:
    """(m, g*k): row r of `lhs` placed in the k-wide block of its group, zeros elsewhere."""
    m, k = lhs.shape
    return (member.unsqueeze(2) * lhs.unsqueeze(1)).reshape(m, member.shape[1] * k)


def ragged_dot(
    lhs: torch.Tensor,
    rhs: torch.Tensor,
    group_sizes: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """`(m, n)` result whose rows of group `i` are `lhs[rows of i] @ rhs[i]`; `lhs` is `(m, k)`, `rhs` is
    `(g, k, n)`, `group_sizes` is `(g,)`. Differentiable in `lhs` and `rhs` unless `out` is given, in which case the
    result is written into `out` and `out` is returned."""
    if lhs.dim() != 2 or rhs.dim() != 3:
        raise ValueError(f"ragged_dot: lhs must be 2D and rhs 3D, got {tuple(lhs.shape)} and {tuple(rhs.shape)}")
    g, k, n = rhs.shape
    if lhs.shape[1] != k:
        raise ValueError(f"ragged_dot: lhs has {lhs.shape[1]} columns, rhs has {k} rows per group")
    if group_sizes.shape != (g,):
        raise ValueError(f"ragged_dot: group_sizes must have shape ({g},), got {tuple(group_sizes.shape)}")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"ragged_dot: lhs and rhs must have the same dtype, got {lhs.dtype} and {rhs.dtype}")
    _check_group_sizes(group_sizes)
    if jax_kernels.available(lhs, rhs):
        result = jax_kernels.ragged_dot(lhs, rhs, group_sizes)
    else:
        result = _spread(lhs, _membership(group_sizes, lhs.shape[0], lhs.dtype)) @ rhs.reshape(g * k, n)
    if out is None:
        return result
    if out.shape != result.shape:
        raise ValueError(f"ragged_dot: out has shape {tuple(out.shape)}, expected {tuple(result.shape)}")
    with torch.no_grad():
        out.copy_(result)
    return out


def ragged_dot_weight_grad(lhs: torch.Tensor, grad_output: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Gradient of `ragged_dot` with respect to `rhs`: a `(g, k, n)` tensor whose slice `i` is
    `lhs[rows of i].T @ grad_output[rows of i]`."""
    if lhs.dim() != 2 or grad_output.dim() != 2 or lhs.shape[0] != grad_output.shape[0]:
        raise ValueError(
            "ragged_dot_weight_grad: lhs (m, k) and grad_output (m, n) must be 2D with the same rows, got "
            f"{tuple(lhs.shape)} and {tuple(grad_output.shape)}"
        )
    _check_group_sizes(group_sizes)
    if jax_kernels.available(lhs, grad_output):
        return jax_kernels.ragged_dot_weight_grad(lhs, grad_output, group_sizes)
    g = group_sizes.shape[0]
    member = _membership(group_sizes, lhs.shape[0], lhs.dtype)
    k, n = lhs.shape[1], grad_output.shape[1]
    return (_spread(lhs, member).transpose(0, 1) @ grad_output).reshape(g, k, n)
