"""The torch schema of a JAX function, read from its annotations.

A parameter annotated as an array (`jax.Array`, `jax.typing.ArrayLike`, `torch.Tensor`, `numpy.ndarray`) or not
annotated at all is a tensor; `int`, `float`, `bool`, `str` and sequences of `int` or `float` are static: their
values are baked into the exported program (one export per value). The return annotation says how many tensors come
back: an array is one, `tuple[jax.Array, ...]` with fixed length that many, `list[jax.Array]` a list.

Nothing here imports JAX: array annotations are recognised by name.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_ARRAY_NAMES = {"Array", "ArrayLike", "Tensor", "ndarray", "ArrayImpl"}
_SCALARS = {int: "int", float: "float", bool: "bool", str: "str"}


@dataclass(frozen=True)
class Param:
    name: str
    kind: inspect._ParameterKind
    schema_type: str  # "Tensor", "Tensor?", "int", "float[]", ...
    default: Any = inspect.Parameter.empty

    @property
    def is_tensor(self) -> bool:
        return self.schema_type.startswith("Tensor")


@dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...]
    returns: str  # "single", "tuple" or "list"
    n_returns: int  # for "tuple"
    python: inspect.Signature

    def schema(self, *, prefix: str = "") -> str:
        """`(Tensor x, int n=2) -> (Tensor, Tensor)`; `prefix` is put first inside the parentheses."""
        parts = [prefix] if prefix else []
        kw_only = False
        for p in self.params:
            if p.kind == inspect.Parameter.KEYWORD_ONLY and not kw_only:
                parts.append("*")
                kw_only = True
            text = f"{p.schema_type} {p.name}"
            if p.default is not inspect.Parameter.empty:
                text += "=" + _default_text(p.default)
            parts.append(text)
        ret = {"single": "Tensor", "list": "Tensor[]"}.get(self.returns, "")
        if self.returns == "tuple":
            ret = "(" + ", ".join(["Tensor"] * self.n_returns) + ")"
        return f"({', '.join(parts)}) -> {ret}"


def _default_text(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_default_text(v) for v in value) + "]"
    return repr(value)


def _is_array(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # jax.typing.ArrayLike
        return any(_is_array(a) for a in typing.get_args(annotation))
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return str(name).rsplit(".", 1)[-1] in _ARRAY_NAMES


def _optional_of(annotation: Any) -> Any | None:
    """X for Optional[X] / X | None; None otherwise."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1 and len(typing.get_args(annotation)) == 2:
            return rest[0]
    return None


def _param_type(annotation: Any) -> str | None:
    inner = _optional_of(annotation)
    if inner is not None:
        base = _param_type(inner)
        return None if base is None or base.endswith("?") else base + "?"
    if _is_array(annotation):
        return "Tensor"
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, Sequence, typing.Sequence) or origin is getattr(typing, "Sequence", None):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if len(set(args)) == 1 and args[0] in (int, float):
            return _SCALARS[args[0]] + "[]"
    return None


def _return_kind(annotation: Any, fn_name: str) -> tuple[str, int]:
    if annotation is inspect.Signature.empty:
        raise TypeError(
            f"jax_op: {fn_name} has no return annotation; annotate it (`-> jax.Array`, "
            "`-> tuple[jax.Array, jax.Array]` or `-> list[jax.Array]`) so the op's schema can say what it returns"
        )
    if _is_array(annotation):
        return "single", 1
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple and args and Ellipsis not in args and all(_is_array(a) for a in args):
        return "tuple", len(args)
    if origin in (list, tuple, Sequence) and args and all(_is_array(a) for a in args if a is not Ellipsis):
        return "list", 0
    raise TypeError(
        f"jax_op: {fn_name} returns {annotation!r}; supported: an array, a fixed-length tuple of arrays, "
        "a list of arrays"
    )


def _each_annotation_evaluated(target: Callable[..., Any]) -> inspect.Signature:
    """The signature with each string annotation evaluated on its own where it can be (`float`, `int | None`), and
    kept as text where it cannot (`jax.Array` under `if TYPE_CHECKING: import jax`: recognised by name)."""
    sig = inspect.signature(target)
    scope = dict(getattr(target, "__globals__", {}))

    def evaluated(annotation: Any) -> Any:
        if not isinstance(annotation, str):
            return annotation
        try:
            return eval(annotation, scope)  # noqa: S307 - an annotation of the caller's own function
        except Exception:  # noqa: BLE001 - unresolvable names stay text
            return annotation

    params = [p.replace(annotation=evaluated(p.annotation)) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=evaluated(sig.return_annotation))


def read_signature(fn: Callable[..., Any]) -> Signature:
    target = inspect.unwrap(fn)
    name = getattr(target, "__qualname__", repr(target))
    try:
        sig = inspect.signature(target, eval_str=True)
    except (NameError, TypeError, AttributeError):
        sig = _each_annotation_evaluated(target)
    params = []
    for p in sig.parameters.values():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"jax_op: {name} takes *{p.name}; a custom op needs named parameters")
        schema_type = _param_type(p.annotation)
        if schema_type is None:
            raise TypeError(
                f"jax_op: parameter {p.name!r} of {name} is annotated {p.annotation!r}; supported: arrays (tensors), "
                "int, float, bool, str, sequences of int or float, and Optional of these"
            )
        params.append(Param(p.name, p.kind, schema_type, p.default))
    returns, n = _return_kind(sig.return_annotation, name)
    return Signature(tuple(params), returns, n, sig)
