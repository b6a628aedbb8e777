"""Model families train on tpu exactly as on the CPU, with zero CPU fallbacks.

Each test builds one model on the CPU, copies its weights to tpu, and runs the same few steps of forward, backward
and optimizer on both devices from the same data: losses, every gradient after the first backward and every
parameter (and buffer) after the last step must agree, and no op may have fallen back to the CPU.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_tpu

F32_TOL = {"rtol": 1e-5, "atol": 1e-5}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _move(batch: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    # Lengths of packed sequences stay on the CPU, as pack_padded_sequence requires.
    return {k: (v if k == "lengths" else v.to(device)) for k, v in batch.items()}


def _run(
    model: nn.Module,
    batch: dict[str, torch.Tensor],
    loss_fn: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor],
    make_opt: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
    device: str,
    steps: int = 3,
    clip: float | None = None,
    autocast: torch.dtype | None = None,
) -> dict[str, Any]:
    model = copy.deepcopy(model).to(device)
    opt = make_opt(list(model.parameters()))
    data = _move(batch, device)
    losses, first_grads, norms = [], [], []
    for step in range(steps):
        opt.zero_grad()
        if autocast is None:
            loss = loss_fn(model, data)
        else:
            with torch.autocast(device, dtype=autocast):
                loss = loss_fn(model, data)
        loss.backward()
        if step == 0:
            first_grads = [p.grad.detach().cpu().clone() for p in model.parameters()]
        if clip is not None:
            norms.append(nn.utils.clip_grad_norm_(model.parameters(), clip).item())
        opt.step()
        losses.append(loss.item())
    return {
        "losses": losses,
        "grads": first_grads,
        "norms": norms,
        "state": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }


def _close(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, what: str) -> None:
    # atol is relative to the tensor's largest magnitude: gradients of a deep net reach several units, and summing
    # them in another order (as any two float32 backends do) moves each element by ~1e-5 of that, not of 1.
    scale = max(1.0, want.abs().max().item()) if want.numel() and want.is_floating_point() else 1.0
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol * scale, msg=lambda m: f"{what}: {m}")


def _compare(model: nn.Module, batch, loss_fn, make_opt, tol=F32_TOL, **kw) -> dict[str, int]:
    torch_tpu.reset_op_counts()
    tpu = _run(model, batch, loss_fn, make_opt, "tpu", **kw)
    fallbacks = dict(torch_tpu.metrics()["fallback_ops"])
    cpu = _run(model, batch, loss_fn, make_opt, "cpu", **kw)
    torch.testing.assert_close(tpu["losses"], cpu["losses"], **tol)
    torch.testing.assert_close(tpu["norms"], cpu["norms"], **tol)
    for i, (a, b) in enumerate(zip(tpu["grads"], cpu["grads"], strict=True)):
        _close(a, b, **tol, what=f"grad {i}")
    for k in cpu["state"]:
        _close(tpu["state"][k], cpu["state"][k], **tol, what=k)
    return fallbacks


# Adam's update is g / (sqrt(v) + eps): for a gradient that is zero up to rounding (the key bias of attention is one:
# softmax ignores a shift shared by all keys) the default eps=1e-8 turns 1e-9 of rounding noise into a step of
# 0.1 * lr whose sign is the noise's. eps=1e-5 keeps such steps at rounding size on every backend.
def _adamw(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, eps=1e-5)


def _adam(params, lr: float = 1e-3):
    return torch.optim.Adam(params, lr=lr, eps=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# ResNet-18-style CNN with BatchNorm


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, widths=(8, 16, 32, 64), classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            layers += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
            cin = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.pool(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def test_resnet_batchnorm():
    torch.manual_seed(0)
    g = _gen(1)
    # 32x32 keeps 2x2 positions at the last stage: BatchNorm over 4 values per channel (16x16 inputs) is so badly
    # conditioned that CPU float32 itself strays 1e-3 from float64 within three steps.
    batch = {"x": torch.randn(4, 3, 32, 32, generator=g), "y": torch.randint(0, 10, (4,), generator=g)}
    fallbacks = _compare(
        ResNet(),
        batch,
        lambda m, b: F.cross_entropy(m(b["x"]), b["y"]),
        lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=1e-4),
        # A pre-activation of this net sits 7e-7 from 0 at step 3: rounding that differs by 1e-7 (fused graphs
        # associate sums differently than op-by-op programs) flips that ReLU's mask and moves a weight by ~6e-5.
        tol={"rtol": 1e-4, "atol": 1e-4},
    )
    assert fallbacks == {}, fallbacks


# ---------------------------------------------------------------------------------------------------------------
# GPT-2-style decoder


class GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4, layers: int = 2, ctx: int = 16):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def _gpt_batch():
    g = _gen(2)
    return {"idx": torch.randint(0, 64, (2, 12), generator=g), "y": torch.randint(0, 64, (2, 12), generator=g)}


def _gpt_loss(m, b):
    logits = m(b["idx"])
    return F.cross_entropy(logits.flatten(0, 1), b["y"].flatten())


def test_gpt_decoder():
    torch.manual_seed(0)
    fallbacks = _compare(GPT(), _gpt_batch(), _gpt_loss, _adamw, clip=1.0)
    assert fallbacks == {}, fallbacks


def test_gpt_autocast_bf16():
    torch.manual_seed(0)
    fallbacks = _compare(
        GPT(), _gpt_batch(), _gpt_loss, _adamw, clip=1.0, autocast=torch.bfloat16, tol={"rtol": 3e-2, "atol": 3e-2}
    )
    assert fallbacks == {}, fallbacks


def test_gpt_grad_scaler_f16():
    def run(device: str):
        torch.manual_seed(0)
        model = GPT().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**20, growth_interval=1)
        b = _move(_gpt_batch(), device)
        scales, losses = [], []
        for _ in range(4):
            opt.zero_grad()
            with torch.autocast(device, dtype=torch.float16):
                loss = _gpt_loss(model, b)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            losses.append(loss.item())
        return scales, losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}

    torch_tpu.reset_op_counts()
    scales_t, losses_t, state_t = run("tpu")
    fallbacks = dict(torch_tpu.metrics()["fallback_ops"])
    scales_c, losses_c, state_c = run("cpu")
    assert scales_t == scales_c
    torch.testing.assert_close(losses_t, losses_c, rtol=2e-2, atol=2e-2)
    for k in state_c:
        torch.testing.assert_close(state_t[k], state_c[k], rtol=2e-2, atol=2e-2)
    assert fallbacks == {}, fallbacks


# ---------------------------------------------------------------------------------------------------------------
# BERT-style encoder with padding masks


class Bert(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4, layers: int = 2, ctx: int = 16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d, padding_idx=0), nn.Embedding(ctx, d)
        self.ln = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.cls = nn.Linear(d, 3)
        self.mlm = nn.Linear(d, vocab)

    def forward(self, idx, pad):
        x = self.ln(self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device)))
        h = self.encoder(x, src_key_padding_mask=pad)
        return self.cls(h[:, 0]), self.mlm(h)


def test_bert_encoder_padding_mask():
    torch.manual_seed(0)
    g = _gen(3)
    idx = torch.randint(1, 50, (3, 10), generator=g)
    lengths = torch.tensor([10, 7, 4])
    pad = torch.arange(10)[None] >= lengths[:, None]
    idx = idx.masked_fill(pad, 0)
    batch = {"idx": idx, "pad": pad, "y": torch.tensor([0, 2, 1]), "t": idx.masked_fill(pad, -100)}

    def loss_fn(m, b):
        cls, mlm = m(b["idx"], b["pad"])
        return F.cross_entropy(cls, b["y"]) + F.cross_entropy(mlm.flatten(0, 1), b["t"].flatten(), ignore_index=-100)

    fallbacks = _compare(Bert(), batch, loss_fn, _adam)
    assert fallbacks == {}, fallbacks


# ---------------------------------------------------------------------------------------------------------------
# LSTM / GRU language models over packed sequences


class RNNLM(nn.Module):
    def __init__(self, kind: str, vocab: int = 40, d: int = 16, hidden: int = 24):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cls(d, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, vocab)

    def forward(self, idx, lengths):
        packed = pack_padded_sequence(self.emb(idx), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=idx.shape[1])
        return self.out(out)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_lm_packed(kind):
    torch.manual_seed(0)
    g = _gen(4)
    lengths = torch.tensor([5, 9, 3, 7])
    idx = torch.randint(0, 40, (4, 9), generator=g)
    pad = torch.arange(9)[None] >= lengths[:, None]
    batch = {"idx": idx, "lengths": lengths, "t": torch.randint(0, 40, (4, 9), generator=g).masked_fill(pad, -100)}

    def loss_fn(m, b):
        logits = m(b["idx"], b["lengths"])
        return F.cross_entropy(logits.flatten(0, 1), b["t"].flatten(), ignore_index=-100)

    fallbacks = _compare(RNNLM(kind), batch, loss_fn, lambda p: _adam(p, lr=1e-2), clip=5.0)
    assert fallbacks == {}, fallbacks


# ---------------------------------------------------------------------------------------------------------------
# UNet with GroupNorm and nearest upsampling


def _conv_block(cin: int, cout: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(4, cout), nn.SiLU(), nn.Conv2d(cout, cout, 3, padding=1),
        nn.GroupNorm(4, cout), nn.SiLU(),
    )  # fmt: skip


class UNet(nn.Module):
    def __init__(self, c: int = 8):
        super().__init__()
        self.d1, self.d2, self.mid = _conv_block(3, c), _conv_block(c, 2 * c), _conv_block(2 * c, 4 * c)
        self.u2, self.u1 = _conv_block(6 * c, 2 * c), _conv_block(3 * c, c)
        self.out = nn.Conv2d(c, 3, 1)

    def forward(self, x):
        h1 = self.d1(x)
        h2 = self.d2(F.max_pool2d(h1, 2))
        m = self.mid(F.avg_pool2d(h2, 2))
        u2 = self.u2(torch.cat([F.interpolate(m, scale_factor=2, mode="nearest"), h2], 1))
        u1 = self.u1(torch.cat([F.interpolate(u2, scale_factor=2, mode="nearest"), h1], 1))
        return self.out(u1)


def test_unet_groupnorm_upsample():
    torch.manual_seed(0)
    g = _gen(5)
    batch = {"x": torch.randn(2, 3, 16, 16, generator=g), "y": torch.randn(2, 3, 16, 16, generator=g)}
    fallbacks = _compare(
        UNet(),
        batch,
        lambda m, b: F.mse_loss(m(b["x"]), b["y"]),
        _adam,
        tol={"rtol": 1e-4, "atol": 1e-5},
    )
    assert fallbacks == {}, fallbacks


# ---------------------------------------------------------------------------------------------------------------
# ViT


class ViT(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, layers: int = 2, patch: int = 4, size: int = 16):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        n = (size // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.blocks = nn.ModuleList(ViTBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x[:, 0]))


class ViTBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def test_vit():
    torch.manual_seed(0)
    g = _gen(6)
    batch = {"x": torch.randn(3, 3, 16, 16, generator=g), "y": torch.tensor([1, 5, 9])}
    fallbacks = _compare(ViT(), batch, lambda m, b: F.cross_entropy(m(b["x"]), b["y"]), _adamw)
    assert fallbacks == {}, fallbacks


# ---------------------------------------------------------------------------------------------------------------
# Mixture of experts: top-k routing, expert load from bincount/histc, tokens combined with index_add_


class MoE(nn.Module):
    def __init__(self, d: int = 16, experts: int = 4, k: int = 2):
        super().__init__()
        self.k, self.n = k, experts
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d)) for _ in range(experts)
        )
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        probs = F.softmax(self.router(x), dim=-1)
        weights, chosen = torch.topk(probs, self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.n):
            token, slot = torch.where(chosen == e)
            y = self.experts[e](x[token]) * weights[token, slot].unsqueeze(-1)
            out = out.index_add(0, token, y)
        # Switch-style load-balancing loss: fraction of routed tokens per expert times mean router probability.
        load = torch.bincount(chosen.flatten(), minlength=self.n).float() / chosen.numel()
        hist = torch.histc(chosen.flatten().float(), bins=self.n, min=0, max=self.n - 1) / chosen.numel()
        aux = self.n * (load * probs.mean(0)).sum() + 0.0 * hist.sum()
        return self.head(out + x), aux


def test_moe():
    torch.manual_seed(0)
    g = _gen(7)
    batch = {"x": torch.randn(12, 16, generator=g), "y": torch.randn(12, 1, generator=g)}

    def loss_fn(m, b):
        pred, aux = m(b["x"])
        return F.mse_loss(pred, b["y"]) + 0.01 * aux

    fallbacks = _compare(MoE(), batch, loss_fn, _adamw)
    assert fallbacks == {}, fallbacks


# ---------------------------------------------------------------------------------------------------------------
# Hugging Face GPT-2 (only where transformers is installed): bf16 autocast training vs CPU


def test_hf_gpt2_autocast_bf16():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(
        vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    b = _gpt_batch()
    fallbacks = _compare(
        model,
        {"idx": b["idx"]},
        lambda m, d: m(input_ids=d["idx"], labels=d["idx"]).loss,
        _adamw,
        autocast=torch.bfloat16,
        tol={"rtol": 3e-2, "atol": 3e-2},
    )
    assert fallbacks == {}, fallbacks


class _TokenRows(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.rows = torch.randint(0, 64, (32, 16), generator=torch.Generator().manual_seed(1))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def _hf_trainer_run(transformers, tmp_path, use_cpu: bool) -> tuple[list[float], dict[str, torch.Tensor], str]:
    cfg = transformers.GPT2Config(
        vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / ("cpu" if use_cpu else "tpu")),
        bf16=True,
        use_cpu=use_cpu,
        max_steps=4,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        adam_epsilon=1e-5,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_TokenRows())
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    return losses, state, str(args.device)


def test_hf_trainer_bf16(tmp_path):
    """Hugging Face Trainer(bf16=True) picks the tpu by itself, trains with autocast, and matches the CPU run."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    torch_tpu.reset_op_counts()
    tpu_losses, tpu_state, device = _hf_trainer_run(transformers, tmp_path, use_cpu=False)
    fallbacks = dict(torch_tpu.metrics()["fallback_ops"])
    cpu_losses, cpu_state, _ = _hf_trainer_run(transformers, tmp_path, use_cpu=True)
    assert device.startswith("tpu"), device
    assert len(tpu_losses) == 4
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=3e-2, atol=3e-2)
    for k in cpu_state:
        _close(tpu_state[k], cpu_state[k], rtol=3e-2, atol=3e-2, what=k)
    assert fallbacks == {}, fallbacks
