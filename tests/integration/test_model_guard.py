"""Model-level guard against silent wrong answers: the models people train, trained on tpu and on the CPU from the
same initial weights, must agree in losses, gradients, every parameter and every buffer afterwards.

Each case is one that once trained wrongly without an error: tied embeddings (Parameters replaced by `.to`),
BatchNorm (running statistics never updated), an optimizer built before `.to("tpu")` (updating stale CPU tensors).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import torch_tpu

RTOL, ATOL = 1e-5, 1e-5


class TiedCausalLM(nn.Module):
    """A nanoGPT-shaped decoder whose output projection is the token embedding (weight tying)."""

    def __init__(self, vocab: int = 32, dim: int = 16, ctx: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(ctx, dim)
        self.ln1 = nn.LayerNorm(dim)
        # No key bias: its gradient is exactly zero in theory, so Adam would amplify rounding noise.
        self.attn = nn.MultiheadAttention(dim, heads, bias=False, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        h = self.ln1(x)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=idx.device), diagonal=1)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


class BatchNormCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.BatchNorm2d(8, momentum=None),  # cumulative average: the factor changes every step
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 5),
            nn.BatchNorm1d(5),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def _lm_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, 32, (4, 9), generator=g)
    return idx[:, :-1], idx[:, 1:]


def _cnn_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4)
    return torch.randn(6, 3, 8, 8, generator=g), torch.randint(0, 5, (6,), generator=g)


def _lm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def _cnn_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), y)


def _train(model: nn.Module, opt: torch.optim.Optimizer, loss_fn, batch, device: str, steps: int = 4):
    x, y = (t.to(device) for t in batch)
    losses, grads = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model, x, y)
        loss.backward()
        grads.append({n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()})
        opt.step()
        losses.append(loss.item())
    return losses, grads


def _compare_state(tpu_model: nn.Module, cpu_model: nn.Module) -> None:
    tpu_state, cpu_state = tpu_model.state_dict(), cpu_model.state_dict()
    assert tpu_state.keys() == cpu_state.keys()
    for name, value in cpu_state.items():
        assert tpu_state[name].device.type == "tpu", name
        torch.testing.assert_close(tpu_state[name].cpu(), value, rtol=RTOL, atol=ATOL, msg=name)


def _run_both(make_model, make_opt, loss_fn, batch, opt_before_to: bool = False):
    torch.manual_seed(0)
    reference = make_model()
    cpu_model = copy.deepcopy(reference)
    tpu_model = copy.deepcopy(reference)
    cpu_opt = make_opt(cpu_model)
    if opt_before_to:
        tpu_opt = make_opt(tpu_model)  # built on the CPU parameters, then the model moves
        tpu_model.to("tpu")
    else:
        tpu_model.to("tpu")
        tpu_opt = make_opt(tpu_model)
    torch_tpu.reset_op_counts()
    tpu_losses, tpu_grads = _train(tpu_model, tpu_opt, loss_fn, batch, "tpu")
    fallbacks = torch_tpu.metrics()["fallback_ops"]
    cpu_losses, cpu_grads = _train(cpu_model, cpu_opt, loss_fn, batch, "cpu")
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=RTOL, atol=ATOL)
    for step, (tg, cg) in enumerate(zip(tpu_grads, cpu_grads, strict=True)):
        for name in cg:
            torch.testing.assert_close(tg[name], cg[name], rtol=RTOL, atol=ATOL, msg=f"step {step}: grad of {name}")
    _compare_state(tpu_model, cpu_model)
    return tpu_model, cpu_model, fallbacks


def _adamw(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


@pytest.mark.parametrize("opt_before_to", [False, True])
def test_tied_embedding_lm_trains_like_cpu(opt_before_to):
    tpu_model, _, fallbacks = _run_both(TiedCausalLM, _adamw, _lm_loss, _lm_batch(), opt_before_to)
    assert tpu_model.head.weight is tpu_model.tok.weight
    assert len(list(tpu_model.parameters())) == len(list(TiedCausalLM().parameters()))
    assert fallbacks == {}, fallbacks


def test_batchnorm_cnn_trains_then_evaluates_like_cpu():
    def sgd(model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    tpu_model, cpu_model, fallbacks = _run_both(BatchNormCNN, sgd, _cnn_loss, _cnn_batch())
    assert fallbacks == {}, fallbacks
    bn = tpu_model.body[1]
    assert not torch.equal(bn.running_mean.cpu(), torch.zeros(8)), "running statistics never updated"
    tpu_model.eval()
    cpu_model.eval()
    x = torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        torch.testing.assert_close(tpu_model(x.to("tpu")).cpu(), cpu_model(x), rtol=RTOL, atol=ATOL)


def test_optimizer_built_before_to_updates_device_parameters():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    params = list(model.parameters())
    model.to("tpu")
    assert all(a is b for a, b in zip(params, model.parameters(), strict=True))
    before = [p.detach().cpu().clone() for p in model.parameters()]
    model(torch.randn(5, 4).to("tpu")).sum().backward()
    opt.step()
    for p, b in zip(model.parameters(), before, strict=True):
        assert p.device.type == "tpu"
        assert not torch.equal(p.detach().cpu(), b), "the optimizer updated stale CPU tensors"


def test_bfloat16_tied_model_matches_cpu():
    torch.manual_seed(0)
    reference = TiedCausalLM().to(torch.bfloat16)
    cpu_model, tpu_model = copy.deepcopy(reference), copy.deepcopy(reference).to("tpu")
    assert tpu_model.head.weight is tpu_model.tok.weight
    x, _ = _lm_batch()
    with torch.no_grad():
        # Several bf16 layers deep: each rounds once like the CPU, but accumulation orders differ.
        torch.testing.assert_close(tpu_model(x.to("tpu")).cpu(), cpu_model(x), rtol=4e-2, atol=4e-2)
