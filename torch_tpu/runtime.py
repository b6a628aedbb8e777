"""Finds the PJRT plugin and owns the process's one PJRT client and compile cache.

Nothing here raises at import: a missing or broken plugin makes the device unavailable, and `status()` says why.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from torch_tpu import config, plugins

_lock = threading.Lock()
_state: _Runtime | None = None
_error: str | None = None


@dataclass
class _Runtime:
    client: Any  # torch_tpu._C.Client
    cache: Any  # torch_tpu._C.CompileCache
    devices: list[dict[str, Any]]  # visible devices, in torch index order
    host_heap: str = "unchanged"  # the C allocator policy set for a host-memory plugin (see keep_host_heap)
    plugin_kind: str = "cpu"  # tpu / cuda / cpu / path (torch_tpu.plugins)
    chosen_because: str = ""  # which wheel or variable, and by what rule
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (plugin path, why it was passed over)


class PluginUnavailableError(RuntimeError):
    """No usable PJRT plugin: the message names the paths tried and how to fix it."""


def default_plugin_path() -> str | None:
    """The XLA-CPU plugin shipped by the pinned `xla-cpu-pjrt` wheel, if installed."""
    cpu = [p for p in plugins.installed() if p.kind == "cpu"]
    return cpu[0].path if cpu else None


def _start() -> _Runtime:
    from torch_tpu import _C

    # XLA plugins log INFO lines to stderr at client creation; keep them quiet unless the user asked for logs.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    cfg = config.load()
    try:
        choice = plugins.choose(cfg.pjrt_plugin)
    except LookupError as exc:
        raise PluginUnavailableError(str(exc)) from None
    rejected = [(p.path, reason) for p, reason in choice.passed_over]
    if not choice.candidates:
        raise PluginUnavailableError(
            "no PJRT plugin found: the xla-cpu-pjrt wheel is not installed and TORCH_TPU_PJRT_PLUGIN is unset. "
            "Fix: `pip install xla-cpu-pjrt==0.0.1` or set TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so"
        )
    load_errors: list[str] = []
    for plugin in choice.candidates:
        host_heap = "unchanged"
        if cfg.keep_host_heap and config.platform(plugin.kind).host_memory:
            # Before the client starts its threads: XLA-CPU's buffers are host memory, and glibc's default of
            # mmap()ing large blocks and trimming freed ones costs ~25k page faults per GPT-2-small-like step.
            applied, detail = _C.keep_host_heap()
            host_heap = f"kept ({detail})" if applied else f"not kept ({detail})"
        try:
            client = _C.Client.create(plugin.path, config.client_options(plugin.kind, cfg))
        except RuntimeError as exc:
            rejected.append((plugin.path, f"load error: {exc}"))
            load_errors.append(f"{plugin.path} (load error: {exc})")
            continue
        if load_errors:  # hardware was there but its plugin did not load: say so, then run on what did
            warnings.warn(f"torch_tpu: running on the {plugin.kind} plugin; {'; '.join(load_errors)}", stacklevel=2)
        return _started(client, cfg, host_heap, plugin, f"{plugin.source}, chosen by {choice.why}", rejected)
    raise PluginUnavailableError(
        "could not load a PJRT plugin; tried:\n  "
        + "\n  ".join(f"{path}: {why}" for path, why in rejected)
        + "\nFix: set TORCH_TPU_PJRT_PLUGIN to a valid PJRT plugin .so, or unset it to use the XLA-CPU wheel."
    )


def _started(
    client: Any, cfg: config.Config, host_heap: str, plugin: plugins.Plugin, why: str, rejected: list[tuple[str, str]]
) -> _Runtime:
    from torch_tpu import _C

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
            warnings.warn(f"torch_tpu: compile cache on disk disabled: {refused}", stacklevel=3)
    if cfg.dump_dir:
        cache.set_dump_directory(cfg.dump_dir)
    return _Runtime(client, cache, devices, host_heap, plugin.kind, why, rejected)


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
