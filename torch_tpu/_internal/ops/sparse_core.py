"""TorchTPU's SparseCore ops (`torch.tpu.ops.sparse_*`).

SparseCore is a unit of recent TPU chips for embedding lookups over CSR-preprocessed ids. torch_tpu has no lowering
for it, and the XLA-CPU plugin has no such unit, so most of these names exist only to fail clearly: each raises a
RuntimeError naming the op and the plugin's platform. Two have plain-torch meanings that do not depend on the
SparseCore's scheduling, and are implemented: `sparse_gather` (a row gather by `indices`) and
`sparse_gather_backward` (its scatter-add). The rest — the embedding matmul with fused optimizer updates, the
stacking of per-feature activations, the in-row iota and the MLIR row map — depend on SparseCore input layouts and
kernels whose exact semantics the public API does not pin down, so no reference is offered rather than a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import torch

__all__ = [
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


def platform_name() -> str:
    """The PJRT plugin's platform ("cpu" for XLA-CPU), or "unknown" when the runtime cannot say."""
    try:
        from torch_tpu import runtime

        return str(runtime.get().client.platform_name)
    except Exception:  # noqa: BLE001 - only used to word an error message
        return "unknown"


def _unavailable(name: str) -> NoReturn:
    raise RuntimeError(
        f"{name} needs a TPU SparseCore, not available on this platform ({platform_name()}): torch_tpu has no "
        "SparseCore lowering"
    )


def sparse_dense_matmul(
    row_pointers: torch.Tensor,
    embedding_ids: torch.Tensor,
    sample_ids: torch.Tensor,
    gains: torch.Tensor,
    embedding_table: torch.Tensor,
    device_batch_size: int,
    max_ids_per_partition: int,
    max_unique_ids_per_partition: int,
) -> torch.Tensor:
    """SparseCore embedding lookup-and-combine; raises RuntimeError here (no SparseCore)."""
    _unavailable("sparse_dense_matmul")


def sparse_dense_matmul_grad_with_sgd(
    row_pointers: torch.Tensor,
    embedding_ids: torch.Tensor,
    sample_ids: torch.Tensor,
    gains: torch.Tensor,
    embedding_table: torch.Tensor,
    activations_grad: torch.Tensor,
    learning_rate: torch.Tensor,
    device_batch_size: int,
    max_ids_per_partition: int,
    max_unique_ids_per_partition: int,
    computation_name: str,
) -> torch.Tensor:
    """SparseCore embedding backward with an SGD update; raises RuntimeError here (no SparseCore)."""
    _unavailable("sparse_dense_matmul_grad_with_sgd")


def sparse_dense_matmul_grad_with_adagrad(
    row_pointers: torch.Tensor,
    embedding_ids: torch.Tensor,
    sample_ids: torch.Tensor,
    gains: torch.Tensor,
    embedding_table: torch.Tensor,
    accumulator: torch.Tensor,
    activations_grad: torch.Tensor,
    learning_rate: torch.Tensor,
    epsilon: float,
    device_batch_size: int,
    max_ids_per_partition: int,
    max_unique_ids_per_partition: int,
    computation_name: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SparseCore embedding backward with an Adagrad update; raises RuntimeError here (no SparseCore)."""
    _unavailable("sparse_dense_matmul_grad_with_adagrad")


def sparse_dense_matmul_grad_with_adam(
    row_pointers: torch.Tensor,
    embedding_ids: torch.Tensor,
    sample_ids: torch.Tensor,
    gains: torch.Tensor,
    embedding_table: torch.Tensor,
    momentum: torch.Tensor,
    velocity: torch.Tensor,
    activations_grad: torch.Tensor,
    alpha_t: torch.Tensor,
    beta_1: float,
    beta_2: float,
    epsilon: float,
    device_batch_size: int,
    max_ids_per_partition: int,
    max_unique_ids_per_partition: int,
    computation_name: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """SparseCore embedding backward with an Adam update; raises RuntimeError here (no SparseCore)."""
    _unavailable("sparse_dense_matmul_grad_with_adam")


def sparse_dense_matmul_activation_unstack(
    stacked_activations: torch.Tensor,
    per_feature_batch_sizes: Sequence[int],
    per_feature_dims: Sequence[int],
) -> list[torch.Tensor]:
    """Splits SparseCore-stacked activations per feature; raises RuntimeError here (no SparseCore layout)."""
    _unavailable("sparse_dense_matmul_activation_unstack")


def sparse_dense_matmul_gradient_stack(
    unstacked_gradients: Sequence[torch.Tensor],
    stacked_batch_size: int,
    stacked_feature_dim: int,
) -> torch.Tensor:
    """Stacks per-feature gradients in the SparseCore layout; raises RuntimeError here (no SparseCore layout)."""
    _unavailable("sparse_dense_matmul_gradient_stack")


def sparse_gather(
    row_pointers: torch.Tensor,
    indices: torch.Tensor,
    operand: torch.Tensor,
    max_non_zeroes_per_row: int,
) -> torch.Tensor:
    """Rows of the 2D `operand` picked by the 1D `indices`: `operand[indices]`, one output row per index.

    `indices` holds `max_non_zeroes_per_row` slots for each of the `len(row_pointers)` CSR rows, as TorchTPU
    requires; every slot is gathered (the backward, `sparse_gather_backward`, sees only `indices`, so padded slots
    are gathered and scattered alike). Differentiable in `operand`; indices out of range raise, as in index_select.
    """
    if row_pointers.dim() != 1 or indices.dim() != 1 or operand.dim() != 2:
        raise ValueError(
            "sparse_gather: row_pointers and indices must be 1D and operand 2D, got "
            f"{tuple(row_pointers.shape)}, {tuple(indices.shape)} and {tuple(operand.shape)}"
        )
    expected = row_pointers.shape[0] * int(max_non_zeroes_per_row)
    if indices.shape[0] != expected:
        raise ValueError(
            f"sparse_gather: indices must have len(row_pointers) * max_non_zeroes_per_row = {expected} entries, "
            f"got {indices.shape[0]}"
        )
    return operand.index_select(0, indices.to(torch.int64))


def sparse_gather_backward(
    grad_output: torch.Tensor, indices: torch.Tensor, grad_operand: torch.Tensor
) -> torch.Tensor:
    """Gradient of `sparse_gather` for its operand: `grad_operand` plus `grad_output`'s rows added at `indices`
    (repeated indices accumulate). Returns a new tensor; `grad_operand` is not modified."""
    if grad_output.dim() != 2 or indices.dim() != 1 or grad_operand.dim() != 2:
        raise ValueError("sparse_gather_backward: grad_output and grad_operand must be 2D, indices 1D")
    if grad_output.shape[0] != indices.shape[0]:
        raise ValueError(f"sparse_gather_backward: {grad_output.shape[0]} gradient rows for {indices.shape[0]} indices")
    return grad_operand.index_add(0, indices.to(torch.int64), grad_output.to(grad_operand.dtype))


def sparse_iota(row_pointers: torch.Tensor, max_non_zeroes: int, max_non_zeroes_per_row: int) -> torch.Tensor:
    """Positions of the non-zeroes within their CSR rows, as the SparseCore lays them out; raises RuntimeError
    here (no SparseCore)."""
    _unavailable("sparse_iota")


def sparse_map_row(
    csr_tensors: Sequence[torch.Tensor],
    csr_lengths: Sequence[int],
    dense_args: Sequence[torch.Tensor],
    body_mlir: str,
    dummy_outputs: Sequence[torch.Tensor],
    max_non_zeroes_per_row: int,
    pad_value: int,
    max_pad_per_row: int,
    wait_threshold: float,
    result_row_pointer_op_index: int,
) -> list[torch.Tensor]:
    """Runs an MLIR row computation over CSR matrices on the SparseCore; raises RuntimeError here (no SparseCore)."""
    _unavailable("sparse_map_row")
