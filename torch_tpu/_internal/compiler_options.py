"""TorchTPU's `torch.tpu.compiler.custom_compiler_options(options)`: XLA compile options for the programs that
materialize inside a block.

`options` maps XLA option names to values (str, bool, int or float). Two names are torch_tpu's own spellings of
ExecutableBuildOptions fields: `xla_optimization_level` and `xla_memory_fitting_level`, each "O0".."O3"; every other
name is an XLA DebugOptions field (`xla_cpu_enable_fast_math`, `xla_tpu_...`), handed to the plugin through
CompileOptions.env_option_overrides: the plugin rejects a name it does not know when it compiles (a RuntimeError
naming the option). Blocks nest; an inner block's value of a name wins. Entering and leaving a block runs the pending
fused graphs, so the ops recorded inside it compile with its options and nothing recorded before or after does. The
options are part of every compile-cache key (memory and disk) and of replayed `torch.compile` graphs' guards. Not
allowed inside a `torch.compile`d region: a compiled graph has one set of options.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from torch_tpu import _C, runtime

_EFFORT = ("O0", "O1", "O2", "O3")
_lock = threading.Lock()
_stack: list[dict[str, Any]] = []


def _checked(options: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(options, Mapping):
        raise TypeError(f"custom_compiler_options takes a dict of option names to values, not {type(options).__name__}")
    out: dict[str, Any] = {}
    for name, value in options.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"compiler option names must be non-empty strings, not {name!r}")
        if not isinstance(value, (str, bool, int, float)):
            raise TypeError(f"compiler option {name} must be a str, bool, int or float, not {type(value).__name__}")
        if name in ("xla_optimization_level", "xla_memory_fitting_level") and value not in _EFFORT:
            raise ValueError(f"{name} must be one of {', '.join(_EFFORT)}, not {value!r}")
        out[name] = value
    return out


def _apply() -> None:
    merged: dict[str, Any] = {}
    for layer in _stack:
        merged.update(layer)
    runtime.get().cache.option_overrides = list(merged.items())


def current() -> dict[str, Any]:
    """The options programs compile with now (the merged blocks in effect)."""
    return dict(runtime.get().cache.option_overrides)


@contextlib.contextmanager
def custom_compiler_options(options: Mapping[str, Any]) -> Iterator[None]:
    """Compiles the programs that run inside the block with `options` added to torch_tpu's own."""
    if torch.compiler.is_compiling():
        raise RuntimeError(
            "torch.tpu.compiler.custom_compiler_options cannot be used inside a torch.compile'd region: a compiled "
            "graph is one program with one set of compile options; enter the block around the compiled call"
        )
    layer = _checked(options)
    _C._flush()  # what was recorded before the block compiles without its options
    with _lock:
        _stack.append(layer)
        _apply()
    try:
        yield
    finally:
        try:
            _C._flush()  # what was recorded inside compiles with them
        finally:
            with _lock:
                _stack.remove(layer)
                _apply()


__all__ = ["custom_compiler_options"]
