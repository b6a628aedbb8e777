"""Compiled graphs rerun from their capture (torch_tpu/compile/replay.py, csrc/exec/replay.h): every replayed
result equals CPU eager on the call's own inputs, inputs that differ from the capture are never replayed, calls a
replay cannot repeat (random draws) are never captured, device checks still fire, nothing leaks."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.utils._python_dispatch
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
    d = delta()
    # Each call is replayed, captured (once) or refused (a call that lowers new op structures, at most the first).
    assert d["refused_captures"] <= 1
    assert d["replayed_calls"] == 5 - 1 - d["refused_captures"]
    # A replay donates x's old buffer to its new contents (nothing else holds it), as the fused engine does.
    assert d["donations"] >= d["replayed_calls"]


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


class _TinyLM(nn.Module):
    """Tied embedding/output weights, pre-norm causal attention (SDPA) and an MLP: the GPT shape."""

    def __init__(self, vocab: int = 40, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        # no qkv bias: the key bias's gradient is zero up to rounding, which AdamW would blow up to full steps
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx)
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_tied_gpt_training_replays_and_matches_cpu(mode: str, delta) -> None:
    torch.manual_seed(0)
    cpu = _TinyLM()
    tpu = copy.deepcopy(cpu).to("tpu")
    assert tpu.head.weight is tpu.tok.weight
    compiled = torch.compile(tpu, backend="tpu")
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_t = torch.optim.AdamW(tpu.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(3)
    with torch_tpu.eager_mode(mode):
        for _ in range(5):
            idx = torch.randint(0, 40, (3, 9), generator=g)
            losses = []
            for model, opt, x in ((cpu, opt_c, idx), (compiled, opt_t, idx.to("tpu"))):
                opt.zero_grad()
                out = model(x)
                loss = torch.nn.functional.cross_entropy(out[:, :-1].reshape(-1, 40), x[:, 1:].reshape(-1))
                loss.backward()
                opt.step()
                losses.append(loss.item())
            assert abs(losses[0] - losses[1]) < 1e-4
    for p, q in zip(cpu.parameters(), tpu.parameters(), strict=True):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)
    assert tpu.head.weight is tpu.tok.weight
    d = delta()
    assert d["replayed_calls"] >= 6 and d["refused_captures"] <= 2 and d["fallbacks"] == 0


def test_dynamic_lengths_replay_per_length(delta) -> None:
    """Under dynamic shapes the length is a graph input: each length gets its own capture, and a replay never runs
    one length's program on another's inputs. (The sum over the dynamic dim keeps the graph unpadded; padded graphs
    pad through the host and are never captured.)"""

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * 2 + x.sum(-1, keepdim=True)).cumsum(-1)

    compiled = torch.compile(f, backend="tpu")
    lengths = [4, 7, 4, 7, 4, 7, 12, 4, 12, 12]
    for n in lengths:
        x = torch.randn(3, n)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 1)
        torch.testing.assert_close(compiled(xt).cpu(), f(x), rtol=1e-5, atol=1e-6)
    d = delta()
    assert d["compiled_graphs"] == 1 and d["bucketed_calls"] == 0
    # 4 and 7 may be refused once each (their first call lowers new op structures)
    assert d["captured_graphs"] == 3 and d["replayed_calls"] + d["refused_captures"] == len(lengths) - 3
    assert d["replayed_calls"] >= 4


class _CacheStep(nn.Module):
    """A decoding step with a static KV cache (a buffer updated in place at a position given as a tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(1, 16, 8))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        k = self.proj(x)
        self.cache.index_copy_(1, pos, k)
        att = torch.softmax(self.cache @ k.transpose(1, 2), dim=1)
        return (att * self.cache).sum(1)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_static_cache_updates_replay_in_place(mode: str, delta) -> None:
    torch.manual_seed(0)
    cpu = _CacheStep()
    tpu = copy.deepcopy(cpu).to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    with torch.no_grad(), torch_tpu.eager_mode(mode):
        for i in range(10):
            x, pos = torch.randn(1, 1, 8), torch.tensor([i])
            torch.testing.assert_close(compiled(x.to("tpu"), pos.to("tpu")).cpu(), cpu(x, pos), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(tpu.cache.cpu(), cpu.cache)
    d = delta()
    assert d["replayed_calls"] >= 8 and d["fallbacks"] == 0
    # The cache is updated in place: each replay donates its buffer instead of copying it.
    assert d["donations"] >= d["replayed_calls"]


class _RecordingMode(torch.utils._python_dispatch.TorchDispatchMode):
    """Sees every op dispatched while it is active (AOTAutograd runs a compiled graph's first call under one)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def test_engine_reads_cpu_scalars_without_dispatching() -> None:
    """A pending result of an op with a Python number (img / 255.0), run under a Python dispatch mode: the engine
    reads the number from memory. An `.item()` would reach the mode with a Python int and fail in AOTAutograd's."""
    with torch_tpu.eager_mode("fused"):
        x = torch.ones(7, 5, device="tpu")
        x.cpu()
        y = x / 255.0 + 3
        mode = _RecordingMode()
        with mode:
            torch_tpu.flush()
        assert not [f for f in mode.seen if "_local_scalar_dense" in f or "item" in f], mode.seen
        torch.testing.assert_close(y.cpu(), torch.ones(7, 5) / 255.0 + 3)


def test_compiled_graph_called_on_pending_scaled_input() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    cpu = copy.deepcopy(model)
    tpu = model.to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    img = torch.randint(0, 255, (2, 3, 8, 8)).float()
    for train in (True, False, False):
        tpu.train(train)
        cpu.train(train)
        got = compiled(img.to("tpu") / 255.0)
        torch.testing.assert_close(got.cpu(), cpu(img / 255.0), rtol=1e-4, atol=1e-5)
