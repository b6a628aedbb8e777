"""JAX functions on torch tensors: lowered once per signature to StableHLO and called from torch_tpu's program (tpu
tensors), or run by JAX itself (CPU tensors).

On tpu, the lowered module's functions are renamed apart (a prefix carrying a digest of the text) and the op becomes a
`func.call` inside the graph being recorded: in fused eager it is one node among its neighbours, under torch.compile
part of the compiled program. The lowering targets the platform of torch_tpu's PJRT plugin; off a TPU, Pallas
kernels are lowered in interpret mode (plain StableHLO), on a TPU they keep their Mosaic lowering.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from torch_tpu._internal import stablehlo_text

_DTYPES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
    torch.uint64: "uint64",
    torch.bool: "bool",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
    torch.float8_e5m2: "float8_e5m2",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2fnuz: "float8_e5m2fnuz",
    torch.float8_e4m3fnuz: "float8_e4m3fnuz",
}
_TORCH_DTYPES = {v: k for k, v in _DTYPES.items()}
_WIDE = {"float64", "int64", "uint64", "complex128"}


def jax_dtype(op: str, what: str, dtype: torch.dtype) -> str:
    import jax

    name = _DTYPES.get(dtype)
    if name is None:
        raise TypeError(f"{op}: {what} is {dtype}, which JAX has no dtype for")
    if name in _WIDE and not jax.config.jax_enable_x64:
        raise TypeError(
            f"{op}: {what} is {dtype}; JAX computes 64-bit types only with jax_enable_x64 on "
            "(jax.config.update('jax_enable_x64', True)), and would otherwise narrow it"
        )
    return name


def torch_dtype(op: str, dtype: Any) -> torch.dtype:
    name = str(dtype)
    if name not in _TORCH_DTYPES:
        raise TypeError(f"{op}: the JAX function returns {name}, which torch has no dtype for")
    return _TORCH_DTYPES[name]


@dataclass
class Call:
    names: list[str]  # the tensor parameters given, in order
    tensors: list[torch.Tensor]
    static: dict[str, Any]


@dataclass(frozen=True)
class Lowered:
    """One signature of a JAX function: its StableHLO ready to be called, and its results."""

    callee: str
    functions: str
    out_sizes: list[list[int]]
    out_dtypes: list[torch.dtype]
    out_tree: Any  # jax PyTreeDef of the results


def platform() -> str:
    """The JAX lowering platform of torch_tpu's PJRT plugin: "tpu", "cuda", "rocm" or "cpu"."""
    from torch_tpu import runtime

    name = str(runtime.get().client.platform_name).lower()
    if name in ("tpu", "cuda", "rocm"):
        return name
    return "cuda" if name == "gpu" else "cpu"


class Bridge:
    """A JAX function and its lowerings, keyed by the tensors' shapes and dtypes and the static arguments."""

    def __init__(self, op: str, fn: Callable[..., Any], python: inspect.Signature, tensor_names: list[str]) -> None:
        self.op = op
        self.fn = fn
        self.python = python
        self.tensor_names = tensor_names
        self._lowered: dict[Any, Lowered] = {}
        self._cpu_jit: dict[Any, Callable[..., Any]] = {}
        self._lock = threading.Lock()

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
        """A call's tensors, in parameter order (an absent optional tensor, None, is static), and static arguments."""
        bound = self.python.bind(*args, **kwargs)
        bound.apply_defaults()
        call = Call([], [], {})
        for name, value in bound.arguments.items():
            if name in self.tensor_names and isinstance(value, torch.Tensor):
                call.names.append(name)
                call.tensors.append(value)
            else:
                call.static[name] = list(value) if isinstance(value, tuple) else value
        return call

    def _call(self, static: dict[str, Any], names: list[str]) -> Callable[..., Any]:
        def call(*arrays: Any) -> Any:
            values = dict(static)
            values.update(zip(names, arrays, strict=True))
            bound = inspect.BoundArguments(self.python, {n: values[n] for n in self.python.parameters if n in values})
            return self.fn(*bound.args, **bound.kwargs)

        return call

    def cpu_jit(self, names: list[str], static: dict[str, Any]) -> Callable[..., Any]:
        import jax

        key = (tuple(names), repr(sorted(static.items())))
        with self._lock:
            if key not in self._cpu_jit:
                self._cpu_jit[key] = jax.jit(self._call(static, names))
            return self._cpu_jit[key]

    def lowered(self, names: list[str], tensors: list[torch.Tensor], static: dict[str, Any]) -> Lowered:
        import jax

        key = (
            tuple(names),
            tuple((tuple(t.shape), t.dtype) for t in tensors),
            repr(sorted(static.items())),
        )
        with self._lock:
            hit = self._lowered.get(key)
        if hit is not None:
            return hit
        specs = [
            jax.ShapeDtypeStruct(tuple(t.shape), jax_dtype(self.op, f"argument {n!r}", t.dtype))
            for n, t in zip(names, tensors, strict=True)
        ]
        target = platform()
        call = self._call(static, names)
        try:
            with _interpret_off_tpu(target):
                traced = jax.jit(call, keep_unused=True).trace(*specs)  # @main takes every tensor
                text = traced.lower(lowering_platforms=(target,)).as_text()
            out = jax.eval_shape(call, *specs)
        except Exception as e:  # JAX's own errors: bad shapes, unsupported dtypes
            raise RuntimeError(f"{self.op}: JAX could not lower the function: {type(e).__name__}: {e}") from e
        leaves, tree = jax.tree_util.tree_flatten(out)
        callee, functions = stablehlo_text.renamed_apart(text, self.op)
        lowered = Lowered(
            callee,
            functions,
            [list(a.shape) for a in leaves],
            [torch_dtype(self.op, a.dtype) for a in leaves],
            tree,
        )
        with self._lock:
            self._lowered[key] = lowered
        return lowered


@contextlib.contextmanager
def _interpret_off_tpu(target: str) -> Iterator[None]:
    """Pallas kernels in interpret mode (plain StableHLO loops, as `pallas_call(..., interpret=True)`) unless the
    plugin is a TPU. JAX's own switch, force_tpu_interpret_mode, picks its detailed TPU interpreter, which calls back
    into Python from the program: no use inside another runtime's program. Its setting is flipped to True instead."""
    setting = None
    if target != "tpu":
        try:
            from jax._src import config as jax_config

            setting = jax_config.pallas_tpu_interpret_mode_context_manager
        except (ImportError, AttributeError):  # another JAX: kernels must say interpret=True themselves
            setting = None
    if setting is None:
        yield
        return
    previous = setting.swap_local(True)
    try:
        yield
    finally:
        setting.set_local(previous)


def run_on_tpu(bridge: Bridge, call: Call) -> tuple[list[torch.Tensor], Any]:
    """The results, flat, and the JAX tree they came in."""
    from torch_tpu import _C

    low = bridge.lowered(call.names, call.tensors, call.static)
    outs = list(_C._stablehlo_call(low.callee, low.functions, call.tensors, low.out_sizes, low.out_dtypes))
    return outs, low.out_tree


def run_on_cpu(bridge: Bridge, call: Call) -> tuple[list[torch.Tensor], Any]:
    """The results, flat, and the JAX tree they came in."""
    import jax

    for n, t in zip(call.names, call.tensors, strict=True):
        jax_dtype(bridge.op, f"argument {n!r}", t.dtype)
    cpu = jax.devices("cpu")[0]
    arrays = [jax.device_put(jax.dlpack.from_dlpack(t.detach().contiguous()), cpu) for t in call.tensors]
    try:
        with _interpret_off_tpu("cpu"):
            out = bridge.cpu_jit(call.names, call.static)(*arrays)
    except Exception as e:
        raise RuntimeError(f"{bridge.op}: JAX failed on the CPU: {type(e).__name__}: {e}") from e
    leaves, tree = jax.tree_util.tree_flatten(out)
    return [torch.from_dlpack(leaf).clone() for leaf in leaves], tree


def run(bridge: Bridge, call: Call) -> tuple[list[torch.Tensor], Any]:
    """On tpu when every tensor is there, through JAX's CPU backend when every tensor is on the CPU."""
    devices = {t.device.type for t in call.tensors}
    if devices == {"tpu"}:
        return run_on_tpu(bridge, call)
    if devices <= {"cpu"}:
        return run_on_cpu(bridge, call)
    raise RuntimeError(f"{bridge.op}: expected every tensor on tpu or every tensor on cpu, got {sorted(devices)}")


def meta_results(bridge: Bridge, call: Call) -> list[torch.Tensor]:
    """Empty tensors shaped like the results (the fake kernel), on the tensors' device."""
    import jax

    names, tensors, static = call.names, call.tensors, call.static
    for t in tensors:
        if any(isinstance(d, torch.SymInt) for d in t.shape):
            raise RuntimeError(
                f"{bridge.op}: a JAX op needs static shapes; mark the graph static (torch.compile(dynamic=False))"
            )
    specs = [
        jax.ShapeDtypeStruct(tuple(int(d) for d in t.shape), jax_dtype(bridge.op, f"argument {n!r}", t.dtype))
        for n, t in zip(names, tensors, strict=True)
    ]
    out = _eval_shape(bridge, names, static, specs)
    device = tensors[0].device if tensors else torch.device("meta")
    return [
        torch.empty(list(a.shape), dtype=torch_dtype(bridge.op, a.dtype), device=device)
        for a in jax.tree_util.tree_leaves(out)
    ]


def _eval_shape(bridge: Bridge, names: list[str], static: dict[str, Any], specs: list[Any]) -> Any:
    import jax

    try:
        with _interpret_off_tpu("cpu"):
            return jax.eval_shape(bridge._call(static, names), *specs)
    except Exception as e:
        raise RuntimeError(f"{bridge.op}: JAX could not infer the result shapes: {type(e).__name__}: {e}") from e


__all__ = ["Bridge", "Call", "Lowered", "meta_results", "platform", "run"]
