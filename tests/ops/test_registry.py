"""The op registry (csrc/backend/registry.cpp): every name a lowering row lists is an overload PyTorch has (a
misspelled one would silently fall back to the CPU), and the in-place/out= overloads derived from the schemas
compute what CPU computes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import torch_tpu
from torch_tpu import _C

A = torch.ops.aten


def test_every_row_name_is_a_pytorch_overload() -> None:
    assert _C._unknown_row_names() == []


def test_derived_overloads_are_registered() -> None:
    derived = {name for name, from_schema in _C._lowered_ops() if from_schema}
    assert {"sum.out", "relu.out", "mul.Scalar_out", "masked_fill.Scalar_out"} <= derived


# Derived overloads, each called through torch.ops on CPU and on tpu.
DERIVED: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {
    "sum.out": lambda x, o: A.sum.out(x, out=o.view(-1)[:1].view([])),
    "prod.out": lambda x, o: A.prod.out(x, out=o.view(-1)[:1].view([])),
    "relu.out": lambda x, o: A.relu.out(x, out=o),
    "mul.Scalar_out": lambda x, o: A.mul.Scalar_out(x, 3.0, out=o),
    "sub.Scalar_out": lambda x, o: A.sub.Scalar_out(x, 0.5, out=o),
    "masked_fill.Scalar_out": lambda x, o: A.masked_fill.Scalar_out(x, x > 0, 5.0, out=o),
    "fill.Scalar_out": lambda x, o: A.fill.Scalar_out(x, 3.0, out=o),
    "clamp_min.Tensor_out": lambda x, o: A.clamp_min.Tensor_out(x, x * 0.1, out=o),
    "var_mean.correction_out": lambda x, o: A.var_mean.correction_out(
        x, [1], correction=1, keepdim=False, out0=o[0], out1=o[1]
    ),
}


@pytest.mark.parametrize("case", sorted(DERIVED))
def test_derived_overload_matches_cpu(case: str) -> None:
    results = []
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        x = torch.randn(3, 4).to(device)
        out = torch.zeros(3, 4, device=device)
        before = torch_tpu.metrics()["lowered_ops"].get(f"aten::{case}", 0)
        DERIVED[case](x, out)
        results.append(out.cpu())
    assert torch_tpu.metrics()["lowered_ops"].get(f"aten::{case}", 0) == before + 1  # lowered, not a fallback
    torch.testing.assert_close(results[1], results[0])
