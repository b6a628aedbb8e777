"""TorchTPU's bounded dynamism API (torch_tpu._internal.dynamism): mark_dynamic with bounds, get_dynamism_info, and
a sweep over every length inside the bound compiling at most one program per bucket (the largest the bound), equal
to CPU eager. Reading the padded results back is a host-side cut, not a program per length."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torch_tpu._internal.dynamism import get_dynamism_info, mark_dynamic
from torch_tpu.compile import bucketing


def test_mark_dynamic_records_bounds_and_checks_them() -> None:
    t = torch.zeros(2, 10, 4).to("tpu")
    mark_dynamic(t, 1, lower_bound=2, upper_bound=64)
    assert get_dynamism_info(t) == {1: {"lower_bound": 2, "upper_bound": 64}}
    assert get_dynamism_info(torch.zeros(3).to("tpu")) == {}
    with pytest.raises(ValueError, match="outside the bounds"):
        mark_dynamic(torch.zeros(2, 100).to("tpu"), 1, 2, 64)
    with pytest.raises(ValueError, match="lower_bound 9 > upper_bound 4"):
        mark_dynamic(torch.zeros(2, 5).to("tpu"), 1, 9, 4)
    with pytest.raises(IndexError, match="out of range"):
        mark_dynamic(torch.zeros(2, 5).to("tpu"), 3, 1, 8)


def test_buckets_stop_at_the_upper_bound() -> None:
    capped = bucketing._capped(bucketing.bucket_for, 48)
    assert [capped(n) for n in (2, 32, 33, 48)] == [32, 32, 48, 48]
    assert bucketing._capped(bucketing.bucket_for, None)(40) == 64


def test_length_sweep_inside_the_bound(delta) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    tpu_model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to("tpu")
    tpu_model.load_state_dict(model.state_dict())
    compiled = torch.compile(tpu_model, backend="tpu")
    outs, expected = [], []
    delta()
    with torch.no_grad():
        for n in range(2, 49):
            x = torch.randn(1, n, 8)
            xt = x.to("tpu")
            mark_dynamic(xt, 1, 2, 48)
            outs.append(compiled(xt).cpu())
            expected.append(model(x))
    d = delta()
    assert d["compiled_graphs"] == 1, d  # one symbolic trace for every length
    assert d["cache_misses"] <= 2, d  # buckets 32 and 48 (the bound), reads of the padded results included
    assert d["bucketed_calls"] == 45, d  # every length but 32 and 48 ran padded
    for o, e in zip(outs, expected, strict=True):
        torch.testing.assert_close(o, e, rtol=1e-5, atol=1e-5)


def test_a_length_outside_the_bounds_raises() -> None:
    torch._dynamo.reset()
    model = nn.Linear(8, 4)
    tpu_model = nn.Linear(8, 4).to("tpu")
    tpu_model.load_state_dict(model.state_dict())
    compiled = torch.compile(tpu_model, backend="tpu")
    with torch.no_grad():
        for n, marked in ((5, True), (12, True), (20, True), (7, False)):  # an unmarked input inside the bound too
            x = torch.randn(2, n, 8)
            xt = x.to("tpu")
            if marked:
                mark_dynamic(xt, 1, lower_bound=4, upper_bound=20)
            torch.testing.assert_close(compiled(xt).cpu(), model(x), rtol=1e-5, atol=1e-5)
        for n in (30, 3):
            with pytest.raises(Exception, match=rf"dim 1 of .* has length {n}, outside the bounds \[4, 20\]"):
                compiled(torch.randn(2, n, 8).to("tpu"))
    torch._dynamo.reset()  # frame ids are reused by new functions, whose first graphs start fresh
    fresh = torch.compile(lambda t: t * 2, backend="tpu")
    assert fresh(torch.ones(2, 30, 8).to("tpu")).shape == (2, 30, 8)
    assert fresh(torch.ones(2, 31, 8).to("tpu")).shape == (2, 31, 8)
