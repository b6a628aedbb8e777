"""The names TorchTPU keeps in `torch_tpu._internal.ops.ops` (pooling, ragged products, point-to-point, ragged
all-to-all, SparseCore ops), gathered here from the modules that implement them, plus `optimization_barrier`."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_tpu._internal.ops.collectives import recv, send
from torch_tpu._internal.ops.pooling import (
    max_pool1d,
    max_pool1d_backward,
    max_pool2d,
    max_pool2d_backward,
    max_pool3d,
    max_pool3d_backward,
)
from torch_tpu._internal.ops.ragged import ragged_dot, ragged_dot_weight_grad
from torch_tpu._internal.ops.ragged_all_to_all import ragged_all_to_all
from torch_tpu._internal.ops.sparse_core import (
    sparse_dense_matmul,
    sparse_dense_matmul_activation_unstack,
    sparse_dense_matmul_grad_with_adagrad,
    sparse_dense_matmul_grad_with_adam,
    sparse_dense_matmul_grad_with_sgd,
    sparse_dense_matmul_gradient_stack,
    sparse_gather,
    sparse_gather_backward,
    sparse_iota,
    sparse_map_row,
)

__all__ = [
    "max_pool1d",
    "max_pool1d_backward",
    "max_pool2d",
    "max_pool2d_backward",
    "max_pool3d",
    "max_pool3d_backward",
    "optimization_barrier",
    "ragged_all_to_all",
    "ragged_dot",
    "ragged_dot_weight_grad",
    "recv",
    "send",
    "sparse_dense_matmul",
    "sparse_dense_matmul_activation_unstack",
    "sparse_dense_matmul_grad_with_adagrad",
    "sparse_dense_matmul_grad_with_adam",
    "sparse_dense_matmul_grad_with_sgd",
    "sparse_dense_matmul_gradient_stack",
    "sparse_gather",
    "sparse_gather_backward",
    "sparse_iota",
    "sparse_map_row",
]


def optimization_barrier(inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors of `inputs`, in order, as a new list of aliases (same values, shape, dtype and strides; gradients
    pass straight through).

    In TorchTPU this lowers to `stablehlo.optimization_barrier`, which changes no value and only stops XLA from
    moving, fusing or deduplicating computation across it. torch_tpu does not emit that op, so here the barrier is
    an identity: programs compute the same values, but XLA may schedule or fuse across the point where it stands.
    Like TorchTPU's, it takes a sequence and returns a list, so `a, b = optimization_barrier([a, b])` works alike.
    """
    if isinstance(inputs, torch.Tensor):
        raise TypeError("optimization_barrier: inputs must be a sequence of tensors (wrap a single tensor in a list)")
    tensors = list(inputs)
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"optimization_barrier: inputs[{i}] is {type(t).__name__}, not a tensor")
    return [t.view_as(t) for t in tensors]
