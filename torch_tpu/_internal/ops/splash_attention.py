"""TorchTPU's `torch.tpu.ops.splash_sdpa`: attention with splash attention's masks.

TorchTPU runs JAX's Pallas splash-attention kernel, which needs a TPU. Here, on tpu tensors with JAX importable, it
runs `jax_kernels.flash_attention` (blockwise over `block_kv` keys with an online softmax, as a `jax_op`); otherwise
`torch.nn.functional.scaled_dot_product_attention` with the same masks. Masks: causal, sliding-window causal (query
i sees keys i - local_window_size .. i), or full; MQA/GQA by repeating key/value heads. The other block sizes,
layouts and backward-kernel switches tune TorchTPU's kernel's tiling and memory use and cannot change the result, so
they are validated and otherwise ignored. Inputs are `(batch, heads, seq, head_dim)`, queries and keys of one length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_tpu._internal.ops import jax_kernels

__all__ = ["splash_sdpa"]

_LAYOUTS = ("HEAD_DIM_MINOR", "SEQ_MINOR")


def _positive(name: str, value: int | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"splash_sdpa: {name} must be positive, got {value}")


def splash_sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    is_causal: bool = True,
    local_window_size: int | None = None,
    enable_gqa: bool = False,
    block_q: int = 512,
    block_kv: int = 512,
    block_dkv: int = 512,
    block_kv_compute: int = 512,
    block_q_dkv: int = 512,
    block_kv_dkv: int = 512,
    block_kv_dkv_compute: int = 512,
    block_q_dq: int | None = None,
    block_kv_dq: int | None = None,
    use_fused_bwd_kernel: bool = True,
    use_vmap_bwd: bool = True,
    q_layout: str = "HEAD_DIM_MINOR",
    k_layout: str = "HEAD_DIM_MINOR",
    v_layout: str = "HEAD_DIM_MINOR",
) -> torch.Tensor:
    """Scaled dot-product attention of `q` `(B, H, S, D)` over `k`, `v` `(B, Hkv, S, D)`, causal by default.

    `scale` defaults to `1/sqrt(D)`. `local_window_size` (when set, it takes precedence over `is_causal`) limits each
    query to itself and the previous `local_window_size` keys. `enable_gqa` must say whether `Hkv != H` (TorchTPU
    checks the same); `H` must be a multiple of `Hkv`. Differentiable in q, k and v; returns q's dtype.
    """
    for name, value in (
        ("block_q", block_q),
        ("block_kv", block_kv),
        ("block_dkv", block_dkv),
        ("block_kv_compute", block_kv_compute),
        ("block_q_dkv", block_q_dkv),
        ("block_kv_dkv", block_kv_dkv),
        ("block_kv_dkv_compute", block_kv_dkv_compute),
        ("block_q_dq", block_q_dq),
        ("block_kv_dq", block_kv_dq),
    ):
        _positive(name, value)
    for name, layout in (("q_layout", q_layout), ("k_layout", k_layout), ("v_layout", v_layout)):
        if layout not in _LAYOUTS:
            raise ValueError(f"splash_sdpa: {name} must be one of {_LAYOUTS}, got {layout!r}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("splash_sdpa: q, k and v must be 4D (batch, heads, seq, head_dim)")
    heads, seq = q.shape[1], q.shape[2]
    kv_heads = k.shape[1]
    if enable_gqa != (heads != kv_heads):
        raise ValueError(f"splash_sdpa: enable_gqa={enable_gqa} does not match {heads} query and {kv_heads} kv heads")
    if heads % kv_heads or v.shape[1] != kv_heads:
        raise ValueError(f"splash_sdpa: {heads} query heads cannot share {kv_heads} key / {v.shape[1]} value heads")
    if k.shape[2] != seq or v.shape[2] != seq:
        raise ValueError("splash_sdpa: queries, keys and values must have the same sequence length")
    if local_window_size is not None and local_window_size < 0:
        raise ValueError(f"splash_sdpa: local_window_size must be >= 0, got {local_window_size}")
    if kv_heads != heads:
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    if jax_kernels.available(q, k, v):
        return jax_kernels.flash_attention(
            q, k, v, scale=scale, is_causal=is_causal, local_window_size=local_window_size, block_k=block_kv
        )
    if local_window_size is not None:
        i = torch.arange(seq, device=q.device).unsqueeze(1)
        j = torch.arange(seq, device=q.device).unsqueeze(0)
        mask = (j <= i) & (j >= i - local_window_size)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    return out.to(q.dtype)
