"""Fixtures of the compiled-mode tests: a fresh Dynamo cache per test, debug eager mode around each, counter deltas."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
import torch._dynamo

import torch_tpu


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    previous = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("debug")
    yield
    torch_tpu.set_eager_mode(previous)
    torch._dynamo.reset()


KEYS = (
    "compiles",
    "cache_misses",
    "executions",
    "compiled_graphs",
    "dynamo_recompiles",
    "compiled_calls",
    "compiled_backward_calls",
    "aot_backward_graphs",
    "bucketed_calls",
    "graph_cache_hits",
    "graph_replays",
    "graph_nodes",
    "captured_graphs",
    "refused_captures",
    "replayed_calls",
    "donations",
)


@pytest.fixture
def no_replay() -> Iterator[None]:
    """Compiled graphs recorded op by op on every call (replay off), as fused eager records them."""
    from torch_tpu.compile import replay

    previous = replay.enabled()
    replay.set_enabled(False)
    yield
    replay.set_enabled(previous)


@pytest.fixture
def delta() -> Callable[[], dict[str, int]]:
    """delta() returns the counters' change since the fixture (or the previous delta() call) and fallbacks seen."""
    state = {"before": torch_tpu.metrics()}

    def take() -> dict[str, int]:
        now = torch_tpu.metrics()
        out = {k: now[k] - state["before"][k] for k in KEYS}
        out["fallbacks"] = sum(now["fallback_ops"].values()) - sum(state["before"]["fallback_ops"].values())
        state["before"] = now
        return out

    return take
