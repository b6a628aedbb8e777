"""torch.autocast("tpu") with CUDA's per-op policy, and GradScaler("tpu") (its two _amp_ ops lowered, no fallback)."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu


@pytest.fixture(autouse=True)
def _no_fallback(monkeypatch):
    torch_tpu.reset_op_counts()
    yield
    assert torch_tpu.metrics()["fallback_ops"] == {}


def _rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def test_default_dtype_and_supported_dtypes():
    assert torch.amp.is_autocast_available("tpu")
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert set(torch.tpu.get_amp_supported_dtype()) == {torch.bfloat16, torch.float16}
    assert torch.tpu.is_bf16_supported()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("entry", ["autocast", "amp"])
def test_lower_precision_ops(dtype, entry):
    a, b = _rand(4, 8), _rand(8, 3, seed=1)
    w, bias = _rand(5, 8, seed=2), _rand(5, seed=3)
    ctx = torch.autocast(device_type="tpu", dtype=dtype) if entry == "autocast" else torch.amp.autocast("tpu", dtype)
    with ctx:
        mm = a.tpu() @ b.tpu()
        lin = F.linear(a.tpu(), w.tpu(), bias.tpu())
        bmm = torch.bmm(a.tpu()[None], b.tpu()[None])
        conv = F.conv2d(_rand(1, 2, 5, 5).tpu(), _rand(3, 2, 3, 3, seed=4).tpu())
        ein = torch.einsum("ij,jk->ik", a.tpu(), b.tpu())
        add = a.tpu() + a.tpu()  # not listed: untouched
    for t in (mm, lin, bmm, conv, ein):
        assert t.dtype == dtype
    assert add.dtype == torch.float32
    # The values are those of the same op on inputs cast to `dtype` first.
    torch.testing.assert_close(mm.cpu(), a.to(dtype) @ b.to(dtype), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(lin.cpu(), F.linear(a.to(dtype), w.to(dtype), bias.to(dtype)), rtol=1e-2, atol=1e-2)


def test_sdpa_under_autocast():
    q, k, v = (_rand(1, 2, 4, 8, seed=s).tpu() for s in range(3))
    with torch.autocast("tpu"):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == torch.bfloat16
    ref = F.scaled_dot_product_attention(*(t.cpu().bfloat16() for t in (q, k, v)), is_causal=True)
    torch.testing.assert_close(out.cpu().float(), ref.float(), rtol=2e-2, atol=2e-2)


def test_fp32_ops():
    x = _rand(3, 6).tpu()
    with torch.autocast("tpu", dtype=torch.float16):
        h = x @ x.t()  # float16
        assert h.dtype == torch.float16
        assert torch.softmax(h, -1).dtype == torch.float32
        assert F.log_softmax(h, -1).dtype == torch.float32
        assert F.layer_norm(h, (3,)).dtype == torch.float32
        assert F.group_norm(h[None], 1).dtype == torch.float32
        assert torch.exp(h).dtype == torch.float32
        assert torch.log(h.abs() + 1).dtype == torch.float32
        assert torch.pow(h, 2).dtype == torch.float32
        assert h.sum().dtype == torch.float32
        assert h.cumsum(0).dtype == torch.float32
        assert torch.norm(h).dtype == torch.float32
        assert F.mse_loss(h, h.detach() + 1).dtype == torch.float32
        assert F.cross_entropy(h, torch.tensor([0, 1, 2], device="tpu")).dtype == torch.float32
    # The fp32 op runs on the float16 value widened to float32: the same as on the CPU.
    with torch.autocast("cpu", dtype=torch.float16):
        ref = torch.softmax(x.cpu() @ x.cpu().t(), -1)
    with torch.autocast("tpu", dtype=torch.float16):
        got = torch.softmax(x @ x.t(), -1)
    torch.testing.assert_close(got.cpu(), ref.float(), rtol=1e-3, atol=1e-3)


def test_promote_ops():
    lo = _rand(4, dtype=torch.bfloat16).tpu()
    hi = _rand(4, seed=1).tpu()
    with torch.autocast("tpu"):
        assert torch.addcmul(hi, lo, lo).dtype == torch.float32
        assert torch.cat([lo, hi]).dtype == torch.float32
        assert torch.stack([lo, hi]).dtype == torch.float32
        idx = torch.tensor([0, 2], device="tpu")
        assert torch.index_copy(hi, 0, idx, lo[:2]).dtype == torch.float32
        assert torch.dot(lo, hi).dtype == torch.float32
        assert torch.addcmul(lo, lo, lo).dtype == torch.bfloat16


def test_nesting_enabled_false_and_restore():
    a = _rand(4, 4).tpu()
    assert not torch.is_autocast_enabled("tpu")
    with torch.autocast("tpu", dtype=torch.float16):
        assert (a @ a).dtype == torch.float16
        with torch.autocast("tpu", enabled=False):
            assert not torch.is_autocast_enabled("tpu")
            assert (a @ a).dtype == torch.float32
        with torch.autocast("tpu", dtype=torch.bfloat16):
            assert (a @ a).dtype == torch.bfloat16
        assert torch.get_autocast_dtype("tpu") == torch.float16
        assert (a @ a).dtype == torch.float16
    assert not torch.is_autocast_enabled("tpu")
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert (a @ a).dtype == torch.float32
    # CPU autocast does not touch tpu tensors, nor tpu autocast CPU tensors.
    with torch.autocast("cpu"):
        assert (a @ a).dtype == torch.float32
    with torch.autocast("tpu"):
        assert (a.cpu() @ a.cpu()).dtype == torch.float32


def test_decorator_and_unsupported_dtype():
    @torch.autocast("tpu")
    def f(x):
        return x @ x

    assert f(_rand(2, 2).tpu()).dtype == torch.bfloat16
    with pytest.warns(UserWarning, match="Disabling autocast"):
        with torch.autocast("tpu", dtype=torch.float64):
            assert (_rand(2, 2).tpu() @ _rand(2, 2).tpu()).dtype == torch.float32


class _CountCasts(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.casts = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default:
            self.casts += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("cache_enabled", [True, False])
def test_weight_cast_cache(cache_enabled):
    lin = nn.Linear(8, 8).tpu()
    x = _rand(2, 8).tpu()
    with _CountCasts() as counter, torch.autocast("tpu", cache_enabled=cache_enabled):
        for _ in range(3):
            y = lin(x)
    assert y.dtype == torch.bfloat16
    # x is cast each call; the leaf weight and bias once with the cache, each call without it.
    assert counter.casts == (3 + 2 if cache_enabled else 9)
    torch.testing.assert_close(y.cpu(), F.linear(*(t.cpu().bfloat16() for t in (x, lin.weight, lin.bias))))


def test_backward_through_autocast():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    dev = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    dev.load_state_dict(ref.state_dict())
    dev.tpu()
    x, y = _rand(5, 8), torch.tensor([0, 1, 2, 3, 0])
    for model, device in ((ref, "cpu"), (dev, "tpu")):
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
        assert loss.dtype == torch.float32
        loss.backward()
    for p_cpu, p_tpu in zip(ref.parameters(), dev.parameters(), strict=True):
        assert p_tpu.grad.dtype == torch.float32
        torch.testing.assert_close(p_tpu.grad.cpu(), p_cpu.grad, rtol=3e-2, atol=3e-2)


def test_binary_cross_entropy_banned():
    p = torch.sigmoid(_rand(4).tpu())
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, torch.ones(4, device="tpu"))
    with torch.autocast("tpu"):
        assert F.binary_cross_entropy_with_logits(p, torch.ones(4, device="tpu")).dtype == torch.float32


def test_autocast_state_is_per_thread():
    seen: list[bool] = []
    with torch.autocast("tpu"):
        t = threading.Thread(target=lambda: seen.append(torch.is_autocast_enabled("tpu")))
        t.start()
        t.join()
    assert seen == [False]


# ---------------------------------------------------------------------------------------------------------------
# GradScaler


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_non_finite_check_and_unscale_matches_cpu(dtype):
    grads = [_rand(5, dtype=dtype), _rand(2, 3, dtype=dtype, seed=1), torch.zeros(0, dtype=dtype)]
    for case in range(4):
        gs = [g.clone() for g in grads]
        if case == 1:
            gs[0][2] = float("inf")
        elif case == 2:
            gs[1][1, 1] = float("nan")
        elif case == 3:
            gs[0][0] = float("-inf")
        for start in (0.0, 1.0):
            found_cpu, found_tpu = torch.full((1,), start), torch.full((1,), start, device="tpu")
            inv_cpu, inv_tpu = torch.full((1,), 0.125), torch.full((1,), 0.125, device="tpu")
            cpu = [g.clone() for g in gs]
            tpu = [g.tpu() for g in gs]
            torch._amp_foreach_non_finite_check_and_unscale_(cpu, found_cpu, inv_cpu)
            torch._amp_foreach_non_finite_check_and_unscale_(tpu, found_tpu, inv_tpu)
            assert found_tpu.item() == found_cpu.item(), (case, start)
            for c, t in zip(cpu, tpu, strict=True):
                assert t.dtype == dtype
                torch.testing.assert_close(t.cpu(), c, equal_nan=True)
    assert torch_tpu.metrics()["lowered_ops"].get("aten::_amp_foreach_non_finite_check_and_unscale_", 0) > 0


def test_update_scale_matches_cpu():
    scale_c, scale_t = torch.full((1,), 2.0**16), torch.full((1,), 2.0**16, device="tpu")
    tr_c, tr_t = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32, device="tpu")
    pattern = [0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0]
    for inf in pattern:
        f_c, f_t = torch.full((1,), float(inf)), torch.full((1,), float(inf), device="tpu")
        torch._amp_update_scale_(scale_c, tr_c, f_c, 2.0, 0.5, 3)
        out = torch._amp_update_scale_(scale_t, tr_t, f_t, 2.0, 0.5, 3)
        assert out is scale_t
        assert scale_t.item() == scale_c.item()
        assert tr_t.item() == tr_c.item()
    # Growth that would overflow float32 keeps the scale.
    big_c, big_t = torch.full((1,), 3e38), torch.full((1,), 3e38, device="tpu")
    tr_c, tr_t = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32, device="tpu")
    torch._amp_update_scale_(big_c, tr_c, torch.zeros(1), 2.0, 0.5, 1)
    torch._amp_update_scale_(big_t, tr_t, torch.zeros(1, device="tpu"), 2.0, 0.5, 1)
    assert big_t.item() == big_c.item() and tr_t.item() == tr_c.item() == 0


def _scaler_run(device: str, steps: int = 10):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # A scale large enough that float16 gradients overflow at first: steps are skipped and the scale backs off.
    scaler = torch.amp.GradScaler(device, init_scale=2.0**20, growth_interval=2)
    x, y = _rand(6, 8).to(device), torch.tensor([0, 1, 2, 3, 0, 1], device=device)
    scales, losses = [], []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses, [p.detach().cpu() for p in model.parameters()]


def test_grad_scaler_matches_cpu():
    scales_t, losses_t, params_t = _scaler_run("tpu")
    scales_c, losses_c, params_c = _scaler_run("cpu")
    assert scales_t == scales_c
    assert scales_c[0] < 2.0**20  # the first step overflowed and was skipped
    assert any(b > a for a, b in zip(scales_c[:-1], scales_c[1:], strict=True))  # and the scale grew again later
    torch.testing.assert_close(losses_t, losses_c, rtol=2e-2, atol=2e-2)
    for a, b in zip(params_t, params_c, strict=True):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)
    counts = torch_tpu.metrics()["lowered_ops"]
    assert counts.get("aten::_amp_update_scale_", 0) > 0


def _fused_scaler_run(device: str, steps: int = 5):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**24, growth_interval=2)
    x, y = _rand(6, 8).to(device), torch.tensor([0, 1, 2, 3, 0, 1], device=device)
    syncs, losses = [], []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(model(x) * 1000, y)
        scaler.scale(loss).backward()
        before = torch_tpu.metrics()["host_syncs"]  # (backward's own index checks may wait in debug mode)
        scaler.step(opt)
        scaler.update()
        syncs.append(torch_tpu.metrics()["host_syncs"] - before)
        losses.append(loss.item())
    return syncs, losses, scaler.get_scale(), [p.detach().cpu() for p in model.parameters()]


def test_grad_scaler_fused_optimizer_never_syncs():
    # A fused optimizer takes found_inf as a tensor: unscale, step and update all stay on the device.
    syncs, losses_t, scale_t, params_t = _fused_scaler_run("tpu")
    _, losses_c, scale_c, params_c = _fused_scaler_run("cpu")
    assert syncs == [0] * len(syncs)
    assert scale_t == scale_c
    torch.testing.assert_close(losses_t, losses_c, rtol=2e-2, atol=2e-2)
    for a, b in zip(params_t, params_c, strict=True):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)
