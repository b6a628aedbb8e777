"""Strided views read and written through their storage, against CPU PyTorch: dense views, views that are a sub-box
of the reshaped storage (attention heads split off a fused q/k/v projection), and arbitrary as_strided views. The
head split must lower to slices and transposes, not to a gather of every element."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import torch_tpu
from tests.ops.harness import dumped_programs


def _view_specs(seed: int, count: int) -> Iterator[tuple[list[int], list[int], int, int]]:
    """(sizes, strides, offset, storage size): mostly nested strides with gaps (boxes), some arbitrary ones."""
    rng = random.Random(seed)
    for _ in range(count):
        rank = rng.randint(1, 4)
        sizes = [rng.randint(1, 5) for _ in range(rank)]
        order = list(range(rank))
        rng.shuffle(order)
        strides = [0] * rank
        step = rng.randint(1, 3)
        for dim in reversed(order):
            strides[dim] = step
            step = step * sizes[dim] + rng.choice([0, 1, 3, step])
        if rng.random() < 0.2:
            strides = [rng.randint(0, 7) for _ in range(rank)]
        offset = rng.randint(0, 5)
        last = offset + sum((s - 1) * t for s, t in zip(sizes, strides, strict=True))
        yield sizes, strides, offset, last + 1 + rng.choice([0, 0, 1, 10])


@pytest.mark.parametrize("seed", [0, 1])
def test_as_strided_reads_match_cpu(seed: int) -> None:
    torch_tpu.reset_op_counts()
    for sizes, strides, offset, total in _view_specs(seed, 150):
        base = torch.randn(total)
        expected = base.as_strided(sizes, strides, offset) * 1
        got = (base.to("tpu").as_strided(sizes, strides, offset) * 1).cpu()
        assert torch.equal(got, expected), (sizes, strides, offset, total)
    assert not torch_tpu.metrics()["fallback_ops"]


@pytest.mark.parametrize("seed", [2, 3])
def test_as_strided_writes_match_cpu(seed: int) -> None:
    for sizes, strides, offset, total in _view_specs(seed, 150):
        flat_index = torch.arange(total).as_strided(sizes, strides, offset)
        if flat_index.unique().numel() != flat_index.numel():
            continue  # overlapping targets: which write wins is up to the kernel
        base, update = torch.randn(total), torch.randn(sizes)
        on_tpu = base.to("tpu")
        base.as_strided(sizes, strides, offset).copy_(update)
        on_tpu.as_strided(sizes, strides, offset).copy_(update.to("tpu"))
        assert torch.equal(on_tpu.cpu(), base), ("copy_", sizes, strides, offset, total)
        on_tpu.as_strided(sizes, strides, offset).mul_(3)
        base.as_strided(sizes, strides, offset).mul_(3)
        assert torch.equal(on_tpu.cpu(), base), ("mul_", sizes, strides, offset, total)


def test_head_split_lowers_without_gather(tmp_path: Path) -> None:
    batch, seq, heads, head_dim = 3, 5, 4, 7  # shapes no other test compiles, so the programs are fresh
    d = heads * head_dim
    qkv = torch.randn(batch, seq, 3 * d)
    with dumped_programs(tmp_path) as programs:
        parts = qkv.to("tpu").split(d, dim=2)
        heads_tpu = [p.view(batch, seq, heads, head_dim).transpose(1, 2) * 2 for p in parts]
        got = [h.cpu() for h in heads_tpu]
        grads = torch.zeros(batch, seq, 3 * d).to("tpu")
        grads[:, :, d : 2 * d].view(batch, seq, heads, head_dim).transpose(1, 2).copy_(heads_tpu[1])
        got_grads = grads.cpu()
    for part, h in zip(qkv.split(d, dim=2), got, strict=True):
        assert torch.equal(h, part.view(batch, seq, heads, head_dim).transpose(1, 2) * 2)
    expected_grads = torch.zeros(batch, seq, 3 * d)
    expected_grads[:, :, d : 2 * d] = qkv[:, :, d : 2 * d] * 2
    assert torch.equal(got_grads, expected_grads)
    assert programs, "nothing was compiled"
    assert not any("stablehlo.gather" in p or "stablehlo.scatter" in p for p in programs)
    # k and v end past the storage as boxes anchored at their offsets; the box moves back instead of padding the
    # storage (a 1-D pad of a whole activation is a scalar loop on XLA-CPU).
    assert not any("stablehlo.pad" in p for p in programs)
