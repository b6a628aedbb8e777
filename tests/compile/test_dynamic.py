"""Bounded dynamism: a dynamic sequence length is padded to buckets where the graph analysis proves padding safe
(positions along it independent), so lengths 1..512 use at most 6 programs; graphs that mix positions (attention,
a mean over tokens) run unpadded, one program per length. Both equal unpadded CPU eager."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn

from torch_tpu.compile import bucketing

LENGTHS = [1, 2, 3, 5, 8, 13, 31, 32, 33, 64, 100, 129, 200, 257, 300, 400, 511, 512]


class TokenModel(nn.Module):
    """Per-token model: embedding + learned positions sliced to the length, layer norm, MLP, softmax head."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.pos = nn.Parameter(torch.randn(512, 32))
        self.ln = nn.LayerNorm(32)
        self.fc, self.out = nn.Linear(32, 64), nn.Linear(64, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids) + self.pos[: ids.shape[1]]
        return self.out(torch.nn.functional.gelu(self.fc(self.ln(h)))).log_softmax(-1)


def _models(cls: type[nn.Module]) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    cpu = cls().eval()
    tpu = cls().eval()
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu.to("tpu")


def test_bucket_sizes() -> None:
    assert {bucketing.bucket_for(n) for n in range(2, 513)} == {32, 64, 128, 256, 512}
    assert bucketing.bucket_for(513) == 1024


def test_token_model_lengths_1_to_512_bounded_programs(delta) -> None:
    cpu, tpu = _models(TokenModel)
    compiled = torch.compile(tpu, backend="tpu")
    g = torch.Generator().manual_seed(0)
    outs, expected = [], []
    delta()
    with torch.no_grad():
        for n in LENGTHS:
            ids = torch.randint(0, 50, (2, n), generator=g)
            ids_t = ids.to("tpu")
            if n > 1:
                torch._dynamo.mark_dynamic(ids_t, 1)
            outs.append(compiled(ids_t))
            expected.append(cpu(ids))
    d = delta()  # before reading: reading a view of a padded output is a (small) program of the reader's
    assert d["cache_misses"] <= 6, d  # 5 buckets + the length-1 graph Dynamo specializes
    assert d["bucketed_calls"] == sum(1 for n in LENGTHS if n > 1 and n not in (32, 64, 128, 256, 512))
    assert d["compiled_graphs"] <= 2
    for o, e in zip(outs, expected, strict=True):
        assert o.shape == e.shape
        torch.testing.assert_close(o.cpu(), e, rtol=1e-4, atol=1e-5)


class MeanPool(nn.Module):
    """A mean over the tokens: padding would change it, so the analysis must refuse."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.fc = nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(ids).mean(1))


class Attention(nn.Module):
    """Causal self-attention mixes positions: refused too."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.qkv = nn.Linear(16, 48)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.emb(ids)).split(16, dim=-1)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_unsafe_graphs_run_unpadded(delta) -> None:
    for cls in (MeanPool, Attention):
        cpu, tpu = _models(cls)
        compiled = torch.compile(tpu, backend="tpu")
        with torch.no_grad():
            for n in (5, 9, 17):
                ids = torch.randint(0, 50, (2, n))
                ids_t = ids.to("tpu")
                torch._dynamo.mark_dynamic(ids_t, 1)
                torch.testing.assert_close(compiled(ids_t).cpu(), cpu(ids), rtol=1e-4, atol=1e-5)
        assert delta()["bucketed_calls"] == 0
        refusal = bucketing.last_refusal
        assert "mean.dim over s" in refusal or "scaled_dot_product" in refusal, refusal


def test_size_used_as_value_is_refused(delta) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * 2 / x.shape[0]

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 6):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), f(x))
    assert delta()["bucketed_calls"] == 0


def test_dynamic_training_runs_unpadded(delta) -> None:
    """Training graphs are not padded: each length is its own program, and losses and gradients equal CPU."""
    cpu, tpu = _models(TokenModel)
    cpu.train()
    tpu.train()
    compiled = torch.compile(tpu, backend="tpu")
    for n in (4, 7, 12):
        ids = torch.randint(0, 50, (2, n))
        ids_t = ids.to("tpu")
        torch._dynamo.mark_dynamic(ids_t, 1)
        cpu.zero_grad()
        tpu.zero_grad()
        loss = cpu(ids).sum()
        loss.backward()
        loss_t = compiled(ids_t).sum()
        loss_t.backward()
        torch.testing.assert_close(loss_t.cpu(), loss, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(tpu.fc.weight.grad.cpu(), cpu.fc.weight.grad, rtol=1e-4, atol=1e-4)
    d = delta()
    assert d["bucketed_calls"] == 0 and d["compiled_graphs"] == 1 and d["compiled_backward_calls"] == 3


def _times_length(x: torch.Tensor) -> torch.Tensor:
    return x * torch.full_like(x, x.shape[0])


def _over_length_minus_one(x: torch.Tensor) -> torch.Tensor:
    return x / torch.full_like(x[:, :1], x.shape[0] - 1)


def _plus_arange_from_length(x: torch.Tensor) -> torch.Tensor:
    return x + torch.arange(x.shape[0], 2 * x.shape[0], device=x.device).unsqueeze(1)


def _times_half_length(x: torch.Tensor) -> torch.Tensor:
    return x * (x.shape[0] / 2)


@pytest.mark.parametrize("fn", [_times_length, _over_length_minus_one, _plus_arange_from_length, _times_half_length])
@pytest.mark.parametrize("length", [5, 33])
def test_values_computed_from_the_length_see_the_length(fn, length: int) -> None:
    """A factory whose values (not only its shape) read the dynamic length is never padded: it would see the bucket."""
    torch._dynamo.reset()
    x = torch.ones(length, 3)
    got = torch.compile(fn, backend="tpu", dynamic=True)(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), fn(x))
