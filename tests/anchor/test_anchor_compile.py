"""TorchTPU's `torch_tpu._internal.compile` on our "tpu" backend: `TpuBackend` and its options (checked, and doing
what `torch_tpu.compile.options` says), the async warm-up round trip, `clear_cache`, and `torch.compile` without a
backend routing tpu graphs to us and CPU graphs to Inductor. Every result is compared with the same function run
eagerly on CPU; what the backend did is read from `torch_tpu.compile.counters`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch._dynamo
from torch import nn

import torch_tpu
from torch_tpu._internal.compile import (
    AsyncCompilationSubmitted,
    TpuBackend,
    TpuCompileDebug,
    async_compile,
    clear_cache,
    resolve_compilations,
)
from torch_tpu.compile import counters


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def delta() -> Callable[[], dict[str, int]]:
    """delta(): the change of the compiled-mode counters since the fixture or the previous delta()."""
    state = {"before": counters.snapshot()}

    def take() -> dict[str, int]:
        now = counters.snapshot()
        out = {k: now[k] - state["before"][k] for k in now}
        state["before"] = now
        return out

    return take


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y).sin() + y.exp() / 2


class TokenMLP(nn.Module):
    """Positions along dim 1 stay independent (per-token layer norm and MLP), so a dynamic length may be padded."""

    def __init__(self) -> None:
        super().__init__()
        self.ln, self.fc = nn.LayerNorm(8), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(self.ln(x)))


def _pair(cls: type[nn.Module]) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    cpu = cls()
    tpu = cls()
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu.to("tpu")


def _graph(fn: Callable[..., Any], *args: torch.Tensor) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The Dynamo graph of fn(*args) and its example inputs, for calling a backend by hand."""
    seen: list[Any] = []

    def grab(gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        seen.extend([gm, list(inputs)])
        return gm.forward

    torch.compile(fn, backend=grab, fullgraph=True)(*args)
    return seen[0], seen[1]


def test_tpu_backend_object_matches_cpu(delta) -> None:
    x, y = torch.randn(5, 7), torch.randn(5, 7)
    backend = TpuBackend()
    compiled = torch.compile(f, backend=backend)
    delta()
    torch.testing.assert_close(compiled(x.to("tpu"), y.to("tpu")).cpu(), f(x, y))
    torch.testing.assert_close(compiled(y.to("tpu"), x.to("tpu")).cpu(), f(y, x))
    d = delta()
    assert d["compiled_graphs"] == 1 and d["aot_forward_graphs"] == 1 and d["compiled_calls"] == 2
    assert backend.num_compiled_executables == 1 and backend.compiled_executables == []  # kept only with debug=True


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_training_with_debug_backend_matches_cpu(mode: str, delta) -> None:
    cpu, tpu = _pair(TokenMLP)
    x = torch.randn(3, 6, 8)
    backend = TpuBackend(debug=True)
    compiled = torch.compile(tpu, backend=backend)
    with torch_tpu.eager_mode(mode):
        out = compiled(x.to("tpu"))
        out.square().sum().backward()
    ref = cpu(x)
    ref.square().sum().backward()
    torch.testing.assert_close(out.cpu(), ref)
    for p, q in zip(tpu.parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)
    d = delta()
    assert d["aot_forward_graphs"] == 1 and d["aot_backward_graphs"] == 1 and d["compiled_backward_calls"] == 1
    assert [a.kind for a in backend.compiled_executables] == ["forward", "backward"]
    debug = backend.last_debug
    assert isinstance(debug, TpuCompileDebug)
    assert len(debug.pre_autograd_fx_code) == 1 and len(debug.post_autograd_fx_backward_code) == 1
    clear_cache()
    assert backend.num_compiled_executables == 0 and backend.compiled_executables == []


def test_options_on_the_string_backend_reach_debug_callback() -> None:
    seen: list[TpuCompileDebug] = []
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    opts = {"debug_callback": seen.append, "custom_module_name": "my model", "serializable": False}
    compiled = torch.compile(f, backend="tpu", options=opts)
    torch.testing.assert_close(compiled(x.to("tpu"), y.to("tpu")).cpu(), f(x, y))
    assert len(seen) == 1
    assert "sin" in seen[0].pre_autograd_fx_code[0] and "aten.sin" in seen[0].post_autograd_fx_forward_code[0]
    assert [a.kind for a in seen[0].compiled_executables] == ["inference"]


def test_serializable_false_leaves_serialize_off() -> None:
    x, y = torch.randn(3, 3).to("tpu"), torch.randn(3, 3).to("tpu")
    gm, inputs = _graph(f, x, y)
    assert callable(TpuBackend()(gm, inputs).serialize)
    assert not hasattr(TpuBackend(enable_serialization=False)(gm, inputs), "serialize")
    assert not hasattr(TpuBackend()(gm, inputs, options={"serializable": False}), "serialize")


@pytest.mark.parametrize(
    "options,error,match",
    [
        ({"num_dynamic_buckets": 0}, ValueError, "between 1 and 8"),
        ({"num_dynamic_buckets": 9}, ValueError, "between 1 and 8"),
        ({"num_dynamic_buckets": 2.0}, ValueError, "between 1 and 8"),
        ({"bucket_size": 0}, ValueError, "positive integer"),
        ({"bucket_size": "128"}, ValueError, "positive integer"),
        ({"debug_callback": 3}, TypeError, "must be callable"),
        ({"async_compile": "yes"}, TypeError, "must be a bool"),
        ({"serializable": 1}, TypeError, "must be a bool"),
        ({"custom_module_name": 7}, TypeError, "must be a str"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], error: type[Exception], match: str) -> None:
    x = torch.randn(3).to("tpu")
    gm, inputs = _graph(torch.sin, x)
    with pytest.raises(error, match=match):
        TpuBackend()(gm, inputs, options=options)
    with pytest.raises(Exception, match=match):  # Dynamo wraps the backend's error
        torch.compile(torch.sin, backend="tpu", options=options)(x)
    with pytest.raises(error, match=match):  # no backend: refused by torch.compile() itself
        torch.compile(torch.sin, options=options)


def test_unexpected_keyword_is_refused() -> None:
    x = torch.randn(3).to("tpu")
    gm, inputs = _graph(torch.sin, x)
    with pytest.raises(TypeError, match="Unexpected keyword arguments"):
        TpuBackend()(gm, inputs, fullgraph=True)


def _run_lengths(compiled: Callable[..., Any], cpu: nn.Module, lengths: list[int]) -> None:
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n in lengths:
            x = torch.randn(2, n, 8, generator=g)
            xt = x.to("tpu")
            torch._dynamo.mark_dynamic(xt, 1)
            torch.testing.assert_close(compiled(xt).cpu(), cpu(x), rtol=1e-4, atol=1e-5)


def test_dynamic_buckets_follow_the_options(delta) -> None:
    cpu, tpu = _pair(TokenMLP)
    lengths = [5, 9, 20, 33]
    # TorchTPU's ladder: 2 buckets 16 apart from the first length's multiple of 16 (16, 32); 33 runs unpadded.
    _run_lengths(torch.compile(tpu, backend="tpu", options={"num_dynamic_buckets": 2, "bucket_size": 16}), cpu, lengths)
    d = delta()
    assert d["compiled_graphs"] == 1 and d["compiled_calls"] == 4 and d["bucketed_calls"] == 3
    torch._dynamo.reset()
    # Without the options, our ladder (32, 64, ...) pads every one of them.
    _run_lengths(torch.compile(tpu, backend="tpu"), cpu, lengths)
    d = delta()
    assert d["compiled_graphs"] == 1 and d["bucketed_calls"] == 4


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_async_option_first_call_warms_up_and_signals(mode: str, delta) -> None:
    def bump(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return (x @ w).relu() + torch.rand_like(w).sum()

    x, w = torch.randn(4, 6), torch.randn(6, 3)
    xt, wt = x.to("tpu"), w.to("tpu")
    compiled = torch.compile(bump, backend="tpu", options={"async_compile": True})
    rng = torch.tpu.get_rng_state()
    with torch_tpu.eager_mode(mode):
        with pytest.raises(AsyncCompilationSubmitted) as submitted:
            compiled(xt, wt)
    d = delta()
    assert d["compiled_graphs"] == 1 and d["compiled_calls"] == 1  # it ran once, on copies
    torch.testing.assert_close(xt.cpu(), x)  # the input was not mutated
    assert torch.equal(torch.tpu.get_rng_state(), rng)  # nor the RNG state advanced
    assert submitted.value.artifact is not None
    assert resolve_compilations([submitted.value, submitted.value.artifact, object()]) == 2
    assert submitted.value.artifact.done()  # resolved: its program is compiled
    with torch_tpu.eager_mode(mode):
        out = compiled(xt, wt)
    torch.testing.assert_close(xt.cpu(), x * 2)
    assert not torch.equal(torch.tpu.get_rng_state(), rng)  # a real call draws from it
    assert out.shape == (4, 3) and bool((out.cpu() >= 0).all())
    torch.testing.assert_close(out.cpu() - out.cpu().min(), (x * 2 @ w).relu() - (x * 2 @ w).relu().min())
    assert delta()["compiled_graphs"] == 0


def test_async_compile_round_trip(delta) -> None:
    cpu, tpu = _pair(TokenMLP)
    shapes = [(2, 4, 8), (3, 5, 8)]
    warm = [torch.randn(s) for s in shapes]
    before = [p.detach().cpu().clone() for p in tpu.parameters()]
    compiled = async_compile(tpu, [(w.to("tpu"),) for w in warm[:1]] + [warm[1].to("tpu")])
    d = delta()
    # per shape: one graph and one warm-up run, whose program went to the background compiler
    assert d["compiled_graphs"] == 2 and d["compiled_calls"] == 2 and d["captured_graphs"] == 0
    for p, q in zip(tpu.parameters(), before, strict=True):
        assert torch.equal(p.detach().cpu(), q)
    programs = torch_tpu.metrics()["cache_misses"]
    for s in shapes:
        x = torch.randn(s)
        out = compiled(x.to("tpu"))
        assert not out.requires_grad  # no_grad=True by default
        with torch.no_grad():
            torch.testing.assert_close(out.cpu(), cpu(x), rtol=1e-4, atol=1e-5)
    assert torch_tpu.metrics()["cache_misses"] == programs  # the warm-ups compiled every program these calls use
    d = delta()
    assert d["compiled_graphs"] == 0 and d["compiled_calls"] == 2 and d["captured_graphs"] == 2
    # keyword and (args, kwargs) forms
    compiled = async_compile(lambda a, b: a * b + 1, [((), {"a": warm[0], "b": warm[0]}), ((warm[1],), {"b": warm[1]})])
    torch.testing.assert_close(compiled(warm[0], b=warm[0]), warm[0] * warm[0] + 1)


class BatchNormNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.bn(self.conv(x)).relu().mean((2, 3)))


def test_async_compile_compiles_in_the_background_and_changes_nothing(delta) -> None:
    """A training-mode BatchNorm (its running statistics are updated in place) warmed up for three batch sizes with
    gradients on: the warm-ups hand one program per shape to the background compiler and leave every parameter and
    statistic as it was; the calls after it compile nothing (each is captured for replay from the program the
    warm-up compiled) and train exactly like the CPU."""
    from torch_tpu import runtime

    cpu, tpu = _pair(BatchNormNet)
    batches = [torch.randn(b, 3, 6, 6) for b in (2, 3, 4)]
    state = {k: v.cpu().clone() for k, v in tpu.state_dict().items()}
    cache = runtime.get().cache
    tickets = cache.last_ticket
    compiled = async_compile(tpu, [(x.to("tpu"),) for x in batches], no_grad=False)
    assert cache.last_ticket - tickets == 3  # one background compilation per shape (a disk hit is loaded there)
    assert cache.background_pending == 0  # async_compile resolves what it submitted before returning
    d = delta()
    assert d["compiled_graphs"] == 3 and d["compiled_calls"] == 3
    for k, v in tpu.state_dict().items():
        assert torch.equal(v.cpu(), state[k]), k
    programs = torch_tpu.metrics()["cache_misses"]
    outs = [compiled(x.to("tpu")) for x in batches]
    assert torch_tpu.metrics()["cache_misses"] == programs  # the forward programs were all compiled by the warm-up
    refs = [cpu(x) for x in batches]
    for out, ref in zip(outs, refs, strict=True):
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
    sum(o.sum() for o in outs).backward()  # the backward graphs compile now (async_compile runs forwards only)
    sum(r.sum() for r in refs).backward()
    for (name, p), q in zip(tpu.named_parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=name)
    torch.testing.assert_close(tpu.bn.running_mean.cpu(), cpu.bn.running_mean)
    torch.testing.assert_close(tpu.bn.running_var.cpu(), cpu.bn.running_var)
    assert delta()["captured_graphs"] == 3


def test_no_backend_routes_tpu_graphs_here_and_cpu_graphs_to_inductor(delta) -> None:
    from torch._inductor import metrics

    seen: list[TpuCompileDebug] = []
    x, y = torch.randn(6, 6), torch.randn(6, 6)
    compiled = torch.compile(f, options={"debug_callback": seen.append})  # TorchTPU's key, no backend named
    torch.testing.assert_close(compiled(x.to("tpu"), y.to("tpu")).cpu(), f(x, y))
    d = delta()
    assert d["compiled_graphs"] == 1 and d["compiled_calls"] == 1 and len(seen) == 1
    kernels = metrics.generated_kernel_count
    torch.testing.assert_close(compiled(x, y), f(x, y))  # CPU inputs: a new graph, compiled by Inductor
    d = delta()
    assert d["compiled_graphs"] == 0 and d["compiled_calls"] == 0 and len(seen) == 1
    assert metrics.generated_kernel_count > kernels
