"""`async_compile` of the "tpu" backend (see `torch_tpu.compile.options`).

Dynamo and AOTAutograd trace when the compiled function is first called, on the caller's thread. The graph's first
call is then a warm-up: it is recorded once on copies of its inputs, and the program the engine would run for it is
handed to the compile cache's background threads instead (`_C._flush_compile_only`, or a capture made under
`replay.compile_only` when the graph's ops were all known). The call raises `AsyncCompilationSubmitted`, the caller
goes on (tracing the next shape, say), and resolving the artifact waits for the compilations submitted so far. A
later call compiles the same program text, so it finds the program compiled or waits for it. A warm-up whose fused
graph another thread's ops joined runs and compiles as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree

from torch_tpu import _C
from torch_tpu.compile import replay
from torch_tpu.compile.runner import fused


def _cache() -> Any:
    from torch_tpu import runtime

    return runtime.get().cache


class CompiledArtifact:
    """One graph the backend compiled (a forward, inference or backward graph of AOTAutograd). `ticket`: the last
    background compilation its warm-up submitted (0: none pending)."""

    def __init__(self, kind: str, graph_module: torch.fx.GraphModule, executable: Callable[..., Any]) -> None:
        self.kind = kind  # "forward", "inference" or "backward"
        self.graph_module = graph_module
        self.executable = executable
        self.ticket = 0

    def resolve(self) -> None:
        """Waits until the programs its warm-up submitted are compiled."""
        if self.ticket:
            _cache().wait_background(self.ticket)

    def done(self) -> bool:
        return not self.ticket or bool(_cache().background_done(self.ticket))

    def __repr__(self) -> str:
        return f"CompiledArtifact({self.kind}, {len(self.graph_module.graph.nodes)} nodes)"


class AsyncCompilationSubmitted(Exception):  # noqa: N818 - TorchTPU's name
    """Raised by the first call of a graph compiled with ``async_compile``: the graph was traced and its programs
    handed to the background compiler, and this call returned nothing. `artifact` is the compiled graph;
    `resolve()` waits for its compilation."""

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


def warm_up(fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
    """Runs `fn` once on copies of `args` with its programs handed to the background compiler instead of run (see
    `replay.compile_only` and `_C._flush_compile_only`), restoring the tpu RNG state afterwards: nothing the caller
    can see changes. Returns the ticket of the last background compilation submitted so far."""
    copies = tuple(_copy(a) for a in args)
    _C._flush()  # the copies are materialized now, so they are not part of the warm-up's program
    devices = _tpu_indices(copies)
    with torch.random.fork_rng(devices=devices, device_type="tpu", enabled=bool(devices)):
        with fused(), replay.compile_only():
            outs = fn(*copies)
            # A graph's first run at a shape lowers op structures the engine has not seen, which a capture cannot
            # hold: its ops stay in the open graph, whose program is the one a later capture compiles. The outputs
            # stay alive meanwhile, so the program is the one a real call makes.
            for d in devices:
                _C._flush_compile_only(d)
        del outs  # never computed
        _C._flush()
    return int(_cache().last_ticket) if devices else 0


def first_call_signals(fn: Callable[..., Any], artifacts: list[CompiledArtifact]) -> Callable[..., Any]:
    """`fn` whose first call warms it up (see `warm_up`) and raises `AsyncCompilationSubmitted`; later calls run."""
    state = {"first": True}

    def call(*args: Any) -> Any:
        if state["first"]:
            state["first"] = False
            ticket = warm_up(fn, args)
            artifact = artifacts[-1] if artifacts else None
            if artifact is not None:
                artifact.ticket = max(artifact.ticket, ticket)
            raise AsyncCompilationSubmitted(artifact)
        return fn(*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call
