"""`async_compile` of the "tpu" backend (see `torch_tpu.compile.options`).

Our compilation is synchronous: Dynamo and AOTAutograd trace when the compiled function is first called, and the
engine compiles a graph's programs when it first runs. So an "asynchronous" warm-up call here does the whole work
before it raises `AsyncCompilationSubmitted`, and resolving the artifact it carries has nothing left to wait for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree

from torch_tpu import _C


class CompiledArtifact:
    """One graph the backend compiled (a forward, inference or backward graph of AOTAutograd)."""

    def __init__(self, kind: str, graph_module: torch.fx.GraphModule, executable: Callable[..., Any]) -> None:
        self.kind = kind  # "forward", "inference" or "backward"
        self.graph_module = graph_module
        self.executable = executable

    def resolve(self) -> None:
        """Nothing to wait for: compiled synchronously."""

    def done(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"CompiledArtifact({self.kind}, {len(self.graph_module.graph.nodes)} nodes)"


class AsyncCompilationSubmitted(Exception):  # noqa: N818 - TorchTPU's name
    """Raised by the first call of a graph compiled with ``async_compile``: the graph was compiled (and warmed up),
    and this call returned nothing. `artifact` is the compiled graph; `resolve()` waits for it (here: returns)."""

    def __init__(self, artifact: Any = None) -> None:
        super().__init__("compilation submitted; call the compiled function again to run it")
        self.artifact = artifact

    def resolve(self) -> None:
        resolve = getattr(self.artifact, "resolve", None)
        if callable(resolve):
            resolve()


def _copy(t: Any) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    c = t.detach().clone(memory_format=torch.preserve_format)
    if t.requires_grad:
        c.requires_grad_(True)
    return c


def _tpu_indices(args: Any) -> list[int]:
    return sorted(
        {
            a.device.index or 0
            for a in _pytree.tree_leaves(args)
            if isinstance(a, torch.Tensor) and a.device.type == "tpu"
        }
    )


def warm_up(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Runs `fn` once on copies of `args` and waits for it, restoring the tpu RNG state afterwards: its programs are
    compiled and its captures recorded, and nothing the caller can see changes."""
    copies = tuple(_copy(a) for a in args)
    _C._flush()  # the copies are materialized now, so they are not part of the warm-up's program
    devices = _tpu_indices(copies)
    with torch.random.fork_rng(devices=devices, device_type="tpu", enabled=bool(devices)):
        outs = fn(*copies)
        _C._flush()
        for d in devices:
            _C._synchronize(d)
    del outs


def first_call_signals(fn: Callable[..., Any], artifacts: list[CompiledArtifact]) -> Callable[..., Any]:
    """`fn` whose first call warms it up (see `warm_up`) and raises `AsyncCompilationSubmitted`; later calls run."""
    state = {"first": True}

    def call(*args: Any) -> Any:
        if state["first"]:
            state["first"] = False
            warm_up(fn, args)
            raise AsyncCompilationSubmitted(artifacts[-1] if artifacts else None)
        return fn(*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call
