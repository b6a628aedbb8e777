"""TorchTPU's custom ops, served as `torch.tpu.ops` (the names of `__all__`).

What runs here: max pooling and its gradient, ragged (grouped) matmul and its weight gradient, the jagged-tensor
padding helpers, `splash_sdpa` and `sparse_gather[_backward]` are reference implementations in torch ops; the
collectives and point-to-point ops go through torch.distributed (`tpu_dist` for tpu tensors);
`optimization_barrier` is an identity (no XLA barrier is emitted); the other SparseCore ops raise RuntimeError,
as no SparseCore is available. Each module's docstring says how its ops differ from TorchTPU's.
"""

from __future__ import annotations

from torch_tpu._internal.ops.collectives import all_gather_dim, reduce_scatter_dim
from torch_tpu._internal.ops.jagged import align_jagged_to_multiple, strip_jagged_padding
from torch_tpu._internal.ops.ops import (
    max_pool1d,
    max_pool1d_backward,
    max_pool2d,
    max_pool2d_backward,
    max_pool3d,
    max_pool3d_backward,
    optimization_barrier,
    ragged_all_to_all,
    ragged_dot,
    ragged_dot_weight_grad,
    recv,
    send,
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
from torch_tpu._internal.ops.splash_attention import splash_sdpa

__all__ = [
    "align_jagged_to_multiple",
    "all_gather_dim",
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
    "reduce_scatter_dim",
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
    "splash_sdpa",
    "strip_jagged_padding",
]
