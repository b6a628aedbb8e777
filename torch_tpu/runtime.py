"""Finds the PJRT plugin and owns the process's one PJRT client and compile cache.

Nothing here raises at import: a missing or broken plugin makes the device unavailable, and `status()` says why.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from torch_tpu import config

_lock = threading.Lock()
_state: _Runtime | None = None
_error: str | None = None


@dataclass
class _Runtime:
    client: Any  # torch_tpu._C.Client
    cache: Any  # torch_tpu._C.CompileCache
    devices: list[dict[str, Any]]  # visible devices, in torch index order
    host_heap: str = "unchanged"  # the C allocator policy set for a host-memory plugin (see keep_host_heap)


class PluginUnavailableError(RuntimeError):
    """No usable PJRT plugin: the message names the paths tried and how to fix it."""


def default_plugin_path() -> str | None:
    """The XLA-CPU plugin shipped by the pinned `xla-cpu-pjrt` wheel, if installed."""
    try:
        spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "xla_cpu_pjrt.so")


def plugin_candidates(cfg: config.Config) -> list[str]:
    if cfg.pjrt_plugin:
        return [cfg.pjrt_plugin]
    default = default_plugin_path()
    return [default] if default else []


def _is_cpu_plugin(path: str) -> bool:
    """Whether the plugin at `path` is XLA-CPU (judged by its file name, before it is loaded)."""
    return "cpu" in os.path.basename(path).lower()


def create_options(path: str, cfg: config.Config) -> dict[str, Any]:
    """Plugin-specific client options: device count on CPU, no 75% preallocation on GPU."""
    name = os.path.basename(path).lower()
    if _is_cpu_plugin(path):
        return {"cpu_device_count": cfg.cpu_devices}
    if "cuda" in name or "gpu" in name:
        return {"preallocate": False}
    if "tpu" in name:
        return {"ml_framework_name": "PyTorch", "ml_framework_version": "torch_tpu"}
    return {}


def _start() -> _Runtime:
    from torch_tpu import _C

    # XLA plugins log INFO lines to stderr at client creation; keep them quiet unless the user asked for logs.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    cfg = config.load()
    candidates = plugin_candidates(cfg)
    if not candidates:
        raise PluginUnavailableError(
            "no PJRT plugin found: the xla-cpu-pjrt wheel is not installed and TORCH_TPU_PJRT_PLUGIN is unset. "
            "Fix: `pip install xla-cpu-pjrt==0.0.1` or set TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so"
        )
    problems = []
    for path in candidates:
        host_heap = "unchanged"
        if cfg.keep_host_heap and _is_cpu_plugin(path):
            # Before the client starts its threads: XLA-CPU's buffers are host memory, and glibc's default of
            # mmap()ing large blocks and trimming freed ones costs ~25k page faults per GPT-2-small-like step.
            applied, detail = _C.keep_host_heap()
            host_heap = f"kept ({detail})" if applied else f"not kept ({detail})"
        try:
            client = _C.Client.create(path, create_options(path, cfg))
        except RuntimeError as exc:
            problems.append(f"{path}: {exc}")
            continue
        devices = client.devices()
        if cfg.visible_chips is not None:
            devices = [d for d in devices if d["index"] in cfg.visible_chips]
        cache = _C.CompileCache(client)
        cache.capacity = cfg.program_cache
        cache.allow_excess_precision = _xla_flag_true("xla_allow_excess_precision")
        if cfg.cache_dir:
            cache.disk_limit = cfg.cache_max_bytes
            refused = cache.set_directory(os.path.join(cfg.cache_dir, client.platform_name))
            if refused:  # its entries are native code: never run what another user could have written
                warnings.warn(f"torch_tpu: compile cache on disk disabled: {refused}", stacklevel=2)
        if cfg.dump_dir:
            cache.set_dump_directory(cfg.dump_dir)
        return _Runtime(client=client, cache=cache, devices=devices, host_heap=host_heap)
    raise PluginUnavailableError(
        "could not load a PJRT plugin; tried:\n  "
        + "\n  ".join(problems)
        + "\nFix: set TORCH_TPU_PJRT_PLUGIN to a valid PJRT plugin .so, or unset it to use the XLA-CPU wheel."
    )


def _xla_flag_true(name: str) -> bool:
    """Whether XLA_FLAGS sets the boolean flag `name` (--name, --name=true or --name=1)."""
    for flag in os.environ.get("XLA_FLAGS", "").split():
        key, _, value = flag.lstrip("-").partition("=")
        if key == name:
            return value.lower() in ("", "true", "1")
    return False


def get() -> _Runtime:
    """The started runtime; raises PluginUnavailableError (every time) when no plugin could be loaded."""
    global _state, _error
    with _lock:
        if _state is not None:
            return _state
        if _error is not None:
            raise PluginUnavailableError(_error)
        try:
            _state = _start()
        except PluginUnavailableError as exc:
            _error = str(exc)
            raise
        return _state


def is_available() -> bool:
    try:
        return len(get().devices) > 0
    except PluginUnavailableError:
        return False


def status() -> str:
    """'ok' or the reason the device is unavailable."""
    try:
        get()
    except PluginUnavailableError as exc:
        return str(exc)
    return "ok"
