"""`.serialize()` of a graph compiled by the "tpu" backend, for torch's precompile:
``torch.compile(fn, backend="tpu").aot_compile(((args...), {kwargs}))`` then ``.save_compiled_function(path)``, and
in another process ``torch.compiler.load_compiled_function(file)``.

Torch wraps a backend result that has ``.serialize()`` in its bundled-AOTAutograd callable: saving pickles what
``serialize()`` returns, loading unpickles it and calls its ``wrap_post_compile`` to get the callable back. What we
hand it is a `SerializedGraph`: the Dynamo graph (an FX GraphModule, pickled as its Python code), the metadata of
its example inputs and the backend options. Loading compiles that graph again through the backend, so the loaded
function runs exactly as a fresh compilation would; its programs come back from the engine's disk cache
(TORCH_TPU_CACHE_DIR) when the same plugin compiled them before, so a warm load does not call the XLA compiler.

Only graphs with static shapes serialize (TorchTPU's rule as well): a graph traced with symbolic sizes raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_tpu.compile.options import BackendOptions


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """An example input's metadata: enough to make an empty tensor AOTAutograd traces exactly as the original."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool

    def empty(self) -> torch.Tensor:
        t = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)
        return t.requires_grad_(self.requires_grad)


def _static(value: Any) -> bool:
    return not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def input_spec(value: Any) -> Any:
    """`value` (an example input of a Dynamo graph) as something pickleable; raises for symbolic sizes."""
    if isinstance(value, torch.Tensor):
        if not all(_static(d) for d in (*value.shape, *value.stride())):
            raise NotImplementedError(
                "serialize(): this graph was traced with dynamic shapes; only static graphs serialize "
                "(compile with dynamic=False)"
            )
        return TensorSpec(
            tuple(int(d) for d in value.shape),
            tuple(int(s) for s in value.stride()),
            value.dtype,
            value.device,
            bool(value.requires_grad),
        )
    if not _static(value):
        raise NotImplementedError(
            "serialize(): this graph takes a symbolic scalar; only static graphs serialize (compile with dynamic=False)"
        )
    return value


class SerializedGraph:
    """What ``.serialize()`` returns: pickleable, and loadable by torch's precompile (it reads `guards_expr` and
    `sanitized_aot_config` and calls `wrap_post_compile`, as on its own bundled AOTAutograd entries)."""

    def __init__(self, graph: torch.fx.GraphModule, inputs: list[Any], options: BackendOptions) -> None:
        self.graph = graph
        self.inputs = inputs
        self.options = options
        self.guards_expr: str | None = None  # Dynamo keeps the guards itself
        self.sanitized_aot_config: Any = None

    def __repr__(self) -> str:
        return f"SerializedGraph({len(self.graph.graph.nodes)} nodes, {len(self.inputs)} inputs)"

    def example_inputs(self) -> list[Any]:
        return [spec.empty() if isinstance(spec, TensorSpec) else spec for spec in self.inputs]

    def wrap_post_compile(self, _args: Any = None, _aot_config: Any = None, _fx_config: Any = None) -> Callable:
        """The graph compiled again by the "tpu" backend, called as torch calls a loaded entry: with one list of
        the graph's inputs."""
        from torch_tpu.compile.backend import Session, compile_graph

        compiled = compile_graph(self.graph, self.example_inputs(), Session(self.options))

        def call(args: list[Any]) -> Any:
            return compiled(*args)

        return call


def serializer(
    graph: torch.fx.GraphModule, example_inputs: Sequence[Any], options: BackendOptions
) -> Callable[[], SerializedGraph]:
    """The ``.serialize`` of a compiled graph. The example inputs' metadata is read now (Dynamo's fake tensors do
    not outlive the compilation); a dynamic graph raises when serialized, not when compiled."""
    refusal: str | None = None
    try:
        inputs = [input_spec(x) for x in example_inputs]
    except NotImplementedError as e:
        inputs, refusal = [], str(e)
    # The reloaded graph compiles synchronously with no debug hooks (a callback does not pickle).
    reloaded = dataclasses.replace(options, async_compile=False, debug_callback=None)

    def serialize() -> SerializedGraph:
        if refusal is not None:
            raise NotImplementedError(refusal)
        return SerializedGraph(graph, inputs, reloaded)

    return serialize


__all__ = ["SerializedGraph", "TensorSpec", "input_spec", "serializer"]
