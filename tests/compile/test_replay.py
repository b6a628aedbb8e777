"""Compiled graphs rerun from their capture (torch_tpu/compile/replay.py, csrc/exec/replay.h): every replayed
result equals CPU eager on the call's own inputs, inputs that differ from the capture are never replayed, calls a
replay cannot repeat (random draws) are never captured, device checks still fire, nothing leaks."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import torch_tpu
from torch_tpu.compile.replay import Replayed


def _pointwise(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = a * b + 1
    return s.t(), s.sum(0)


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_replay_reads_each_calls_inputs(mode: str, delta) -> None:
    graph = Replayed(_pointwise)
    with torch_tpu.eager_mode(mode):
        for i in range(6):
            a, b = torch.randn(5, 3), torch.randn(5, 3)
            got = graph([a.to("tpu"), b.to("tpu")])
            for g, e in zip(got, _pointwise(a, b), strict=True):
                torch.testing.assert_close(g.cpu(), e)
            assert got[0].shape == (3, 5) and got[0].stride() == (1, 3)
            if i == 1:
                delta()
    d = delta()
    assert d["replayed_calls"] == 4 and d["graph_replays"] == 4 and d["graph_nodes"] == 0
    assert d["compiles"] == 0 and len(graph.captures) == 1


def test_inputs_unlike_the_capture_are_not_replayed(delta) -> None:
    graph = Replayed(_pointwise)
    a, b = torch.randn(5, 3), torch.randn(5, 3)
    at, bt = a.to("tpu"), b.to("tpu")
    for _ in range(3):
        graph([at, bt])
    assert len(graph.captures) == 1
    delta()
    # same shape, other strides (a transposed view); one storage for both inputs; another dtype
    wide = torch.randn(3, 5)
    cases = [
        (wide.t(), b),
        (a, a),
        (a.double(), b.double()),
    ]
    for x, y in cases:
        got = graph([x.to("tpu") if x is not a else at, y.to("tpu") if y is not a else at])
        for g, e in zip(got, _pointwise(x, y), strict=True):
            torch.testing.assert_close(g.cpu(), e)
    d = delta()
    assert d["replayed_calls"] == 0
    # and the original signature still replays
    torch.testing.assert_close(graph([at, bt])[1].cpu(), _pointwise(a, b)[1])
    assert delta()["replayed_calls"] == 1


def _bump(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor]:
    x.add_(y)
    return (x * 2,)


def test_replay_updates_inputs_in_place(delta) -> None:
    graph = Replayed(_bump)
    x, y = torch.zeros(4), torch.arange(4.0)
    xt, yt = x.to("tpu"), y.to("tpu")
    for _ in range(5):
        version = xt._version
        (got,) = graph([xt, yt])
        (expected,) = _bump(x, y)
        torch.testing.assert_close(got.cpu(), expected)
        torch.testing.assert_close(xt.cpu(), x)
        assert xt._version > version
    assert len(graph.captures) == 1
    assert delta()["replayed_calls"] == 5 - 1 - graph.failed  # the first call may be refused (new op structures)


def test_random_calls_are_never_captured(delta) -> None:
    torch.manual_seed(0)
    drop = torch.compile(nn.Dropout(0.5), backend="tpu")
    x = torch.ones(64, device="tpu")
    masks = [drop(x).cpu() for _ in range(5)]
    assert all(not torch.equal(masks[0], m) for m in masks[1:])
    d = delta()
    assert d["replayed_calls"] == 0 and d["captured_graphs"] == 0


def test_replayed_gather_still_checks_indices(delta) -> None:
    graph = Replayed(lambda x, i: (x[i] * 2,))
    x = torch.arange(6.0, device="tpu")
    for _ in range(3):
        graph([x, torch.tensor([0, 5], device="tpu")])
    assert len(graph.captures) == 1
    with pytest.raises(IndexError):
        graph([x, torch.tensor([0, 9], device="tpu")])[0].cpu()
    assert delta()["replayed_calls"] >= 1


def test_replays_do_not_leak(delta) -> None:
    graph = Replayed(_pointwise)
    a, b = torch.randn(5, 3, device="tpu"), torch.randn(5, 3, device="tpu")
    for _ in range(3):
        graph([a, b])
    torch.tpu.synchronize()
    delta()
    before = torch_tpu.metrics()["live_buffers"]
    for _ in range(20):
        graph([a, b])
    torch.tpu.synchronize()
    assert torch_tpu.metrics()["live_buffers"] == before
    assert delta()["replayed_calls"] == 20


def test_compiled_model_replays_match_cpu(delta) -> None:
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.LayerNorm(12), nn.Linear(12, 2))
    tpu = torch.compile(copy.deepcopy(cpu).to("tpu"), backend="tpu")
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(7, 6)
            torch.testing.assert_close(tpu(x.to("tpu")).cpu(), cpu(x), rtol=1e-5, atol=1e-6)
    assert delta()["replayed_calls"] >= 3
