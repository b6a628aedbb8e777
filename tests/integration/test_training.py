"""Small models trained for 20 steps on tpu follow the CPU loss curve; nothing falls back; no buffers leak."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

import torch_tpu


def _train(model_fn, data, device: str, opt_name: str, steps: int = 20) -> list[float]:
    torch.manual_seed(0)
    model = model_fn().to(device)
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    elif opt_name == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    x, y = (t.to(device) for t in data)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 4),
    )


def _data(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(*shape, generator=g), torch.randint(0, 4, (shape[0],), generator=g)


@pytest.mark.parametrize("opt_name", ["sgd", "adam", "adamw"])
def test_mlp_matches_cpu(opt_name):
    data = _data((16, 8))
    torch_tpu.reset_op_counts()
    tpu = _train(_mlp, data, "tpu", opt_name)
    fallbacks = torch_tpu.metrics()["fallback_ops"]
    cpu = _train(_mlp, data, "cpu", opt_name)
    torch.testing.assert_close(tpu, cpu, rtol=1e-4, atol=1e-5)
    assert tpu[-1] < tpu[0]
    assert fallbacks == {}, fallbacks


def test_cnn_matches_cpu():
    data = _data((8, 1, 8, 8))
    torch_tpu.reset_op_counts()
    tpu = _train(_cnn, data, "tpu", "sgd")
    fallbacks = torch_tpu.metrics()["fallback_ops"]
    cpu = _train(_cnn, data, "cpu", "sgd")
    torch.testing.assert_close(tpu, cpu, rtol=1e-4, atol=1e-5)
    assert fallbacks == {}, fallbacks


def _device_buffers() -> int:
    """Live buffers, less the device copies of numbers kept for reuse (a bounded cache, not a leak)."""
    m = torch_tpu.metrics()
    return m["live_buffers"] - m["cached_scalars"]


def test_no_buffers_leak_after_training():
    gc.collect()
    live = _device_buffers()
    _train(_mlp, _data((16, 8)), "tpu", "adam", steps=3)
    gc.collect()
    assert _device_buffers() == live
