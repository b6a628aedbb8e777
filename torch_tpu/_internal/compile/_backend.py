"""`TpuBackend` and the asynchronous warm-up helpers, as TorchTPU names them, on our "tpu" backend.

Differences from TorchTPU worth knowing (details in `torch_tpu.compile.options`):

- ``async_compile``: a graph's first call is traced on the caller's thread and recorded on copies of its inputs,
  and its program is compiled on background threads instead of run (the first run's own program, which TorchTPU
  skips, is the one a later call's capture replays here); `resolve_compilations` waits for those compilations;
- ``.serialize()`` of a compiled graph returns the Dynamo graph and its inputs' metadata, which torch's precompile
  saves; loading compiles the graph again (its programs come from the disk cache);
- ``dynamic=True`` is supported (TorchTPU refuses it): dynamic sizes are padded to buckets where that is safe.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from torch_tpu.compile.options import TpuCompileDebug
from torch_tpu.compile.options import parse as parse_options
from torch_tpu.compile.warmup import AsyncCompilationSubmitted, CompiledArtifact

_BACKENDS: weakref.WeakSet[TpuBackend] = weakref.WeakSet()


class TpuBackend:
    """The "tpu" torch.compile backend as an object: ``torch.compile(fn, backend=TpuBackend())``, optionally with
    ``options={...}`` (TorchTPU's keys). Calling it with a graph and example inputs compiles the graph through
    `torch_tpu.compile.backend.compile_graph`, exactly as ``backend="tpu"`` does.

    The constructor's arguments are TorchTPU's older switches: ``debug=True`` keeps every graph this instance
    compiled (`compiled_executables`), records a `TpuCompileDebug` for each compilation and turns ``serializable``
    off; ``enable_serialization=False`` turns ``serializable`` off; ``dynamism`` is accepted and unused.
    """

    def __init__(self, debug: bool = False, dynamism: bool = False, enable_serialization: bool = True) -> None:
        self._debug = debug
        self._dynamism = dynamism
        self._enable_serialization = enable_serialization and not debug
        self._compiled_executables: list[CompiledArtifact] = []
        self._num_compiled_executables = 0
        self.last_debug: TpuCompileDebug | None = None  # the record of the latest compilation, when one was kept
        _BACKENDS.add(self)

    @property
    def compiled_executables(self) -> list[CompiledArtifact]:
        return list(self._compiled_executables)

    @property
    def num_compiled_executables(self) -> int:
        """Graphs (forward, inference, backward) this instance compiled since it was made or cleared."""
        return self._num_compiled_executables

    def clear_cache(self) -> None:
        """Forgets the graphs this instance kept and resets its count (Dynamo's own cache is untouched)."""
        self._compiled_executables.clear()
        self._num_compiled_executables = 0

    def _compiled(self, artifact: CompiledArtifact) -> None:
        self._num_compiled_executables += 1
        if self._debug:
            self._compiled_executables.append(artifact)

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
        from torch_tpu.compile.backend import Session, compile_graph

        options = kwargs.pop("options", None) or {}
        if kwargs:
            raise TypeError(f"Unexpected keyword arguments: {kwargs}")
        opts = parse_options(options)
        if not self._enable_serialization:
            opts = dataclasses.replace(opts, serializable=False)
        debug = TpuCompileDebug() if (opts.debug_callback is not None or self._debug) else None
        if debug is not None:
            self.last_debug = debug
        return compile_graph(graph_module, example_inputs, Session(opts, debug, on_compiled=self._compiled))


def clear_cache() -> None:
    """Clears the state every live `TpuBackend` keeps (the graphs kept in debug mode, the counts). Background
    compilations go on (their programs enter the engine's cache, which `torch.tpu._clear_cache()` drops)."""
    for backend in list(_BACKENDS):
        backend.clear_cache()


def resolve_compilations(artifacts: Iterable[Any]) -> int:
    """Waits for each artifact (a compiled graph or an `AsyncCompilationSubmitted`) to finish compiling and returns
    how many it resolved."""
    resolved = 0
    for item in artifacts:
        resolve = getattr(item, "resolve", None)
        if callable(resolve):
            resolve()
            resolved += 1
    return resolved


def _call_args(item: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """One warm-up input as (args, kwargs): ``((args...), {kwargs})``, a tuple of arguments, a dict of keyword
    arguments, or anything else (a list included) as the only argument."""
    if isinstance(item, tuple):
        if len(item) == 2 and isinstance(item[0], tuple) and isinstance(item[1], dict):
            return item[0], item[1]
        return item, {}
    if isinstance(item, dict):
        return (), item
    return (item,), {}


def async_compile(
    fn: Callable[..., Any], warmup_inputs: Sequence[Any], *, no_grad: bool = True, **backend_kwargs: Any
) -> Callable[..., Any]:
    """Compiles `fn` with the "tpu" backend (``fullgraph=True, dynamic=False``) for each input set of
    `warmup_inputs` and returns the compiled function, ready to run at those shapes.

    Each item of `warmup_inputs` is a tuple of positional arguments, a dict of keyword arguments, or a pair
    ``((args...), {kwargs})``; anything else (a list included) is passed as the single argument. `no_grad` runs
    the compiled function (warm-ups and later calls) under ``torch.no_grad()``; pass False for training.
    `backend_kwargs` are backend options (e.g. ``num_dynamic_buckets``).

    Each warm-up traces the function and records the graph once on copies of the inputs, hands its program to the
    background compiler (the inputs, parameters and RNG state are left as they were) and moves on to the next
    input set; the compilations are resolved before this returns.
    """
    compiled: Callable[..., Any] = torch.compile(
        fn, backend="tpu", fullgraph=True, dynamic=False, options={"async_compile": True, **backend_kwargs}
    )
    if no_grad:
        compiled = torch.no_grad()(compiled)
    artifacts: list[Any] = []
    for item in warmup_inputs:
        args, kwargs = _call_args(item)
        try:
            compiled(*args, **kwargs)
        except AsyncCompilationSubmitted as submitted:
            if submitted.artifact is not None:
                artifacts.append(submitted.artifact)
    resolve_compilations(artifacts)
    return compiled


__all__ = [
    "AsyncCompilationSubmitted",
    "TpuBackend",
    "TpuCompileDebug",
    "async_compile",
    "clear_cache",
    "resolve_compilations",
]
