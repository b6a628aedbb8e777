"""torch.export to StableHLO: an FX graph run once on tpu, its ops captured as one program (the capture torch.compile's
replay uses), and that program wrapped into a module whose arguments and results are the graph's own tensors.

The engine's program reads and writes whole storages (1-D); the wrapper @main takes each input in its own shape,
reshapes it to its storage, calls the program (renamed apart, private) and cuts every output out of the storage that
holds it. Numbers the graph computes with become constants. Weights are arguments: `exported_to_mlir` passes the
program's parameters, buffers and constants first, in the order of its graph signature, then the user inputs, as
the lifted graph takes them. Shapes are those of the sample inputs (no symbolic dimensions yet); device-side
checks (index bounds) are not part of the exported module.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from torch_tpu._internal import stablehlo_text

__all__ = ["ExportedMlir", "exported_to_mlir", "fx_to_mlir"]


class ExportedMlir:
    """A StableHLO module of an exported program: `serialize_text`, `serialize_bytecode`,
    `serialize_portable_artifact` (the last two need JAX's MLIR bindings), and calling it on tpu tensors."""

    def __init__(
        self,
        text: str,
        in_types: list[tuple[list[int], torch.dtype]],
        out_types: list[tuple[list[int], torch.dtype]],
        out_spec: Any,
        out_none: list[bool],
    ) -> None:
        self.text = text
        self.in_types = in_types
        self.out_types = out_types
        self._out_spec = out_spec
        self._out_none = out_none
        self._callee: tuple[str, str] | None = None
        self.state: list[torch.Tensor] = []  # exported_to_mlir: the lifted arguments, to pass before the user inputs

    def restructure(self, spec: Any) -> None:
        if spec.num_leaves != len(self._out_none):
            raise ValueError(f"export: {spec.num_leaves} outputs in the structure, {len(self._out_none)} in the module")
        self._out_spec = spec

    def serialize_text(self, enable_debug_info: bool = False) -> str:
        del enable_debug_info  # the text carries no locations
        return self.text

    def serialize_bytecode(self) -> bytes:
        with _mlir_context() as (ir, _):
            out = io.BytesIO()
            ir.Module.parse(self.text).operation.write_bytecode(file=out)
            return out.getvalue()

    def serialize_portable_artifact(self) -> bytes:
        """A versioned StableHLO artifact (compatible with consumers up to ~4 weeks older), as jax.export makes."""
        with _mlir_context() as (ir, lib):
            from jax._src.lib.mlir.dialects import hlo

            version = hlo.get_version_from_compatibility_requirement(hlo.StablehloCompatibilityRequirement.WEEK_4)
            return bytes(lib.mlir.serialize_portable_artifact(ir.Module.parse(self.text), version, False))

    def jax_exported(self) -> Any:
        """The module as a `jax.export.Exported` (its `.serialize()` is what `jax.export.deserialize` reads)."""
        import dataclasses

        import jax
        import jax.numpy as jnp

        from torch_tpu._internal.pallas._bridge import jax_dtype

        ins = [jax.ShapeDtypeStruct(tuple(s), jax_dtype("export", "an input", d)) for s, d in self.in_types]
        outs = [(tuple(s), jax_dtype("export", "an output", d)) for s, d in self.out_types]

        def shaped_like_the_results(*_: Any) -> tuple[Any, ...]:  # only its signature is kept
            return tuple(jnp.zeros(s, d) for s, d in outs)

        template = jax.export.export(jax.jit(shaped_like_the_results), platforms=("cpu",))(*ins)
        return dataclasses.replace(
            template,
            fun_name="torch_tpu_export",
            mlir_module_serialized=self.serialize_portable_artifact(),
            module_kept_var_idx=tuple(range(len(ins))),
        )

    def __call__(self, *tensors: torch.Tensor) -> Any:
        """The module run on tpu tensors (one node of the recorded graph), outputs in the program's structure."""
        from torch_tpu import _C

        if self._callee is None:
            self._callee = stablehlo_text.renamed_apart(self.text, "torch_tpu_export")
        callee, functions = self._callee
        got = [(list(t.shape), t.dtype) for t in tensors]
        if got != self.in_types:
            raise ValueError(f"exported module: expected inputs {self.in_types}, got {got}")
        flat = list(_C._stablehlo_call(callee, functions, list(tensors), *map(list, zip(*self.out_types, strict=True))))
        it = iter(flat)
        leaves = [None if none else next(it) for none in self._out_none]
        return pytree.tree_unflatten(leaves, self._out_spec)


class _mlir_context:
    """JAX's MLIR context with the StableHLO dialects registered (JAX is optional for everything else)."""

    def __enter__(self) -> tuple[Any, Any]:
        try:
            from jax._src.interpreters import mlir
            from jax._src.lib import _jax
            from jax._src.lib.mlir import ir
        except ImportError as e:
            raise RuntimeError(
                "serializing StableHLO as bytecode needs JAX's MLIR bindings: pip install torch_tpu[jax]"
            ) from e
        self._ctx = mlir.make_ir_context()
        self._ctx.__enter__()
        return ir, _jax

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


def exported_to_mlir(exported: torch.export.ExportedProgram) -> ExportedMlir:
    """The StableHLO of `exported`: arguments are its parameters, buffers and constants (graph signature order),
    then its user inputs at the shapes of the example inputs."""
    sig = exported.graph_signature
    state = {**exported.state_dict, **exported.constants}
    lifted = []
    for spec in sig.input_specs:
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT:
            continue
        if spec.target not in state:
            raise RuntimeError(f"export: the exported program has no value for {spec.target!r}")
        lifted.append(state[spec.target])
    user = [
        _sample(n.meta.get("val"), n.name)
        for n, spec in zip(_placeholders(exported.graph_module), sig.input_specs, strict=True)
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    out = fx_to_mlir(exported.graph_module, [*lifted, *user])
    out.state = [t.detach() for t in lifted if isinstance(t, torch.Tensor)]
    user_outputs = torch.export.graph_signature.OutputKind.USER_OUTPUT
    out_spec = exported.call_spec.out_spec
    if out_spec is not None and all(s.kind == user_outputs for s in sig.output_specs):
        out.restructure(out_spec)  # the model's own output structure (no buffer updates come first)
    return out


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _sample(val: Any, name: str) -> Any:
    if isinstance(val, torch.Tensor):
        if any(isinstance(d, torch.SymInt) for d in val.shape):
            raise NotImplementedError(
                f"export: input {name!r} has a symbolic dimension; exporting dynamic shapes is not supported yet "
                "(export with static shapes)"
            )
        return torch.zeros(val.shape, dtype=val.dtype)
    return val


def fx_to_mlir(module: torch.fx.GraphModule, args: Sequence[Any], **options: Any) -> ExportedMlir:
    """The StableHLO of `module` run on `args` (tensors become arguments, in order; other values are constants)."""
    from torch_tpu import _C
    from torch_tpu.compile.runner import fused

    unsupported = {k for k, v in options.items() if v not in (None, False, ())}
    if unsupported:
        raise NotImplementedError(f"fx_to_mlir: options {sorted(unsupported)} are not supported")
    device = torch.device("tpu", torch.tpu.current_device())
    inputs = [_fresh(a, device) for a in args]
    torch.tpu.synchronize()  # the inputs exist before the capture: they are its arguments
    tensor_inputs = [a for a in inputs if isinstance(a, torch.Tensor)]
    module = _on_device(module, device)
    with torch.no_grad():  # once uncaptured: a call that lowers new op structures is not captured
        module(*inputs)
    torch.tpu.synchronize()
    outs = None
    with torch.no_grad(), fused():
        token = _C._capture_begin(device.index)
        try:
            outs = module(*inputs)
        finally:
            leaves, spec = pytree.tree_flatten(outs)
            graph, why = _C._capture_end(device.index, token, inputs, None if outs is None else leaves)
    if graph is None:
        raise RuntimeError(f"export: the graph could not be captured as one program: {why}")
    return _wrap(graph.program(), inputs, tensor_inputs, leaves, spec)


def _on_device(module: Any, device: torch.device) -> Any:
    """The module on `device`: its tensors moved, and an FX graph's factory calls that name the CPU (torch.export
    records `device=cpu` for a mask made inside forward) pointed at `device`, in a copy."""
    if not isinstance(module, torch.fx.GraphModule):
        return module.to(device) if isinstance(module, torch.nn.Module) else module
    import copy

    gm = copy.deepcopy(module).to(device)
    for node in gm.graph.nodes:
        if node.op == "get_attr":  # plain tensor attributes, which Module.to leaves where they are
            owner, _, name = str(node.target).rpartition(".")
            holder = gm.get_submodule(owner) if owner else gm
            value = getattr(holder, name)
            if isinstance(value, torch.Tensor) and value.device != device:
                setattr(holder, name, value.to(device))
        if node.op == "call_function":
            node.args = tuple(_to_target(a, device) for a in node.args)
            node.kwargs = {k: _to_target(v, device) for k, v in node.kwargs.items()}
    gm.recompile()
    return gm


def _to_target(value: Any, device: torch.device) -> Any:
    return device if isinstance(value, torch.device) and value.type == "cpu" else value


def _fresh(a: Any, device: torch.device) -> Any:
    """A tensor argument as a new contiguous tpu tensor whose storage is exactly its elements."""
    if not isinstance(a, torch.Tensor):
        return a
    return a.detach().to("cpu").contiguous().to(device)


def _constant(buffer: Any) -> tuple[str, str]:
    """A fixed argument's value as a StableHLO constant: (attribute value, type)."""
    names = {"f32": np.float32, "f64": np.float64, "s64": np.int64, "s32": np.int32, "pred": np.bool_}
    dtype = names.get(str(buffer.dtype).lower())
    if dtype is None:
        raise NotImplementedError(f"export: a constant of element type {buffer.dtype}")
    values = np.frombuffer(buffer.to_bytes(), dtype=dtype)
    element = {np.float32: "f32", np.float64: "f64", np.int64: "i64", np.int32: "i32", np.bool_: "i1"}[dtype]
    dims = list(buffer.dims)
    ty = "tensor<" + "".join(f"{d}x" for d in dims) + element + ">"
    if dtype is np.bool_:
        items = ["true" if v else "false" for v in values]
    elif dtype in (np.float32, np.float64):
        items = [f"{float(v):.17e}" if np.isfinite(v) else _float_hex(v, dtype) for v in values]
    else:
        items = [str(int(v)) for v in values]
    body = items[0] if not dims else "[" + ", ".join(items) + "]"
    return f"dense<{body}>", ty


def _float_hex(v: Any, dtype: Any) -> str:
    raw = np.array([v], dtype=dtype).view(np.uint32 if dtype is np.float32 else np.uint64)[0]
    return f"0x{int(raw):0{8 if dtype is np.float32 else 16}X}"


def _wrap(program: dict[str, Any], inputs: list[Any], tensors: list[torch.Tensor], leaves: list[Any], spec: Any) -> Any:
    # A replayed program donates the inputs it updates; an exported one leaves donation to whoever runs it.
    text = re.sub(r" \{tf\.aliasing_output = \d+ : i32\}", "", program["text"])
    callee, functions = stablehlo_text.renamed_apart(text, "torch_tpu_program")
    lines: list[str] = []
    names = iter(range(1 << 30))

    def emit(op: str) -> str:
        name = f"%w{next(names)}"
        lines.append(f"    {name} = {op}")
        return name

    arg_of_input = {}
    in_types = []
    for i, a in enumerate(inputs):
        if isinstance(a, torch.Tensor):
            arg_of_input[i] = (f"%arg{len(in_types)}", a)
            in_types.append((list(a.shape), a.dtype))
    call_args, call_types = [], []
    for input_index, fixed in zip(program["arg_inputs"], program["fixed_args"], strict=True):
        if input_index >= 0:
            name, t = arg_of_input[input_index]
            flat_type = stablehlo_text.tensor_type([t.numel()], t.dtype)
            shaped = stablehlo_text.tensor_type(t.shape, t.dtype)
            call_args.append(emit(f'"stablehlo.reshape"({name}) : ({shaped}) -> {flat_type}'))
            call_types.append(flat_type)
        else:
            value, ty = _constant(fixed)
            call_args.append(emit(f'"stablehlo.constant"() {{value = {value} : {ty}}} : () -> {ty}'))
            call_types.append(ty)
    result_types = _result_types(program["text"])
    n_results = len(result_types)
    lines.append(
        f'    %r{":" + str(n_results) if n_results > 1 else ""} = "func.call"({", ".join(call_args)}) '
        f"{{callee = @{callee}}} : ({', '.join(call_types)}) -> ({', '.join(result_types)})"
    )
    result_of_fresh = {fresh: j for j, (inp, fresh) in enumerate(program["results"]) if fresh >= 0}
    outs, out_types, out_none = [], [], []
    for o, leaf in zip(program["outputs"], leaves, strict=True):
        if o["kind"] == "none" or not isinstance(leaf, torch.Tensor):
            out_none.append(True)
            continue
        out_none.append(False)
        if o["kind"] == "fresh":
            j = result_of_fresh[o["index"]]
            storage, storage_type = (f"%r#{j}" if n_results > 1 else "%r"), result_types[j]
        else:
            name, t = arg_of_input[o["index"]]
            storage_type = stablehlo_text.tensor_type([t.numel()], t.dtype)
            shaped = stablehlo_text.tensor_type(t.shape, t.dtype)
            storage = emit(f'"stablehlo.reshape"({name}) : ({shaped}) -> {storage_type}')
        outs.append(_cut(emit, storage, storage_type, o))
        out_types.append((list(o["sizes"]), o["dtype"]))
    arg_list = ", ".join(f"%arg{i}: {stablehlo_text.tensor_type(s, d)}" for i, (s, d) in enumerate(in_types))
    out_list = ", ".join(stablehlo_text.tensor_type(s, d) for s, d in out_types)
    text = (
        "module @torch_tpu_export {\n"
        f"  func.func public @main({arg_list}) -> ({out_list}) {{\n"
        + "\n".join(lines)
        + f'\n    "func.return"({", ".join(outs)}) : ({out_list}) -> ()\n  }}\n'
        + functions
        + "\n}\n"
    )
    return ExportedMlir(text, in_types, out_types, spec, out_none)


def _cut(emit: Any, storage: str, storage_type: str, o: dict[str, Any]) -> str:
    """Output `o` (sizes, strides, offset into a 1-D storage) out of `storage`."""
    sizes, strides, offset = list(o["sizes"]), list(o["strides"]), int(o["offset"])
    numel = int(np.prod(sizes)) if sizes else 1
    contiguous, step = True, 1
    for size, stride in reversed(list(zip(sizes, strides, strict=True))):
        if size != 1 and stride != step:
            contiguous = False
        step *= size
    if not contiguous:
        raise NotImplementedError(f"export: an output laid out with strides {strides} (a non-contiguous view)")
    element = stablehlo_text.ELEMENT_TYPES[o["dtype"]]
    flat_type = f"tensor<{numel}x{element}>"
    value = storage
    if flat_type != storage_type or offset:
        value = emit(
            f'"stablehlo.slice"({storage}) {{start_indices = array<i64: {offset}>, limit_indices = array<i64: '
            f"{offset + numel}>, strides = array<i64: 1>}} : ({storage_type}) -> {flat_type}"
        )
    return emit(f'"stablehlo.reshape"({value}) : ({flat_type}) -> {stablehlo_text.tensor_type(sizes, o["dtype"])}')


def _result_types(text: str) -> list[str]:
    """The result types of @main in the engine's program text."""
    import re

    head = text[text.index("func.func @main(") :]
    head = head[: head.index(") {\n")]
    results = head[head.rindex("-> (") + 4 :]
    return re.findall(r"tensor<(?:[^<>]|<[^<>]*>)*>", results)
