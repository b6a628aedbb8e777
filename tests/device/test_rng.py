"""Random numbers on tpu: reproducible under torch.manual_seed, equal to CPU draws, state round trips."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import torch_tpu


def test_manual_seed_matches_cpu_draws():
    for fn in (
        lambda d: torch.rand(5, 3, device=d),
        lambda d: torch.randn(7, device=d),
        lambda d: torch.randint(0, 100, (6,), device=d),
        lambda d: torch.empty(4, device=d).normal_(2, 3),
        lambda d: torch.empty(4, device=d).uniform_(-1, 1),
        lambda d: torch.bernoulli(torch.full((8,), 0.5, device=d)),
    ):
        torch.manual_seed(123)
        a = fn("tpu")
        torch.manual_seed(123)
        b = fn("cpu")
        assert a.device.type == "tpu"
        torch.testing.assert_close(a.cpu(), b)


def test_rng_state_round_trip():
    state = torch.tpu.get_rng_state()
    a = torch.rand(4, device="tpu")
    torch.tpu.set_rng_state(state)
    b = torch.rand(4, device="tpu")
    assert torch.equal(a.cpu(), b.cpu())
    assert len(torch.tpu.get_rng_state_all()) == torch.tpu.device_count()


def test_generator_objects():
    g = torch.Generator(device="tpu")
    assert g.device.type == "tpu"
    g.manual_seed(7)
    a = torch.rand(3, device="tpu", generator=g)
    g.manual_seed(7)
    b = torch.rand(3, device="tpu", generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    torch.tpu.manual_seed(5)
    assert torch.tpu.initial_seed() == 5


def test_dropout_reproducible_and_scaled():
    x = torch.ones(1000, device="tpu")
    torch.manual_seed(0)
    a = F.dropout(x, 0.3)
    torch.manual_seed(0)
    b = F.dropout(x, 0.3)
    assert torch.equal(a.cpu(), b.cpu())
    kept = a.cpu()[a.cpu() != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / 0.7))
    assert 600 < kept.numel() < 800
    assert torch.equal(F.dropout(x, 0.3, training=False).cpu(), x.cpu())


def test_random_ops_are_host_ops_not_fallbacks():
    torch_tpu.reset_op_counts()
    torch.rand(3, device="tpu")
    m = torch_tpu.metrics()
    assert m["host_ops"].get("aten::uniform_") == 1
    assert m["fallback_ops"] == {}
