"""The CPU fallback: ops without a lowering still run correctly, are counted per op, and warn once."""

from __future__ import annotations

import warnings

import torch

import torch_tpu


def test_fallback_runs_counts_and_warns_once():
    x = torch.arange(1.0, 6.0)
    torch_tpu.reset_op_counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = x.to("tpu").cumprod(0)
        b = x.to("tpu").cumprod(0)
    assert torch.equal(a.cpu(), x.cumprod(0)) and torch.equal(b.cpu(), a.cpu())
    assert a.device.type == "tpu"
    assert (
        torch_tpu.metrics()["fallback_ops"].get("aten::cumprod.out", 0)
        + torch_tpu.metrics()["fallback_ops"].get("aten::cumprod", 0)
        == 2
    )
    # TORCH_WARN_ONCE semantics: the op's warning is issued at most once per process.
    assert sum("cumprod" in str(w.message) for w in caught) <= 1


def test_fallback_inplace_writes_back():
    t = torch.tensor([3.0, 1.0, 2.0], device="tpu")
    view = t[1:]
    view.exp2_()
    assert torch.allclose(t.cpu(), torch.tensor([3.0, 2.0, 4.0]))
