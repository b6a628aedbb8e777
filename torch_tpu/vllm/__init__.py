"""vLLM on the tpu device: an out-of-tree vLLM platform (entry point `vllm.platform_plugins`, name `tpu`).

vLLM calls `register()` while it picks its platform; the platform, worker, model runner and attention backend live in
the modules beside this one and import vLLM, so nothing here is imported unless vLLM asks for it. The platform takes
over whenever torch_tpu's device is available; `VLLM_PLUGINS=""` (vLLM's own switch) keeps vLLM on its CPU platform.
See docs/vllm.md.
"""

from __future__ import annotations


def register() -> str | None:
    """The qualified name of the tpu platform class, or None where torch_tpu has no device (vLLM then goes on)."""
    try:
        import torch

        import torch_tpu  # noqa: F401  (registers the tpu device)

        if not torch.tpu.is_available():
            return None
    except Exception:  # a missing or broken PJRT plugin means no tpu platform, not a failed vLLM start
        return None
    return "torch_tpu.vllm.platform.TpuPlatform"
