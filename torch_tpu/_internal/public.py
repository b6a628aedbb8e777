"""torch.tpu's submodules (`torch.tpu.ops`, `torch.tpu.optimizers`, ...), as TorchTPU names them.

Each public submodule is a small module registered in `sys.modules` and on `torch.tpu`; it serves the names its
implementation module under `torch_tpu._internal` lists in `__all__`, imported on first use (so `import torch` stays
cheap), and nothing else. Names listed in PROPERTIES are module properties: read and assigned through the public
module, they read the implementation's attribute and assign through its `set_<name>` function.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

SUBMODULES: dict[str, str] = {
    "compiler": "torch_tpu._internal.compiler_options",
    "distributed": "torch_tpu._internal.distributed",
    "ops": "torch_tpu._internal.ops",
    "optimizers": "torch_tpu._internal.optimizers",
    "pallas": "torch_tpu._internal.pallas",
    "profiler": "torch_tpu._internal.profiler",
}

PROPERTIES: dict[str, tuple[str, ...]] = {
    "distributed": ("window_num_stripes", "window_stripe_chunk_mb"),
}


class _Submodule(types.ModuleType):
    """A public submodule: forwards the implementation's `__all__`, imported on first use."""

    __impl_name__: str

    def _impl(self) -> types.ModuleType:
        return importlib.import_module(type(self).__impl_name__)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            impl = self._impl()
        except ModuleNotFoundError as e:
            if e.name != type(self).__impl_name__:
                raise
            impl = None
        if impl is None or name not in getattr(impl, "__all__", ()):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return getattr(impl, name)

    def __dir__(self) -> list[str]:
        try:
            return sorted(getattr(self._impl(), "__all__", ()))
        except ModuleNotFoundError:
            return []


def _forwarding_property(name: str) -> property:
    def get(module: _Submodule) -> Any:
        try:
            return getattr(module._impl(), name)
        except ModuleNotFoundError as e:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from e

    def set_(module: _Submodule, value: Any) -> None:
        getattr(module._impl(), f"set_{name}")(value)

    return property(get, set_)


def install(parent: types.ModuleType) -> None:
    """Creates torch.tpu.<name> for every row of SUBMODULES on `parent`, torch.tpu's module (idempotent)."""
    for short, impl in SUBMODULES.items():
        full = f"torch.tpu.{short}"
        if isinstance(sys.modules.get(full), _Submodule):
            continue
        namespace: dict[str, Any] = {"__impl_name__": impl}
        for prop in PROPERTIES.get(short, ()):
            namespace[prop] = _forwarding_property(prop)
        cls = type(f"_{short.capitalize()}Module", (_Submodule,), namespace)
        module = cls(full, f"TorchTPU's `{full}` (implemented in `{impl}`).")
        sys.modules[full] = module
        setattr(parent, short, module)
