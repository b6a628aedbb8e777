"""The CPU fallback: ops without a lowering still run correctly, are counted per op, and warn once.

Bessel and digamma functions have no lowering (and are unlikely to get one soon), so they exercise the fallback.
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
        a = torch.special.bessel_j0(x.to("tpu"))
        b = torch.special.bessel_j0(x.to("tpu"))
    assert a.device.type == "tpu"
    assert torch.allclose(a.cpu(), torch.special.bessel_j0(x)) and torch.equal(b.cpu(), a.cpu())
    assert sum(torch_tpu.metrics()["fallback_ops"].values()) == 2
    assert sum("bessel_j0" in str(w.message) for w in caught) <= 1


def test_fallback_inplace_on_a_view_writes_back():
    base = torch.tensor([3.0, 1.5, 2.5])
    t = base.to("tpu")
    t[1:].digamma_()
    base[1:].digamma_()
    assert torch.allclose(t.cpu(), base)
