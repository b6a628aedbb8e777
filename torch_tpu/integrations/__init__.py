"""Adapters for libraries that pick devices from fixed tables of their own (not through `torch.accelerator`).

Each adapter runs once, right after the module it patches finishes importing (or at once if it already has), so a
script needs no extra line; `TORCH_TPU_INTEGRATIONS=0` leaves every library untouched.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any


def _run(name: str, action: Callable[[ModuleType], object], module: ModuleType) -> None:
    try:
        action(module)
    except Exception as exc:  # an adapter must never break the library's import
        warnings.warn(f"torch_tpu could not adapt {name} to the tpu device: {type(exc).__name__}: {exc}", stacklevel=3)


class _ThenAdapt(importlib.abc.Loader):
    """Wraps a module's loader: executes the module as usual, then runs the adapter on it."""

    def __init__(self, inner: importlib.abc.Loader, name: str, action: Callable[[ModuleType], object]) -> None:
        self._inner = inner
        self._name = name
        self._action = action

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _run(self._name, self._action, module)

    def __getattr__(self, attr: str) -> Any:  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._inner, attr)


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, action: Callable[[ModuleType], object]) -> None:
        self.name = name
        self.action = action
        self._searching = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self._searching:
            return None
        self._searching = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return None
        sys.meta_path.remove(self)  # once: a module is imported one time
        spec.loader = _ThenAdapt(spec.loader, fullname, self.action)
        return spec


def after_import(name: str, action: Callable[[ModuleType], object]) -> None:
    """Runs `action(module)` once the module `name` (dotted names too) has been imported: now, if it already is."""
    module = sys.modules.get(name)
    if module is None:
        sys.meta_path.insert(0, _AfterImport(name, action))
    elif getattr(module.__spec__, "_initializing", False):
        warnings.warn(
            f"torch_tpu was imported while {name} was being imported, so it cannot adapt it to the tpu device; "
            "import torch (or torch_tpu) first",
            stacklevel=2,
        )
    else:
        _run(name, action, module)


def install() -> None:
    from torch_tpu import config
    from torch_tpu.integrations import accelerate

    if not config.load().integrations:
        return
    after_import("accelerate.state", accelerate.adapt)
