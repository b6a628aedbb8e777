"""The main demo: a small character-level transformer trained on tpu, written exactly as one would for CUDA.

Corpus: text that ships with Python (its license and the docstrings of standard modules), so it runs offline.
Run: `make demo` (or `python examples/train_char_transformer.py --steps 300 --device tpu`).
"""

from __future__ import annotations

import argparse
import importlib
import math
import sysconfig
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

MODULES = [
    "argparse",
    "collections",
    "json",
    "re",
    "unittest",
    "logging",
    "pathlib",
    "functools",
    "itertools",
    "dataclasses",
    "typing",
    "subprocess",
    "threading",
    "asyncio",
    "inspect",
    "textwrap",
    "string",
]


def load_corpus() -> str:
    parts = [Path(sysconfig.get_paths()["stdlib"], "LICENSE.txt").read_text(encoding="utf-8", errors="replace")]
    for name in MODULES:
        doc = importlib.import_module(name).__doc__
        if doc:
            parts.append(doc)
    return "\n\n".join(parts)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, block: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(dropout))
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, d)
        return self.drop(self.proj(y))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    def __init__(self, vocab: int, block: int, d: int = 64, heads: int = 4, layers: int = 2, dropout: float = 0.1):
        super().__init__()
        self.block = block
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.Sequential(*[Block(d, heads, block, dropout) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        return self.head(self.ln(self.blocks(x)))

    @torch.no_grad()
    def sample(self, prompt: list[int], n: int, pad: int) -> list[int]:
        # The context is always one full block (left-padded with `pad`), so every step runs the same shapes: one set
        # of compiled programs instead of one per context length.
        device = self.head.weight.device
        tokens = list(prompt)
        for _ in range(n):
            ctx = ([pad] * self.block + tokens)[-self.block :]
            logits = self(torch.tensor([ctx], device=device))[:, -1]
            tokens.append(int(torch.multinomial(F.softmax(logits, dim=-1), 1).item()))
        return tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="tpu")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--sample", type=int, default=200)
    args = p.parse_args()

    text = load_corpus()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    print(f"corpus: {len(text)} characters, vocabulary {len(chars)}; device {args.device}")

    torch.manual_seed(0)
    device = torch.device(args.device)
    model = CharTransformer(len(chars), args.block).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    print(f"model: {sum(p.numel() for p in model.parameters())} parameters")

    start = time.perf_counter()
    window = time.perf_counter()
    for step in range(1, args.steps + 1):
        ix = torch.randint(len(data) - args.block - 1, (args.batch,))
        xb = torch.stack([data[i : i + args.block] for i in ix]).to(device)
        yb = torch.stack([data[i + 1 : i + args.block + 1] for i in ix]).to(device)
        logits = model(xb)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), yb.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 25 == 0 or step == 1:
            now = time.perf_counter()
            rate = (25 if step > 1 else 1) / (now - window)
            window = now
            print(f"step {step:4d}  loss {loss.item():.3f}  {rate:.2f} steps/s")
    print(f"trained {args.steps} steps in {time.perf_counter() - start:.1f} s")

    model.eval()
    out = model.sample([stoi[c] for c in "The "], args.sample, pad=stoi[" "])
    print("sample:\n" + "".join(chars[i] for i in out))
    if device.type == "tpu":
        from torch_tpu import info

        print()
        print(info.report())


if __name__ == "__main__":
    main()
