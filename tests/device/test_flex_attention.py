"""FlexAttention on tpu (torch.nn.attention.flex_attention): eager and under torch.compile, forward and backward,
with a block mask, a score_mod and grouped-query heads, matching the same attention computed on the CPU with SDPA
(torch's FlexAttention refuses CPU backward, so the reference is SDPA with the equivalent mask and bias)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torch.nn.attention import flex_attention as fa

L, E = 64, 16


def _causal(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q >= k


def _bias(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return score + 0.1 * (h + 1) * (q - k).float() / L  # a per-head relative-position bias


def _reference(q, k, v, heads: int, groups: int, with_bias: bool) -> torch.Tensor:
    pos = torch.arange(L)
    allowed = pos[:, None] >= pos[None, :]
    bias = torch.zeros(heads, L, L)
    if with_bias:
        bias = 0.1 * (torch.arange(heads)[:, None, None] + 1) * (pos[:, None] - pos[None, :]).float() / L
    mask = bias.masked_fill(~allowed, float("-inf"))
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize(("kv_heads", "with_bias"), [(4, False), (2, True)], ids=["mask", "gqa+score_mod"])
def test_flex_attention_matches_cpu_forward_and_backward(compiled: bool, kv_heads: int, with_bias: bool) -> None:
    heads = 4
    g = torch.Generator().manual_seed(0)
    cpu = [torch.randn(2, h, L, E, generator=g).requires_grad_() for h in (heads, kv_heads, kv_heads)]
    tpu = [t.detach().to("tpu").requires_grad_() for t in cpu]
    block_mask = fa.create_block_mask(_causal, None, None, L, L, device="tpu")
    attend = torch.compile(fa.flex_attention) if compiled else fa.flex_attention
    out = attend(*tpu, score_mod=_bias if with_bias else None, block_mask=block_mask, enable_gqa=kv_heads != heads)
    want = _reference(*cpu, heads, heads // kv_heads, with_bias)
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=2e-6)
    grad = torch.randn(want.shape, generator=g)
    want.backward(grad)
    out.backward(grad.to("tpu"))
    for name, t, c in zip("qkv", tpu, cpu, strict=True):
        torch.testing.assert_close(t.grad.cpu(), c.grad, rtol=1e-5, atol=1e-5, msg=lambda m, n=name: f"d{n}: {m}")


def test_other_devices_keep_torchs_checks() -> None:
    q = torch.randn(1, 1, 8, 4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        fa.flex_attention(q, q, q)
