"""vLLM's model runner for tpu.

The host keeps what vLLM's CPU runner keeps on the host: the persistent batch, block tables, slot mappings and the
sampler's state (vLLM's buffers whose device copy is replaced by the host copy, as its CPU runner does). The tpu holds
the weights, the KV cache and the forward pass: token ids and positions are copied in, each step's logits copied
out, and the sampler runs on the host exactly as on vLLM's CPU platform.

With vLLM's compilation on (no `enforce_eager`), a step's forward pass is replayed (torch_tpu's capture, as for
torch.compile graphs, torch_tpu/compile/replay.py): the forward is a function of the token ids, the positions, the
attention tables, the KV caches and the weights, all passed as its inputs, so after one recorded step of a given
size (token bucket and context bucket) the next steps of that size run as one device execution without dispatching
a single op. The attention reads its tables and cache through vLLM's forward context, not through arguments: that is
why a Dynamo graph of the model cannot be replayed safely, and why the runner names those tensors itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from vllm.forward_context import get_forward_context
from vllm.logger import init_logger
from vllm.platforms import CpuArchEnum
from vllm.platforms.cpu import CpuPlatform
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheConfig
from vllm.v1.worker.cpu_model_runner import CPUModelRunner, _torch_cuda_wrapper
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.utils import bind_kv_cache

from torch_tpu.compile.replay import MAX_FAILED, Replayed
from torch_tpu.vllm.attention import TpuPagedAttentionMetadata, kv_cache_shape, token_bucket
from torch_tpu.vllm.platform import REPLAY_KEY

logger = init_logger(__name__)


class TpuModelRunner(CPUModelRunner):
    """vLLM's CPU runner (its bookkeeping on the host, `self.device` is the CPU) whose model and KV cache live on
    `model_device`."""

    def __init__(self, vllm_config: Any, model_device: torch.device) -> None:
        self.model_device = model_device
        # Set by the platform (check_and_update_config) when vLLM's compilation was asked for.
        extra = vllm_config.additional_config
        self.replay_steps = isinstance(extra, dict) and bool(extra.get(REPLAY_KEY))
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
        forward, compute_logits = self.model.forward, self.model.compute_logits
        step = StepReplay(forward, compute_logits, self.model, lambda: self.kv_caches) if self.replay_steps else None
        self.model.forward = _inputs_to_device(step or forward, self.model_device)
        self.model.compute_logits = _logits_to_host(compute_logits, self.model_device, step)

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


class StepReplay:
    """The model's forward, replayed per step size (see the module docstring). A step it cannot replay (no attention
    tables: vLLM's profiling and dummy runs; embeddings or intermediate tensors as inputs; a capture torch_tpu
    refuses) runs through the fused engine as in eager mode."""

    def __init__(
        self,
        forward: Callable[..., Any],
        compute_logits: Callable[..., Any],
        model: torch.nn.Module,
        kv_caches: Callable[[], list[Any]],
    ) -> None:
        self.forward = forward
        self.compute_logits = compute_logits
        self.model = model
        self.kv_caches = kv_caches
        self.graphs: dict[tuple[Any, ...], Replayed] = {}
        self.reported: set[str] = set()
        # A decode step's logits of every row (computed in the replayed program), and how many rows are real: vLLM
        # samples exactly those rows next, and `compute_logits` hands them over instead of a second execution.
        self.decode_logits: tuple[torch.Tensor, int] | None = None
        # Where each weight lives: its owner's parameter or buffer table and its name there (see _weights).
        self.weight_slots: list[tuple[dict[str, Any], str]] = []

    def __call__(
        self, input_ids: torch.Tensor | None, positions: torch.Tensor | None, *args: Any, **kwargs: Any
    ) -> Any:
        self.decode_logits = None
        step = self._tables()
        extra = [v for v in (*args, *kwargs.values()) if v is not None]
        if step is None or extra or input_ids is None or positions is None:
            return self.forward(input_ids, positions, *args, **kwargs)
        tables, decode_rows = step
        key = (tuple(input_ids.shape), tuple(positions.shape), decode_rows is None, *(tuple(t.shape) for t in tables))
        graph = self.graphs.get(key)
        if graph is None:
            graph = self.graphs[key] = Replayed(self._step_fn(decode_rows is not None))
        weights = self._weights()
        caches = [t for t in self.kv_caches() if isinstance(t, torch.Tensor)]
        out = graph([input_ids, positions, *tables, *caches, *weights])
        if decode_rows is not None:
            out, logits = out
            self.decode_logits = (logits, decode_rows)
            # vLLM picks the rows to sample (`hidden_states[logits_indices]`) before compute_logits, which takes this
            # step's logits instead: on the host that pick is a view. On the device it would be a gather (and an
            # index copy) left in the open graph, unused but kept for its bounds check, one more each step until a
            # later host read runs them all (31 after a 32-token generate, a program of its own to compile).
            out = out.cpu()
        # A step's first run at a new size is refused (it lowers new op structures); a size whose captures keep
        # being refused (collectives of tensor parallelism run outside the recording) stays eager: said once.
        if graph.failed >= MAX_FAILED and graph.last_refusal not in self.reported:
            self.reported.add(graph.last_refusal)
            logger.warning("torch_tpu cannot replay these steps (%s): they run eagerly", graph.last_refusal)
        return out

    def _weights(self) -> list[torch.Tensor]:
        """The model's parameters and buffers, read from their owners' tables every step: a weight update that
        replaces a parameter (not only one that writes into it) must not leave the replay reading the old tensor.
        Walking the module tree once, not every step, saves about 0.1 ms per step on a two-layer model."""
        try:
            weights = [table[name] for table, name in self.weight_slots]
        except KeyError:
            weights = []
        if not weights or any(w is None for w in weights):
            seen: set[int] = set()
            self.weight_slots = []
            for module in self.model.modules():
                for table in (module._parameters, module._buffers):
                    for name, tensor in table.items():
                        if tensor is not None and id(tensor) not in seen:
                            seen.add(id(tensor))
                            self.weight_slots.append((table, name))
            weights = [table[name] for table, name in self.weight_slots]
        return weights

    def _step_fn(self, with_logits: bool) -> Callable[..., Any]:
        """The captured function: the forward pass on (ids, positions), the rest of the inputs read through vLLM's
        forward context and the model; with the logits of every row for a decode step."""

        def step(ids: torch.Tensor, positions: torch.Tensor, *_: Any) -> Any:
            hidden = self.forward(ids, positions)
            return (hidden, self.compute_logits(hidden)) if with_logits else hidden

        return step

    def take_decode_logits(self, rows: int) -> torch.Tensor | None:
        """This decode step's logits when vLLM asks for `rows` rows (all of the step's tokens, in order), else None."""
        pending, self.decode_logits = self.decode_logits, None
        if pending is None or pending[1] != rows:
            return None
        return pending[0][:rows]

    @staticmethod
    def _tables() -> tuple[list[torch.Tensor], int | None] | None:
        """The step's attention tables (one per KV-cache group) and, for a decode step, its number of tokens; None
        outside a step with attention."""
        metadata = get_forward_context().attn_metadata
        if not isinstance(metadata, dict) or not metadata:
            return None
        tables: dict[int, torch.Tensor] = {}
        decode = True
        rows = 0
        for m in metadata.values():
            if not isinstance(m, TpuPagedAttentionMetadata):
                return None
            for table in m.tables():
                tables.setdefault(id(table), table)
            decode = decode and m.decode_only
            rows = m.num_actual_tokens
        return list(tables.values()), rows if decode else None


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


def _logits_to_host(
    compute_logits: Callable[..., Any], device: torch.device, step: StepReplay | None
) -> Callable[..., Any]:
    """The model's `compute_logits`, run on the device (or taken from a replayed decode step, which computed them)
    and returning host logits for vLLM's host-side sampler."""

    def on_device(hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        logits = step.take_decode_logits(hidden_states.shape[0]) if step is not None and not (args or kwargs) else None
        if logits is None:
            logits = compute_logits(hidden_states.to(device), *args, **kwargs)
        return logits.cpu() if isinstance(logits, torch.Tensor) else logits

    return on_device
