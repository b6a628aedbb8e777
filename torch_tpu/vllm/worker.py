"""vLLM's worker for tpu: vLLM's CPU worker (host threads, host memory for the scheduler and the sampler) whose model
runs on the tpu device, in the process's tpu, with the KV cache sized from the tpu's memory."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext

import torch
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_worker import init_worker_distributed_environment

from torch_tpu.vllm.model_runner import TpuModelRunner

logger = init_logger(__name__)


class TpuWorker(CPUWorker):
    def init_device(self) -> None:
        self.device = torch.device("tpu", self.local_rank if torch.tpu.device_count() > 1 else 0)
        torch.tpu.set_device(self.device)
        init_method = self.distributed_init_method
        os.environ["VLLM_DIST_IDENT"] = (
            os.path.basename(init_method.removeprefix("file://"))
            if init_method.startswith("file://")
            else init_method.split(":")[-1]
        )
        init_worker_distributed_environment(
            self.vllm_config, self.rank, self.distributed_init_method, self.local_rank, current_platform.dist_backend
        )
        set_random_seed(self.model_config.seed)
        self.model_runner = TpuModelRunner(self.vllm_config, self.device)

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager[None]:
        return nullcontext()  # no sleep mode: weights and cache live in torch_tpu's own allocations

    def determine_available_memory(self) -> int:
        """Bytes for the KV cache: `kv_cache_memory_bytes` when given, else `gpu_memory_utilization` of the tpu's
        memory less what the weights and the warm-up already hold there."""
        if self._should_warm_up_model():
            self.model_runner.warming_up_model()
        explicit = self.cache_config.kv_cache_memory_bytes
        if explicit is not None:
            return int(explicit)
        total = torch.tpu.get_device_properties(self.device).total_memory
        budget = int(total * self.cache_config.gpu_memory_utilization) - torch.tpu.memory_allocated(self.device)
        if budget <= 0:
            raise ValueError(
                f"no tpu memory left for the KV cache: {torch.tpu.memory_allocated(self.device)} bytes are in use of "
                f"{total} (gpu_memory_utilization={self.cache_config.gpu_memory_utilization}); raise "
                "--gpu-memory-utilization or set --kv-cache-memory-bytes"
            )
        logger.info("KV cache on %s: %d bytes", self.device, budget)
        return budget
