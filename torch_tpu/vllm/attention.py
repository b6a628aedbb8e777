"""Paged attention for vLLM on tpu, from lowered PyTorch ops (so it runs inside torch_tpu's fused graphs and under
`torch.compile`).

The KV cache of a layer is one tensor `[num_blocks * block_size, 2, num_kv_heads, head_size]`: one row per token slot
(slot = block * block_size + offset, vLLM's slot numbering) holding its key and its value. A step

1. writes its new keys and values at their slots (one `index_copy_` into the whole cache, which XLA performs in place
   on the donated buffer: writing through a key or value view would copy the cache every step);
2. attends over each request's context with the causal mask `context position <= token position`, grouped-query
   heads sharing their KV head. S is the longest context in the batch, rounded up to a power of two so that growing
   contexts reuse one compiled graph. A decode step (one token per request) gathers, for every token, the slots of
   its request's context `[num_tokens, S]`; a step with longer queries (prefill, chunked prefill) gathers each
   request's context once `[requests, S]` and attends with matrix products over the request's queries laid out as
   `[requests, Q]` rows (Q the longest query, rounded up to a power of two): gathering the context per token would
   copy it once for each of a prompt's tokens.

The host builds the slot indices from vLLM's block table once per step for all layers (one copy to the device each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)
from vllm.v1.attention.backends.registry import AttentionBackendEnum

# vLLM's attention layers look their backend up by name in AttentionBackendEnum.
BACKEND_NAME = "TPU_PAGED"


def kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int, head_size: int) -> tuple[int, ...]:
    """The layout of one layer's KV cache (see the module docstring)."""
    return (num_blocks * block_size, 2, num_kv_heads, head_size)


def token_bucket(num_tokens: int) -> int:
    """The padded token count of a step with `num_tokens` tokens: the model runs on this many rows (the rest are
    padding that writes to vLLM's null block and reads nothing), so steps of similar size share one compiled graph.
    Four sizes per doubling (..., 32, 40, 48, 56, 64, 80, ..., 1024, 1280, 1536, ...): a prefill of 1040 tokens runs
    1280 rows, not 2048 (time to first token of benchmarks/serving.py: 49 ms instead of 65 ms)."""
    n = max(int(num_tokens), 8)
    step = max(8, _power_of_two_at_least(n, 1) // 8)
    return -(-n // step) * step


def context_bucket(max_seq_len: int, block_size: int) -> int:
    """The padded context length for a batch whose longest request has `max_seq_len` tokens."""
    return _power_of_two_at_least(max_seq_len, block_size)


def _power_of_two_at_least(n: int, floor: int) -> int:
    return max(floor, 1 << max(0, int(n) - 1).bit_length())


class TpuPagedAttentionBackend(AttentionBackend):
    forward_includes_kv_cache_update: bool = True
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float16, torch.bfloat16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[list[Any]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return BACKEND_NAME

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec: Any = None) -> list[int | MultipleOf]:
        return [MultipleOf(1)]

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return []  # any head size

    @classmethod
    def supports_head_size(cls, head_size: int) -> bool:
        return head_size > 0

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @staticmethod
    def get_impl_cls() -> type[TpuPagedAttentionImpl]:
        return TpuPagedAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[TpuPagedAttentionMetadataBuilder]:
        return TpuPagedAttentionMetadataBuilder


@dataclass
class TpuPagedAttentionMetadata:
    num_actual_tokens: int
    # int64 on the device, token_bucket(num_tokens) rows: each token's cache slot and its position, then (a decode
    # step) the slots of its context, S of them, or (other steps) its row among the request rows below. Padding rows:
    # slot 0, position 0, context slot 0, or the row past the last.
    token_table: torch.Tensor
    # Every request has one query token (a pure decode step): vLLM then samples every row, in order.
    decode_only: bool = False
    # Steps with longer queries: [R, S] the slots of each request's context and [R, Q] the position of each of its
    # query rows (R the requests rounded up to a power of two; padding: slot 0, position 0).
    request_slots: torch.Tensor | None = None
    row_positions: torch.Tensor | None = None

    def tables(self) -> list[torch.Tensor]:
        """The step's device tables, in a fixed order (the replayed step takes them as inputs)."""
        return [t for t in (self.token_table, self.request_slots, self.row_positions) if t is not None]


class TpuPagedAttentionMetadataBuilder(AttentionMetadataBuilder[TpuPagedAttentionMetadata]):
    def __init__(self, kv_cache_spec: Any, layer_names: list[str], vllm_config: Any, device: torch.device) -> None:
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        # vLLM hands its runner's device, the host; the tables go where the model and the cache are.
        self.table_device = torch.device("tpu", torch.tpu.current_device())

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata, fast_build: bool = False
    ) -> TpuPagedAttentionMetadata:
        cm = common_attn_metadata
        if isinstance(cm.causal, torch.Tensor) or not cm.causal:
            raise NotImplementedError("torch_tpu's paged attention is causal decoder attention only")
        num_reqs, num_tokens = cm.num_reqs, cm.num_actual_tokens
        query_start = cm.query_start_loc_cpu[: num_reqs + 1].numpy().astype(np.int64)
        seq_lens = cm.seq_lens[:num_reqs].cpu().numpy().astype(np.int64)
        query_lens = np.diff(query_start)
        request_of_token = np.repeat(np.arange(num_reqs), query_lens)
        positions = (
            seq_lens[request_of_token]
            - query_lens[request_of_token]
            + (np.arange(num_tokens) - query_start[request_of_token])
        )
        span = context_bucket(int(seq_lens.max(initial=1)), self.block_size)
        blocks = cm.block_table_tensor[:num_reqs].cpu().numpy().astype(np.int64)
        needed = -(-span // self.block_size)
        if blocks.shape[1] < needed:
            blocks = np.pad(blocks, ((0, 0), (0, needed - blocks.shape[1])))
        offsets = np.arange(span)
        request_slots = blocks[:, offsets // self.block_size] * self.block_size + offsets % self.block_size
        # Past a request's length the slot is 0 (vLLM's null block, never handed to a request); the mask ignores it.
        request_slots[offsets[None, :] >= seq_lens[:, None]] = 0
        decode = num_tokens == num_reqs
        table = np.zeros((token_bucket(num_tokens), 2 + (span if decode else 1)), dtype=np.int64)
        table[:num_tokens, 0] = np.maximum(cm.slot_mapping[:num_tokens].cpu().numpy(), 0)
        table[:num_tokens, 1] = positions
        if decode:
            table[:num_tokens, 2:] = request_slots[request_of_token]
            return TpuPagedAttentionMetadata(num_tokens, self._to_device(table), decode_only=True)
        requests = _power_of_two_at_least(num_reqs, 1)
        queries = _power_of_two_at_least(int(query_lens.max(initial=1)), 1)
        query_index = np.arange(num_tokens) - query_start[request_of_token]
        table[:, 2] = requests * queries  # padding tokens: the row past the last
        table[:num_tokens, 2] = request_of_token * queries + query_index
        padded_slots = np.zeros((requests, span), dtype=np.int64)
        padded_slots[:num_reqs] = request_slots
        row_positions = np.zeros((requests, queries), dtype=np.int64)
        row_positions[request_of_token, query_index] = positions
        return TpuPagedAttentionMetadata(
            num_tokens,
            self._to_device(table),
            request_slots=self._to_device(padded_slots),
            row_positions=self._to_device(row_positions),
        )

    def _to_device(self, table: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(table).to(self.table_device)


class TpuPagedAttentionImpl(AttentionImpl):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        alibi_slopes: list[float] | None,
        sliding_window: int | None,
        kv_cache_dtype: str,
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
    ) -> None:
        unsupported = {
            "ALiBi": alibi_slopes is not None,
            "a sliding window": sliding_window is not None,
            "a logits soft cap": bool(logits_soft_cap),
            "attention sinks": sinks is not None,
            f"a {kv_cache_dtype} KV cache": kv_cache_dtype != "auto",
            f"{attn_type} attention": attn_type != AttentionType.DECODER,
        }
        missing = [what for what, asked in unsupported.items() if asked]
        if missing:
            raise NotImplementedError(f"torch_tpu's paged attention does not support {', '.join(missing)} yet")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name

    def forward(
        self,
        layer: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: TpuPagedAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("torch_tpu's paged attention has no fused output quantization")
        if attn_metadata is None:  # vLLM's profiling pass runs the model without a cache
            return output
        # The runner pads the model's tokens to the table's rows; unpadded callers use the table's first rows.
        n = min(query.shape[0], attn_metadata.token_table.shape[0])
        table = attn_metadata.token_table[:n]
        if self.kv_sharing_target_layer_name is None:
            write_kv(kv_cache, key[:n], value[:n], table[:, 0])
        queries = query[:n].view(n, self.num_heads, self.head_size)
        if attn_metadata.request_slots is None or attn_metadata.row_positions is None:
            out = paged_attention(queries, kv_cache, table[:, 2:], table[:, 1], self.scale)
        else:
            out = paged_request_attention(
                queries, kv_cache, attn_metadata.request_slots, attn_metadata.row_positions, table[:, 2], self.scale
            )
        output[:n].copy_(out.reshape(output[:n].shape))
        return output


def write_kv(kv_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor, slots: torch.Tensor) -> None:
    """Stores each token's key and value at its slot."""
    heads, size = kv_cache.shape[2], kv_cache.shape[3]
    rows = torch.stack([key.reshape(-1, heads, size), value.reshape(-1, heads, size)], dim=1)
    kv_cache.index_copy_(0, slots, rows.to(kv_cache.dtype))


def paged_attention(
    query: torch.Tensor, kv_cache: torch.Tensor, context_slots: torch.Tensor, positions: torch.Tensor, scale: float
) -> torch.Tensor:
    """query [T, H, D] attends over the cached keys and values at `context_slots` [T, S] up to its own position;
    returns [T, H, D] in the query's dtype. Scores and the softmax are float32."""
    tokens, heads, size = query.shape
    span = context_slots.shape[1]
    kv_heads = kv_cache.shape[2]
    context = kv_cache.index_select(0, context_slots.reshape(-1)).view(tokens, span, 2, kv_heads, size).float()
    # [T, kv_heads, 1, S, D]: the context axis next to the head axis, so that the scores come out as
    # [T, kv_heads, groups, S] and the softmax reduces along the minor axis.
    keys = context[:, :, 0].permute(0, 2, 1, 3).unsqueeze(2)
    values = context[:, :, 1].permute(0, 2, 1, 3).unsqueeze(2)
    grouped = query.float().view(tokens, kv_heads, heads // kv_heads, 1, size)
    # Products and sums in the gathered layout, not batched matrix products: every token has a context of its own,
    # and XLA-CPU runs T * kv_heads tiny products slower than one fused multiply-and-reduce; with the scores' context
    # axis minor, a decode step's attention takes about 30% less time than with it second (benchmarks/serving.py).
    scores = (grouped * keys).sum(-1) * scale  # [T, kv_heads, groups, S]
    visible = torch.arange(span, device=query.device)[None, :] <= positions[:, None]
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(-1) * values).sum(3).reshape(tokens, heads, size).to(query.dtype)


def paged_request_attention(
    query: torch.Tensor,
    kv_cache: torch.Tensor,
    request_slots: torch.Tensor,
    row_positions: torch.Tensor,
    rows: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """query [T, H, D], token t the query row `rows[t]` of the request rows [R, Q] (a row past the last: padding);
    each request's rows attend over the cached keys and values at its `request_slots` [R, S] up to the row's
    position (`row_positions` [R, Q]). Returns [T, H, D] in the query's dtype; scores and the softmax are float32."""
    tokens, heads, size = query.shape
    requests, span = request_slots.shape
    per_request = row_positions.shape[1]
    kv_heads = kv_cache.shape[2]
    groups = heads // kv_heads
    laid_out = query.new_zeros(requests * per_request + 1, heads, size).index_copy(0, rows, query)
    # [R, kv_heads, groups * Q, D]: the rows of one KV head's query groups, one matrix per request and KV head
    grouped = laid_out[:-1].view(requests, per_request, kv_heads, groups, size).permute(0, 2, 3, 1, 4)
    grouped = grouped.reshape(requests, kv_heads, groups * per_request, size).float()
    context = kv_cache.index_select(0, request_slots.reshape(-1)).view(requests, span, 2, kv_heads, size).float()
    keys = context[:, :, 0].permute(0, 2, 1, 3)  # [R, kv_heads, S, D]
    values = context[:, :, 1].permute(0, 2, 1, 3)
    scores = (grouped @ keys.transpose(-1, -2) * scale).view(requests, kv_heads, groups, per_request, span)
    visible = torch.arange(span, device=query.device)[None, None, :] <= row_positions[:, :, None]  # [R, Q, S]
    scores = scores.masked_fill(~visible[:, None, None], float("-inf"))
    weights = torch.softmax(scores, dim=-1).view(requests, kv_heads, groups * per_request, span)
    out = (weights @ values).view(requests, kv_heads, groups, per_request, size).permute(0, 3, 1, 2, 4)
    out = out.reshape(requests * per_request, heads, size)
    return out.index_select(0, rows.clamp(max=requests * per_request - 1)).to(query.dtype)


if BACKEND_NAME not in AttentionBackendEnum.__members__:
    AttentionBackendEnum.register(BACKEND_NAME, f"{__name__}.{TpuPagedAttentionBackend.__qualname__}")
