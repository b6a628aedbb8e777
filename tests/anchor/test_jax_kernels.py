"""The JAX kernels behind torch.tpu.ops.ragged_dot / ragged_dot_weight_grad / splash_sdpa (jax_op's worked
examples), against PyTorch references: forward and backward in the three eager modes and under torch.compile, one
execution in fused mode, bf16 and grouped-query attention, the torch references when TORCH_TPU_JAX_KERNELS=0, and
a Mixture-of-Experts layer built on ragged_dot training like the same layer on the CPU.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_tpu
from tests.integration.test_model_families import _adamw, _compare
from torch_tpu import eager
from torch_tpu._internal.ops import jax_kernels

pytest.importorskip("jax")
ops = torch.tpu.ops
TOL = {"rtol": 1e-5, "atol": 1e-5}


def _per_group(lhs: torch.Tensor, rhs: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Grouped matmul as a loop of slices (rows past the groups give zeros)."""
    out, start = torch.zeros(lhs.shape[0], rhs.shape[2], dtype=lhs.dtype), 0
    pieces = []
    for i, n in enumerate(sizes):
        pieces.append(lhs[start : start + n] @ rhs[i])
        start += n
    return torch.cat(pieces + [out[start:]])


def _masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, window: int | None):
    s = q.shape[2]
    i, j = torch.arange(s).unsqueeze(1), torch.arange(s).unsqueeze(0)
    allowed = torch.ones(s, s, dtype=torch.bool)
    if causal or window is not None:
        allowed = j <= i
    if window is not None:
        allowed = allowed & (j >= i - window)
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1) @ v


def executions() -> int:
    return int(torch_tpu.metrics()["executions"])


@pytest.mark.parametrize("mode", ["fused", "debug", "strict"])
@pytest.mark.parametrize("sizes", [[3, 0, 5], [4, 4, 4, 4]])
def test_ragged_dot_forward_backward(mode: str, sizes: list[int]) -> None:
    torch.manual_seed(len(sizes))
    m = sum(sizes) + 2  # two rows past the last group
    lhs, rhs = torch.randn(m, 6, requires_grad=True), torch.randn(len(sizes), 6, 5, requires_grad=True)
    grad_out = torch.randn(m, 5)
    want = _per_group(lhs, rhs, sizes)
    want.backward(grad_out)
    with eager.eager_mode(mode):
        tl, tr = lhs.detach().to("tpu").requires_grad_(), rhs.detach().to("tpu").requires_grad_()
        gs = torch.tensor(sizes).to("tpu")
        got = ops.ragged_dot(tl, tr, gs)
        got.backward(grad_out.to("tpu"))
        weight_grad = ops.ragged_dot_weight_grad(tl.detach(), grad_out.to("tpu"), gs)
        torch.testing.assert_close(got.cpu(), want.detach(), **TOL)
        torch.testing.assert_close(tl.grad.cpu(), lhs.grad, **TOL)
        torch.testing.assert_close(tr.grad.cpu(), rhs.grad, **TOL)
        torch.testing.assert_close(weight_grad.cpu(), rhs.grad, **TOL)


def test_kernels_are_one_node_of_the_fused_graph() -> None:
    lhs, rhs, gs = torch.randn(8, 4), torch.randn(2, 4, 3), torch.tensor([5, 3])
    q = k = v = torch.randn(1, 2, 8, 4)
    want = (_per_group(lhs.relu(), rhs, [5, 3]) * 2).sum() + _masked_attention(q, k, v, True, None).exp().sum()
    with eager.eager_mode("fused"):
        args = [t.to("tpu") for t in (lhs, rhs, gs, q, k, v)]
        ops.ragged_dot(args[0], args[1], args[2])  # lower both kernels once, outside the count
        ops.splash_sdpa(*args[3:])
        torch.tpu.synchronize()
        before = executions()
        dot = ops.ragged_dot(args[0].relu(), args[1], args[2]) * 2
        got = dot.sum() + ops.splash_sdpa(*args[3:], block_kv=4).exp().sum()
        value = got.cpu()
        assert executions() - before == 1
    torch.testing.assert_close(value, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("mode", ["fused", "debug", "strict"])
@pytest.mark.parametrize(
    ("kv_heads", "causal", "window", "block"),
    [(4, True, None, 4), (4, False, None, 16), (2, True, 3, 5), (1, True, None, 3)],
)
def test_flash_attention_forward_backward(mode: str, kv_heads: int, causal: bool, window: int | None, block: int):
    torch.manual_seed(kv_heads + block)
    b, h, s, d = 2, 4, 11, 8
    q = torch.randn(b, h, s, d, requires_grad=True)
    k, v = torch.randn(b, kv_heads, s, d, requires_grad=True), torch.randn(b, kv_heads, s, d, requires_grad=True)
    rep = h // kv_heads
    want = _masked_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), causal, window)
    want_grads = torch.autograd.grad(want.square().sum(), (q, k, v))
    with eager.eager_mode(mode):
        tq, tk, tv = (t.detach().to("tpu").requires_grad_() for t in (q, k, v))
        got = ops.splash_sdpa(
            tq, tk, tv, is_causal=causal, local_window_size=window, enable_gqa=kv_heads != h, block_kv=block
        )
        grads = torch.autograd.grad(got.square().sum(), (tq, tk, tv))
        torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-5, atol=1e-5)
        for g, w in zip(grads, want_grads, strict=True):
            torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-5)


def test_flash_attention_bf16_accumulates_in_float32() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 64, 16) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True).bfloat16()
    got = ops.splash_sdpa(*(t.bfloat16().to("tpu") for t in (q, k, v)), block_kv=16)
    assert got.dtype == torch.bfloat16
    # the float32 result rounded once: within one bf16 ulp of it, not the error of bf16 sums over 64 keys
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=8e-3, atol=8e-3)


def test_kernels_under_torch_compile() -> None:
    torch.manual_seed(1)

    def step(lhs, rhs, gs, q, k, v):  # noqa: ANN001, ANN202
        y = ops.ragged_dot(lhs.relu(), rhs, gs)
        a = ops.splash_sdpa(q, k, v, block_kv=4)
        return y.square().sum() + a.square().sum()

    lhs, rhs, gs = torch.randn(9, 4), torch.randn(3, 4, 2), torch.tensor([2, 4, 3])
    q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))
    cpu_leaves = [t.clone().requires_grad_() for t in (lhs, rhs)]
    step(cpu_leaves[0], cpu_leaves[1], gs, q, k, v).backward()
    compiled = torch.compile(step, backend="tpu", fullgraph=True)
    tpu_leaves = [t.to("tpu").requires_grad_() for t in (lhs, rhs)]
    loss = compiled(tpu_leaves[0], tpu_leaves[1], gs.to("tpu"), q.to("tpu"), k.to("tpu"), v.to("tpu"))
    loss.backward()
    torch.testing.assert_close(loss.cpu(), step(lhs, rhs, gs, q, k, v), **TOL)
    for t, c in zip(tpu_leaves, cpu_leaves, strict=True):
        torch.testing.assert_close(t.grad.cpu(), c.grad, **TOL)


def test_switch_off_runs_the_torch_references(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name: str) -> None:
        raise AssertionError(f"the JAX kernel {name} ran with TORCH_TPU_JAX_KERNELS=0")

    monkeypatch.setenv("TORCH_TPU_JAX_KERNELS", "0")
    monkeypatch.setattr(jax_kernels, "_op", refuse)
    lhs, rhs, gs = torch.randn(5, 3), torch.randn(2, 3, 2), torch.tensor([2, 3])
    got = ops.ragged_dot(lhs.to("tpu"), rhs.to("tpu"), gs.to("tpu"))
    torch.testing.assert_close(got.cpu(), _per_group(lhs, rhs, [2, 3]), **TOL)
    q = torch.randn(1, 1, 4, 2)
    torch.testing.assert_close(ops.splash_sdpa(*(q.to("tpu"),) * 3).cpu(), _masked_attention(q, q, q, True, None))
    assert not jax_kernels.available(torch.ones(1))  # CPU tensors never take the kernels


class GroupedMoE(nn.Module):
    """Top-2 routing; tokens sorted by expert run through stacked expert weights with two ragged_dots."""

    def __init__(self, d: int = 16, experts: int = 4, k: int = 2) -> None:
        super().__init__()
        self.k, self.n = k, experts
        self.router = nn.Linear(d, experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(experts, d, 2 * d) * d**-0.5)
        self.w_out = nn.Parameter(torch.randn(experts, 2 * d, d) * (2 * d) ** -0.5)
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, chosen = torch.topk(F.softmax(self.router(x), dim=-1), self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        flat = chosen.flatten()
        order = torch.argsort(flat, stable=True)
        token = order // self.k
        sizes = torch.bincount(flat, minlength=self.n)
        hidden = F.silu(ops.ragged_dot(x[token], self.w_in, sizes))
        y = ops.ragged_dot(hidden, self.w_out, sizes) * weights.flatten()[order].unsqueeze(-1)
        return self.head(torch.zeros_like(x).index_add(0, token, y) + x)


def test_moe_on_ragged_dot_trains_like_cpu() -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(7)
    batch = {"x": torch.randn(12, 16, generator=g), "y": torch.randn(12, 1, generator=g)}
    fallbacks = _compare(GroupedMoE(), batch, lambda m, b: F.mse_loss(m(b["x"]), b["y"]), _adamw)
    assert fallbacks == {}, fallbacks
