"""Padding helpers for `torch.jagged` nested tensors (TorchTPU's `torch.tpu.ops.align_jagged_to_multiple` and
`strip_jagged_padding`).

A jagged tensor keeps its sequences in one flat `values()` buffer indexed by `offsets()`. Padding that buffer with
trailing rows up to a multiple of a tile size keeps shapes in a few buckets (fewer compilations) and lets dense
layers run over whole tiles; the offsets are untouched, so the padding rows belong to no sequence. Stripping takes
the rows back off before anything that must see only real tokens.
"""

from __future__ import annotations

import torch
from torch.nested._internal.nested_tensor import nested_view_from_values_offsets

__all__ = ["align_jagged_to_multiple", "strip_jagged_padding"]


def _check_jagged(nt: torch.Tensor, op: str) -> None:
    if not getattr(nt, "is_nested", False) or nt.layout != torch.jagged:
        raise TypeError(f"{op}: expected a torch.jagged nested tensor, got {type(nt).__name__} with layout {nt.layout}")


def align_jagged_to_multiple(
    nt: torch.Tensor,
    multiple: int = 128,
    padding_value: float | int | bool = 0.0,
) -> torch.Tensor:
    """`nt` with its values buffer padded by rows of `padding_value` to a length that is a multiple of `multiple`;
    the offsets (and so every sequence) are unchanged. Returns `nt` itself when no padding is needed."""
    _check_jagged(nt, "align_jagged_to_multiple")
    if multiple <= 0:
        raise ValueError(f"align_jagged_to_multiple: multiple must be positive, got {multiple}")
    values = nt.values()
    short = -values.shape[0] % multiple
    if short == 0:
        return nt
    fill = torch.full((short, *values.shape[1:]), padding_value, dtype=values.dtype, device=values.device)
    return nested_view_from_values_offsets(torch.cat([values, fill]), nt.offsets())


def strip_jagged_padding(nt: torch.Tensor, valid_tokens: int | None = None) -> torch.Tensor:
    """`nt` with the values rows past the last sequence removed (a view). `valid_tokens`, when the caller knows it,
    is that row count; otherwise it is read from `offsets()[-1]`, a device-to-host read. Returns `nt` itself when
    there is nothing to strip."""
    _check_jagged(nt, "strip_jagged_padding")
    offsets = nt.offsets()
    if valid_tokens is None:
        valid_tokens = int(offsets[-1].item()) if offsets.numel() else 0
    values = nt.values()
    if not 0 <= valid_tokens <= values.shape[0]:
        raise ValueError(f"strip_jagged_padding: valid_tokens {valid_tokens} is outside [0, {values.shape[0]}]")
    if valid_tokens == values.shape[0]:
        return nt
    return nested_view_from_values_offsets(values[:valid_tokens], offsets)
