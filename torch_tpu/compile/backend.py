"""The Dynamo backend "tpu": AOTAutograd splits the captured graph into ATen forward/backward graphs (functionalized:
input mutations become outputs copied back by AOTAutograd's epilogue) and each runs as one program through the
fused engine. Parameters and buffers are graph inputs, so they stay program arguments (never baked constants)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_tpu.compile import bucketing, counters
from torch_tpu.compile.decompositions import tpu_decompositions
from torch_tpu.compile.runner import fused, run_fused


def _count_compile() -> None:
    counters.bump("compiled_graphs")
    compile_id = torch._guards.CompileContext.current_compile_id()
    if compile_id is not None and (compile_id.frame_compile_id or 0) > 0:
        counters.bump("dynamo_recompiles")


def _boxed(fn: Callable[..., Any], counter: str) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        counters.bump(counter)
        with fused():
            return fn(*args)

    call._boxed_call = True  # type: ignore[attr-defined]  # AOTAutograd's calling convention: one list argument
    return call


def _forward_compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[[list[Any]], Any]:
    counters.bump("aot_forward_graphs")
    return _boxed(gm.forward, "compiled_calls")


def _inference_compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[[list[Any]], Any]:
    counters.bump("aot_forward_graphs")
    padded = bucketing.try_bucketed(gm, example_inputs)
    return _boxed(padded if padded is not None else gm.forward, "compiled_calls")


def _backward_compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[[list[Any]], Any]:
    counters.bump("aot_backward_graphs")
    return _boxed(gm.forward, "compiled_backward_calls")


def tpu_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Callable[..., Any]:
    """Dynamo backend: `torch.compile(model, backend="tpu")` (and the default backend on tpu tensors)."""
    from torch._dynamo.backends.common import aot_autograd

    _count_compile()
    compiler = aot_autograd(
        fw_compiler=_forward_compiler,
        bw_compiler=_backward_compiler,
        inference_compiler=_inference_compiler,
        decompositions=tpu_decompositions(),
        keep_inference_input_mutations=True,
    )
    # The AOTAutograd wrappers (alias regeneration, mutation epilogue, autograd.Function glue) run inside the same
    # fused region, so they join the call's program instead of running as programs of their own.
    return run_fused(compiler(gm, example_inputs))


def uses_tpu(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """True when the graph touches tpu tensors: an input on tpu, or any value the graph produces on tpu (factories
    under `torch.set_default_device("tpu")`)."""
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return True
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.Tensor) and value.device.type == "tpu":
            return True
    return False
