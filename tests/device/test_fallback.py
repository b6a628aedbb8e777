"""The CPU fallback: ops without a lowering still run correctly, are counted per op, and warn once.

aten::_foobar (a test-only ATen op with only a CPU kernel) will never get a lowering, so it exercises the fallback.
"""

from __future__ import annotations

import warnings

import torch

import torch_tpu


def test_fallback_runs_counts_and_warns_once():
    x = torch.arange(1.0, 6.0)
    torch_tpu.reset_op_counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = torch.ops.aten._foobar(x.to("tpu"))
        b = torch.ops.aten._foobar(x.to("tpu"))
    assert a.device.type == "tpu"
    assert torch.allclose(a.cpu(), torch.ops.aten._foobar(x)) and torch.equal(b.cpu(), a.cpu())
    assert sum(torch_tpu.metrics()["fallback_ops"].values()) == 2
    assert sum("_foobar" in str(w.message) for w in caught) <= 1


def test_fallback_inplace_on_a_view_writes_back():
    base = torch.tensor([3.0, 1.5, 2.5])
    t = base.to("tpu")
    t[1:].digamma_()
    base[1:].digamma_()
    assert torch.allclose(t.cpu(), base)
