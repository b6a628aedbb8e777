"""The vLLM platform for tpu: PyTorch's PrivateUse1 device, the `tpu_dist` collectives, this package's worker and
attention backend.

It builds on vLLM's CPU platform for everything that happens on the host (scheduling, sampling from the logits, the
CPU-side kernels vLLM imports), and is out of tree (`PlatformEnum.OOT`) so that vLLM's layers take their PyTorch
(`forward_native`) paths: the CPU platform's C++ kernels read host addresses that tpu tensors do not have.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch
from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import PlatformEnum

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

logger = init_logger(__name__)

# vllm_config.additional_config's entry that turns on the runner's step replay (set for vLLM's compiled mode).
REPLAY_KEY = "torch_tpu_replay_steps"
# Tokens per KV-cache block unless the user asks for another size: small blocks waste little cache on short requests.
DEFAULT_BLOCK_SIZE = 16


class TpuPlatform(CpuPlatform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"
    dispatch_key: str = "PrivateUse1"
    ray_device_key: str = "TPU"
    dist_backend: str = "tpu_dist"
    device_control_env_var: str = "TPU_VISIBLE_CHIPS"
    simple_compile_backend: str = "tpu"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.tpu.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.tpu.get_device_properties(device_id).total_memory

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.tpu.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.tpu.manual_seed_all(seed)

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "vllm.distributed.device_communicators.base_device_communicator.DeviceCommunicatorBase"

    @classmethod
    def get_attn_backend_cls(
        cls,
        selected_backend: AttentionBackendEnum,
        attn_selector_config: AttentionSelectorConfig,
        num_heads: int | None = None,
    ) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError("torch_tpu's vLLM platform has no MLA or sparse attention backend yet")
        from torch_tpu.vllm.attention import BACKEND_NAME, TpuPagedAttentionBackend

        if selected_backend is not None and selected_backend.name != BACKEND_NAME:
            logger.info("Attention backend %s is not available on tpu; using %s.", selected_backend.name, BACKEND_NAME)
        return f"{TpuPagedAttentionBackend.__module__}.{TpuPagedAttentionBackend.__qualname__}"

    @classmethod
    def check_and_update_config(cls, vllm_config: VllmConfig) -> None:
        from vllm.config import CompilationMode

        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = DEFAULT_BLOCK_SIZE
        vllm_config.scheduler_config.async_scheduling = False

        parallel_config = vllm_config.parallel_config
        if parallel_config.pipeline_parallel_size > 1:
            raise NotImplementedError(
                "torch_tpu's vLLM platform has no pipeline parallelism yet (its runner does not pass intermediate "
                "tensors between stages); use tensor parallelism (--tensor-parallel-size) instead"
            )
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = "torch_tpu.vllm.worker.TpuWorker"
        parallel_config.enable_dbo = False
        # The engine core and the workers of tensor or pipeline parallelism run in child processes, which must start
        # afresh: a forked PJRT client is unusable (vLLM's CPU platform spawns them for the same kind of reason).
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"

        compilation_config = vllm_config.compilation_config
        compilation_config.cudagraph_capture_sizes = []
        if compilation_config.mode != CompilationMode.NONE and vllm_config.lora_config is None:
            # vLLM's own compiler (piecewise graphs for inductor and CUDA graphs) has no tpu backend, and a Dynamo
            # graph of the model cannot be replayed (its attention reads the KV cache and the step's tables from
            # vLLM's forward context): the runner replays whole steps instead (model_runner.StepReplay).
            if isinstance(vllm_config.additional_config, dict):
                vllm_config.additional_config[REPLAY_KEY] = True
        compilation_config.mode = CompilationMode.NONE
        vllm_config.profiler_config.torch_profiler_dump_cuda_time_total = False
