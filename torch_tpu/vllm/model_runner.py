"""vLLM's model runner for tpu.

The host keeps what vLLM's CPU runner keeps on the host: the persistent batch, block tables, slot mappings and the
sampler's state (vLLM's buffers whose device copy is replaced by the host copy, as its CPU runner does). The tpu holds
the weights, the KV cache and the forward pass: token ids and positions are copied in, each step's logits copied
out, and the sampler runs on the host exactly as on vLLM's CPU platform.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from vllm.logger import init_logger
from vllm.platforms import CpuArchEnum
from vllm.platforms.cpu import CpuPlatform
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheConfig
from vllm.v1.worker.cpu_model_runner import CPUModelRunner, _torch_cuda_wrapper
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.utils import bind_kv_cache

from torch_tpu.vllm.attention import kv_cache_shape, token_bucket

logger = init_logger(__name__)


class TpuModelRunner(CPUModelRunner):
    """vLLM's CPU runner (its bookkeeping on the host, `self.device` is the CPU) whose model and KV cache live on
    `model_device`."""

    def __init__(self, vllm_config: Any, model_device: torch.device) -> None:
        self.model_device = model_device
        # CPUModelRunner.__init__ less its first step, which turns torch.accelerator.synchronize and empty_cache into
        # no-ops for the whole process: here the accelerator is the tpu, and those calls must keep working.
        with _torch_cuda_wrapper():
            GPUModelRunner.__init__(self, vllm_config, torch.device("cpu"))
        self.use_cuda_graph = False
        self._postprocess_tensors()
        # The sampler runs on host logits: it takes the CPU platform's path (per-request Gumbel noise from each
        # request's seed), so that a seeded request samples the same tokens as on vLLM's CPU platform.
        sampler = self.sampler.topk_topp_sampler
        if CpuPlatform.get_cpu_architecture() not in (CpuArchEnum.RISCV, CpuArchEnum.POWERPC):
            sampler.forward = sampler.forward_cpu

    def load_model(self, load_dummy_weights: bool = False) -> None:
        super().load_model(load_dummy_weights)
        self.model.forward = _inputs_to_device(self.model.forward, self.model_device)
        self.model.compute_logits = _logits_to_host(self.model.compute_logits, self.model_device)

    def initialize_kv_cache_tensors(
        self, kv_cache_config: KVCacheConfig, kernel_block_sizes: list[int], kv_cache_allocation_context: Any = None
    ) -> dict[str, torch.Tensor]:
        """One tensor per attention layer, in the layout of torch_tpu's attention backend (`kv_cache_shape`), instead
        of vLLM's byte buffer viewed per layer: a tpu tensor's bytes are not reinterpreted in place."""
        kv_caches: dict[str, torch.Tensor] = {}
        for group in kv_cache_config.kv_cache_groups:
            spec = group.kv_cache_spec
            if not isinstance(spec, AttentionSpec):
                raise NotImplementedError(f"torch_tpu's vLLM runner has no KV cache of kind {type(spec).__name__}")
            for tensor in kv_cache_config.kv_cache_tensors:
                for name in tensor.layers:
                    if name not in group.layer_names:
                        continue
                    num_blocks = kv_cache_config.num_blocks_of(tensor)
                    shape = kv_cache_shape(num_blocks, spec.block_size, spec.num_kv_heads, spec.head_size)
                    kv_caches[name] = torch.zeros(shape, dtype=spec.dtype, device=self.model_device)
        for name, target in self.shared_kv_cache_layers.items():
            kv_caches[name] = kv_caches[target]
        bind_kv_cache(
            kv_caches,
            self.compilation_config.static_forward_context,
            self.kv_caches,
            1,
            kv_cache_groups=kv_cache_config.kv_cache_groups,
            layer_kv_caches=kv_caches,
        )
        return kv_caches

    def _zero_block_ids(self, block_ids: list[int]) -> None:
        # Blocks are zeroed so that a kernel reading a whole block never meets stale bytes; torch_tpu's attention
        # masks every slot past a request's length before the softmax, so a reused block needs no clearing.
        pass


def _inputs_to_device(forward: Callable[..., Any], device: torch.device) -> Callable[..., Any]:
    """The model's `forward`, given the runner's host tensors (token ids, positions, embeddings) on the device,
    padded to `token_bucket` rows as the attention tables are; the hidden states come back unpadded."""

    def on_device(
        input_ids: torch.Tensor | None = None, positions: torch.Tensor | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        embeds = kwargs.get("inputs_embeds")
        rows = next(t.shape[0] for t in (input_ids, positions, embeds) if isinstance(t, torch.Tensor))
        padded = token_bucket(rows)

        def move(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            if t.shape[0] == rows and padded > rows:
                t = torch.cat([t, t.new_zeros((padded - rows, *t.shape[1:]))])
            return t.to(device)

        kwargs = {k: move(v) if k == "inputs_embeds" else v for k, v in kwargs.items()}
        out = forward(move(input_ids), move(positions), *args, **kwargs)
        return out[:rows] if isinstance(out, torch.Tensor) else out

    return on_device


def _logits_to_host(compute_logits: Callable[..., Any], device: torch.device) -> Callable[..., Any]:
    """The model's `compute_logits`, run on the device and returning host logits for vLLM's host-side sampler."""

    def on_device(hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        logits = compute_logits(hidden_states.to(device), *args, **kwargs)
        return logits.cpu() if isinstance(logits, torch.Tensor) else logits

    return on_device
