"""Compiled mode: `torch.compile` on tpu.

Importing this package is cheap (no Dynamo import). `install()` runs at `import torch_tpu`: it patches the default
backend's entry (so `torch.compile(model)` on tpu tensors uses the "tpu" backend instead of Inductor's Pallas route)
and arranges for the rest (backend "tpu" in Dynamo's registry, torch_tpu's DeviceInterface) to be set up right after
`torch._dynamo` is first imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

from torch_tpu.compile import counters

_installed_dynamo = False


def _install_dynamo() -> None:
    """Backend "tpu" in Dynamo's registry and torch_tpu's DeviceInterface for "tpu" (once, after torch._dynamo)."""
    global _installed_dynamo
    if _installed_dynamo:
        return
    _installed_dynamo = True
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    from torch_tpu.compile import device_interface
    from torch_tpu.compile.backend import tpu_backend

    device_interface.install()
    if "tpu" not in _COMPILER_FNS:
        register_backend(compiler_fn=tpu_backend, name="tpu")


class _Loader(importlib.abc.Loader):
    """Wraps a module's loader to run a hook once the module finished executing."""

    def __init__(self, inner: importlib.abc.Loader, hook: Callable[[], None]) -> None:
        self._inner = inner
        self._hook = hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._hook()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the real loader
        return getattr(self._inner, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `_install_dynamo` right after `torch._dynamo` is imported (importing it eagerly costs seconds)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, _install_dynamo)
        return spec


def _route_default_backend() -> None:
    """`torch.compile(model)` (backend "inductor") hands graphs over tpu tensors to the tpu backend; graphs over
    other devices still go to Inductor unchanged. TorchTPU's backend options given to it (`options={...}` without a
    backend, see `torch_tpu.compile.options`) are kept apart from Inductor's and reach the tpu backend only."""
    wrapper = torch._TorchCompileInductorWrapper  # type: ignore[attr-defined]
    if getattr(wrapper.__call__, "_torch_tpu_routed", False):
        return
    inductor_call = wrapper.__call__
    inductor_apply_options = wrapper.apply_options

    def apply_options(self: Any, options: dict[str, Any] | None) -> None:
        from torch_tpu.compile import options as backend_options

        ours, rest = backend_options.split(options)
        if ours:
            backend_options.parse(ours)  # a bad value fails at torch.compile(), as it would on the tpu backend
            self._torch_tpu_options = ours
        inductor_apply_options(self, rest)

    def __call__(self: Any, model_: torch.fx.GraphModule, inputs_: Sequence[Any], **kwargs: Any) -> Any:  # noqa: N807
        from torch_tpu.compile.backend import tpu_backend, uses_tpu

        if uses_tpu(model_, inputs_):
            _install_dynamo()
            return tpu_backend(model_, inputs_, options=getattr(self, "_torch_tpu_options", None))
        return inductor_call(self, model_, inputs_, **kwargs)

    __call__._torch_tpu_routed = True  # type: ignore[attr-defined]
    wrapper.__call__ = __call__
    wrapper.apply_options = apply_options


def install() -> None:
    _route_default_backend()
    if "torch._dynamo" in sys.modules:
        _install_dynamo()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


__all__ = ["install", "counters"]
