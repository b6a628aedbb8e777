"""Makes `tpu` a PyTorch device: rename PrivateUse1, register torch.tpu, generate methods, start the backend."""

from __future__ import annotations

import sys
import threading
import types

import torch

from torch_tpu import _C, _dlpack, _op_policies, config, device_module, runtime
from torch_tpu._internal import public, tracing

_lock = threading.Lock()
_done = False


def _register_device_module() -> None:
    existing = getattr(torch, "tpu", None)
    if existing is None:
        torch._register_device_module("tpu", device_module)
        device_module.__class__ = device_module.TpuModule  # torch.tpu.eager_mode is a property
        public.install(device_module)
        return
    if existing is device_module:
        return
    # A torch that ships its own torch.tpu shim: make its functions ours.
    if isinstance(existing, types.ModuleType):
        for name in dir(device_module):
            if not name.startswith("__"):
                setattr(existing, name, getattr(device_module, name))
        sys.modules["torch.tpu"] = existing
        existing.__class__ = device_module.TpuModule
        public.install(existing)


def register() -> None:
    """Idempotent; safe to call from the autoload hook and from `import torch_tpu`."""
    global _done
    with _lock:
        if _done:
            return
        if torch._C._get_privateuse1_backend_name() != "tpu":
            torch.utils.rename_privateuse1_backend("tpu")
        _register_device_module()
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
        _dlpack.install()
        _op_policies.install()
        cfg = config.load()
        _C._set_fallback_policy(cfg.fallback)
        _C._set_eager_mode(cfg.eager_mode)
        try:
            rt = runtime.get()
        except runtime.PluginUnavailableError:
            rt = None  # device_count() stays 0; torch_tpu.runtime.status() says why
        if rt is not None:
            _C._backend_init(rt.client, rt.cache, [d["index"] for d in rt.devices])
            if cfg.host_kernels and rt.client.platform_name == "cpu":
                _C._enable_host_kernels(rt.client)  # False (XLA's own ops stay) when the plugin lacks FFI
            _C._register_fork_handler()  # forked children re-run torch.tpu._lazy_init, which raises there
            tracing.enable_if_requested(rt.cache, cfg.dump_dir)  # TORCH_TRACE: programs into the structured trace
        _done = True
