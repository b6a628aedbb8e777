"""JAX kernels behind `torch.tpu.ops.ragged_dot`, `ragged_dot_weight_grad` and `splash_sdpa`, written with
`torch.tpu.pallas.jax_op` — the worked examples of that API.

On tpu tensors, when JAX can be imported (and `TORCH_TPU_JAX_KERNELS` is not 0), those ops run the kernels here:
each is one `func.call` node in torch_tpu's graph (fused eager: it fuses with its neighbours; torch.compile: part of
the compiled program) and its backward is `jax.vjp` of the same function, another such node. Without JAX, or on
CPU tensors, the ops run their torch reference implementations (`ragged.py`, `splash_attention.py`), which the
tests compare the kernels with.

- `ragged_dot`: `jax.lax.ragged_dot` (the grouped matmul of Mixture-of-Experts layers). The weight gradient is the
  `rhs` half of its vjp (the product is linear in `rhs`, so the point it is taken at does not matter).
- `flash_attention`: blockwise attention over key/value blocks with an online softmax (a running maximum and sum
  per query, rescaled as each block arrives), so no `(S, S)` score matrix is ever formed; causal and sliding-window
  masks by position; the backward recomputes the blocks (jax.vjp through the `lax.scan`).

The kernels are registered on first use, so importing torch_tpu never imports JAX.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from typing import TYPE_CHECKING, Any

import torch

from torch_tpu import config

if TYPE_CHECKING:
    import jax

__all__ = ["available", "flash_attention", "ragged_dot", "ragged_dot_weight_grad"]

_NS = "torch_tpu_jax"


def available(*tensors: torch.Tensor) -> bool:
    """Whether the JAX kernels serve a call on `tensors`: any of them on tpu, JAX importable, not switched off."""
    return any(t.device.type == "tpu" for t in tensors) and _kernels_registered()


@torch.compiler.assume_constant_result
def _kernels_registered() -> bool:
    """Registers the kernels (once) if JAX can be imported and TORCH_TPU_JAX_KERNELS allows; says whether they are.
    torch.compile runs this at trace time and keeps the answer, so compiled code only calls `torch.ops`."""
    if not config.load().jax_kernels or not _jax_installed():
        return False
    _register()
    return True


@functools.cache
def _jax_installed() -> bool:
    return importlib.util.find_spec("jax") is not None  # looked up once, not per op call


def _ragged_dot(lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array) -> jax.Array:
    import jax

    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=lhs.dtype)


def _ragged_dot_weight_grad(lhs: jax.Array, grad_output: jax.Array, group_sizes: jax.Array) -> jax.Array:
    import jax
    import jax.numpy as jnp

    shape = (group_sizes.shape[0], lhs.shape[1], grad_output.shape[1])
    _, pullback = jax.vjp(lambda rhs: _ragged_dot(lhs, rhs, group_sizes), jnp.zeros(shape, lhs.dtype))
    return pullback(grad_output.astype(lhs.dtype))[0]


def _flash_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, scale: float, causal: bool, window: int, block_k: int
) -> jax.Array:  # window < 0: no sliding window
    """q `(B, H, Sq, D)`, k/v `(B, H, Sk, D)` (kv heads already repeated); the last query sits at the last key."""
    import jax
    import jax.numpy as jnp

    sq, sk = q.shape[2], k.shape[2]
    blocks = -(-sk // block_k)
    pad = blocks * block_k - sk
    if pad:
        k = jnp.pad(k, ((0, 0), (0, 0), (0, pad), (0, 0)))
        v = jnp.pad(v, ((0, 0), (0, 0), (0, pad), (0, 0)))
    kb = k.reshape(k.shape[0], k.shape[1], blocks, block_k, k.shape[3]).transpose(2, 0, 1, 3, 4)
    vb = v.reshape(v.shape[0], v.shape[1], blocks, block_k, v.shape[3]).transpose(2, 0, 1, 3, 4)
    acc_t = jnp.promote_types(q.dtype, jnp.float32)
    qs = q.astype(acc_t) * scale
    rows = jnp.arange(sq)[:, None] + (sk - sq)  # each query's position among the keys

    def step(carry: Any, block: Any) -> Any:
        m, s, o = carry
        kj, vj, start = block
        cols = start + jnp.arange(block_k)[None, :]
        keep = jnp.broadcast_to(cols < sk, (sq, block_k))
        if causal or window >= 0:
            keep = keep & (cols <= rows)
        if window >= 0:
            keep = keep & (cols >= rows - window)
        scores = jnp.einsum("bhqd,bhkd->bhqk", qs, kj.astype(acc_t))
        scores = jnp.where(keep, scores, -jnp.inf)
        m_new = jnp.maximum(m, scores.max(axis=-1))
        safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)  # a row with nothing kept so far stays at zero
        p = jnp.exp(scores - safe[..., None])
        rescale = jnp.exp(m - safe)
        s = s * rescale + p.sum(axis=-1)
        o = o * rescale[..., None] + jnp.einsum("bhqk,bhkd->bhqd", p, vj.astype(acc_t))
        return (m_new, s, o), None

    init = (
        jnp.full(q.shape[:3], -jnp.inf, acc_t),
        jnp.zeros(q.shape[:3], acc_t),
        jnp.zeros(q.shape[:3] + (v.shape[3],), acc_t),
    )
    starts = jnp.arange(blocks) * block_k
    (_, s, o), _ = jax.lax.scan(step, init, (kb, vb, starts))
    return (o / jnp.where(s > 0, s, 1.0)[..., None]).astype(q.dtype)


@functools.cache
def _register() -> None:
    from torch_tpu._internal.pallas import jax_op

    jax_op(f"{_NS}::ragged_dot", _ragged_dot)
    jax_op(f"{_NS}::ragged_dot_weight_grad", _ragged_dot_weight_grad)
    jax_op(f"{_NS}::flash_attention", _flash_attention)


def _op(name: str) -> Any:
    if not _kernels_registered():
        raise RuntimeError("the JAX kernels need JAX (pip install torch_tpu[jax]) and TORCH_TPU_JAX_KERNELS not 0")
    return getattr(getattr(torch.ops, _NS), name)


def _int32(group_sizes: torch.Tensor) -> torch.Tensor:
    # JAX keeps 64-bit integers only with jax_enable_x64; group sizes fit in 32 bits
    return group_sizes.to(torch.int32)


def ragged_dot(lhs: torch.Tensor, rhs: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """The grouped product through `jax.lax.ragged_dot` (shapes already checked by the caller)."""
    return _op("ragged_dot")(lhs, rhs, _int32(group_sizes).to(lhs.device))


def ragged_dot_weight_grad(lhs: torch.Tensor, grad_output: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """`(g, k, n)` weight gradient of the grouped product through the vjp of `jax.lax.ragged_dot`."""
    return _op("ragged_dot_weight_grad")(lhs, grad_output.to(lhs.dtype), _int32(group_sizes).to(lhs.device))


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    local_window_size: int | None = None,
    block_k: int = 128,
) -> torch.Tensor:
    """Blockwise attention of q `(B, H, Sq, D)` over k, v `(B, H, Sk, D)` (equal head counts), `block_k` keys at a
    time; `local_window_size` (which implies causal) limits each query to the previous `local_window_size` keys."""
    if block_k <= 0:
        raise ValueError(f"flash_attention: block_k must be positive, got {block_k}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    window = -1 if local_window_size is None else int(local_window_size)
    block = min(block_k, max(1, k.shape[2]))
    return _op("flash_attention")(q, k, v, scale, bool(is_causal), window, block)
