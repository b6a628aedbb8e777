"""Max pooling without an index tensor, and its input gradient recomputed from the input (TorchTPU's
`torch.tpu.ops.max_pool{1,2,3}d[_backward]`).

Every argument is given explicitly, one entry per spatial dimension, with the meaning it has in
`torch.nn.functional.max_pool{1,2,3}d`. Here the pooled values come from that function (on a tpu tensor its lowering
runs on the device), computed with autograd off: like TorchTPU's op, the forward is not differentiable, and the
gradient is obtained by calling the matching `_backward` function, which locates each window's maximum again by
differentiating the pooling of `input`, so it routes gradients exactly as PyTorch's own max pooling does (the first
maximum of a window receives its gradient when several elements tie).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

__all__ = [
    "max_pool1d",
    "max_pool1d_backward",
    "max_pool2d",
    "max_pool2d_backward",
    "max_pool3d",
    "max_pool3d_backward",
]

_POOL: dict[int, Callable[..., torch.Tensor]] = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


def _ints(what: str, value: Sequence[int], dims: int, op: str) -> list[int]:
    if isinstance(value, int) or len(value) != dims:
        raise ValueError(f"{op}: {what} must be a sequence of {dims} int(s), one per spatial dimension, got {value!r}")
    return [int(v) for v in value]


def _check_input(x: torch.Tensor, dims: int, op: str) -> None:
    if x.dim() not in (dims + 1, dims + 2):
        raise ValueError(f"{op}: expected a {dims + 1}D or {dims + 2}D input, got shape {tuple(x.shape)}")


def _pool(
    dims: int,
    x: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> torch.Tensor:
    op = f"max_pool{dims}d"
    _check_input(x, dims, op)
    return _POOL[dims](
        x,
        _ints("kernel_size", kernel_size, dims, op),
        _ints("stride", stride, dims, op),
        _ints("padding", padding, dims, op),
        _ints("dilation", dilation, dims, op),
        ceil_mode=bool(ceil_mode),
    )


def _forward(dims: int, x: torch.Tensor, *args: object) -> torch.Tensor:
    with torch.no_grad():
        return _pool(dims, x, *args)  # type: ignore[arg-type]


def _backward(dims: int, grad_output: torch.Tensor, x: torch.Tensor, *args: object) -> torch.Tensor:
    with torch.enable_grad():
        leaf = x.detach().requires_grad_(True)
        pooled = _pool(dims, leaf, *args)  # type: ignore[arg-type]
        if pooled.shape != grad_output.shape:
            raise ValueError(
                f"max_pool{dims}d_backward: grad_output has shape {tuple(grad_output.shape)}, the pooling of input "
                f"has shape {tuple(pooled.shape)}"
            )
        (grad_input,) = torch.autograd.grad(pooled, leaf, grad_output)
    return grad_input


def max_pool1d(
    input: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> torch.Tensor:
    """1D max pooling of an `(N, C, L)` or `(C, L)` tensor; not differentiable (see `max_pool1d_backward`)."""
    return _forward(1, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(
    input: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> torch.Tensor:
    """2D max pooling of an `(N, C, H, W)` or `(C, H, W)` tensor; not differentiable (see `max_pool2d_backward`)."""
    return _forward(2, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d(
    input: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> torch.Tensor:
    """3D max pooling of an `(N, C, D, H, W)` or `(C, D, H, W)` tensor; not differentiable (see
    `max_pool3d_backward`)."""
    return _forward(3, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool1d_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> torch.Tensor:
    """Gradient of `max_pool1d` with respect to `input` (same shape as `input`), given the output's gradient and the
    arguments the forward was called with."""
    return _backward(1, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> torch.Tensor:
    """Gradient of `max_pool2d` with respect to `input`; see `max_pool1d_backward`."""
    return _backward(2, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> torch.Tensor:
    """Gradient of `max_pool3d` with respect to `input`; see `max_pool1d_backward`."""
    return _backward(3, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode)
