"""vLLM on the tpu device: an out-of-tree vLLM platform (entry point `vllm.platform_plugins`, name `tpu`).

vLLM calls `register()` while it picks its platform; the platform, worker, model runner and attention backend live in
the modules beside this one and import vLLM, so nothing here is imported unless vLLM asks for it. The platform takes
over whenever torch_tpu's device is available; `VLLM_PLUGINS=""` (vLLM's own switch) keeps vLLM on its CPU platform.
See docs/guide/serving.md.
"""

from __future__ import annotations


def register() -> str | None:
    """The qualified name of the tpu platform class, or None where torch_tpu finds no PJRT plugin for this host (vLLM
    then goes on to its other platforms). It only looks for a plugin; the worker checks the device when it starts."""
    try:
        from torch_tpu import config, plugins

        if not plugins.choose(config.load().pjrt_plugin).candidates:
            return None
    except Exception:  # a broken setting means no tpu platform, not a failed vLLM start
        return None
    return "torch_tpu.vllm.platform.TpuPlatform"
