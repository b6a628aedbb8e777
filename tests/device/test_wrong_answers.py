"""Regressions for answers that were once silently wrong: Parameter identity across moves, writes the CPU fallback
dropped, conjugate/negative bits ignored on reads, fallback views that were copies, writes through overlapping
views, and buffers donated while another thread read them."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import torch_tpu


def _assert_close(tpu: torch.Tensor, cpu: torch.Tensor, **kw) -> None:
    assert tpu.device.type == "tpu"
    torch.testing.assert_close(tpu.cpu(), cpu, equal_nan=True, **kw)


# ---- Parameter identity -------------------------------------------------------------------------------------------


def test_module_to_keeps_parameter_objects():
    lin = nn.Linear(2, 2)
    w, b = lin.weight, lin.bias
    lin.to("tpu")
    assert lin.weight is w and lin.bias is b and w.device.type == "tpu"
    lin.to("cpu")
    assert lin.weight is w and w.device.type == "cpu"


@pytest.mark.parametrize("move", ["tpu:1", "half", "bfloat16", "double"])
def test_moves_between_tpu_devices_and_dtypes_keep_identity(move):
    if move == "tpu:1" and torch.tpu.device_count() < 2:
        pytest.skip("needs two tpu devices")
    lin = nn.Linear(3, 3).to("tpu")
    w = lin.weight
    expected = lin.weight.detach().cpu()
    if move == "tpu:1":
        lin.to("tpu:1")
        assert w.device == torch.device("tpu:1")
    else:
        getattr(lin, move)()
        expected = expected.to(getattr(torch, "float16" if move == "half" else move))
    assert lin.weight is w
    torch.testing.assert_close(w.detach().cpu(), expected)


def test_tied_weights_stay_tied_after_to():
    emb = nn.Embedding(5, 4)
    head = nn.Linear(4, 5, bias=False)
    head.weight = emb.weight
    model = nn.ModuleDict({"emb": emb, "head": head}).to("tpu")
    assert model["head"].weight is model["emb"].weight
    assert len(list(model.parameters())) == 1


def test_param_data_assignment_across_devices():
    p = nn.Parameter(torch.ones(3))
    p.data = torch.full((3,), 2.0, device="tpu")
    assert p.device.type == "tpu"
    _assert_close(p.detach(), torch.full((3,), 2.0))
    p.data = torch.zeros(3)
    assert p.device.type == "cpu"


def test_load_state_dict_assign_keeps_ties():
    src = nn.Linear(3, 3).to("tpu")
    dst = nn.Linear(3, 3, device="meta")
    dst.load_state_dict(src.state_dict(), assign=True)
    assert dst.weight.device.type == "tpu" and isinstance(dst.weight, nn.Parameter)
    _assert_close(dst.weight.detach(), src.weight.detach().cpu())


# ---- CPU fallback writes ------------------------------------------------------------------------------------------


def test_fallback_copies_back_written_list_arguments():
    """torch.optim.AdamW(fused=True) runs `_fused_adamw_` (Tensor(a!)[] lists) through the CPU fallback."""
    torch.manual_seed(0)
    ref = nn.Linear(4, 3)
    x = torch.randn(6, 4)
    results = {}
    for device in ("cpu", "tpu"):
        model = nn.Linear(4, 3)
        model.load_state_dict(ref.state_dict())
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
        for _ in range(3):
            opt.zero_grad()
            model(x.to(device)).pow(2).sum().backward()
            opt.step()
        results[device] = [p.detach().cpu() for p in model.parameters()]
        results[device] += [opt.state[p]["exp_avg_sq"].cpu() for p in model.parameters()]
    for a, b in zip(results["tpu"], results["cpu"], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_fallback_copies_back_annotated_running_stats():
    x = torch.randn(4, 3, 5)
    out = {}
    for device in ("cpu", "tpu"):
        rm, rv = torch.zeros(3, device=device), torch.ones(3, device=device)
        y = torch.ops.aten._native_batch_norm_legit(x.to(device), None, None, rm, rv, True, 0.3, 1e-5)[0]
        out[device] = (y.cpu(), rm.cpu(), rv.cpu())
    for a, b in zip(out["tpu"], out["cpu"], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_lowered_with_running_stats(training, dtype):
    torch_tpu.reset_op_counts()
    x = torch.randn(4, 3, 5, 2).to(dtype)
    stats = {}
    for device in ("cpu", "tpu"):
        bn = nn.BatchNorm2d(3).to(device)
        bn.running_mean.fill_(0.5)
        bn.train(training)
        xi = x.detach().to(device).requires_grad_()
        bn.to(dtype)
        y = bn(xi)
        y.float().pow(2).sum().backward()
        stats[device] = [y.detach(), xi.grad, bn.weight.grad, bn.bias.grad, bn.running_mean, bn.running_var]
        stats[device] = [t.detach().cpu().float() for t in stats[device]]
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 6e-2}
    for a, b in zip(stats["tpu"], stats["cpu"], strict=True):
        torch.testing.assert_close(a, b, **tol)
    fallbacks = torch_tpu.metrics()["fallback_ops"]
    assert "aten::native_batch_norm" not in fallbacks and "aten::native_batch_norm_backward" not in fallbacks


# ---- conjugate / negative bits ------------------------------------------------------------------------------------


def test_conj_view_reads_conjugated():
    x = torch.randn(6, dtype=torch.complex64)
    xt = x.to("tpu")
    _assert_close(xt.conj(), x.conj())
    _assert_close(xt.conj().resolve_conj(), x.conj().resolve_conj())
    _assert_close(xt.conj() * xt, x.conj() * x)
    _assert_close(torch._neg_view(xt), torch._neg_view(x).resolve_neg())


def test_write_through_conj_view():
    x = torch.randn(5, dtype=torch.complex64)
    y = torch.zeros(5, dtype=torch.complex64, device="tpu")
    y.conj().copy_(x.to("tpu"))
    _assert_close(y, x.conj())


@pytest.mark.parametrize("name", ["ifft", "hfft", "ihfft", "ihfft2", "ihfftn", "hfft2", "hfftn"])
def test_fft_family_forward_and_backward(name):
    real_input = name.startswith("ihfft")
    shape = (4, 6) if name[-1] in "2n" else (8,)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g) if real_input else torch.randn(*shape, dtype=torch.complex64, generator=g)
    fn = getattr(torch.fft, name)
    xc = x.clone().requires_grad_()
    xt = x.to("tpu").requires_grad_()
    yc, yt = fn(xc), fn(xt)
    _assert_close(yt.detach(), yc.detach(), rtol=1e-4, atol=1e-4)
    (yc.abs().sum() if yc.is_complex() else yc.sum()).backward()
    (yt.abs().sum() if yt.is_complex() else yt.sum()).backward()
    _assert_close(xt.grad, xc.grad, rtol=1e-4, atol=1e-4)


def test_view_as_real_is_a_view():
    x = torch.randn(4, dtype=torch.complex64)
    xt = x.to("tpu")
    r = torch.view_as_real(xt)
    _assert_close(r, torch.view_as_real(x))
    r.mul_(2)  # writes reach the complex tensor
    _assert_close(xt, x * 2)
    c = torch.view_as_complex(r)
    xt.add_(1)  # and the other way round
    _assert_close(c, x * 2 + 1)
    assert "aten::view_as_real" not in torch_tpu.metrics()["fallback_ops"]


def test_unfold_is_a_view():
    x = torch.arange(10.0)
    xt = x.to("tpu")
    u = xt.unfold(0, 4, 2)
    _assert_close(u, x.unfold(0, 4, 2))
    xt.mul_(3)
    _assert_close(u, (x * 3).unfold(0, 4, 2))


# ---- overlapping writes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["add_", "mul_", "copy_"])
def test_write_through_expanded_view_raises_like_cpu(op):
    for device in ("cpu", "tpu"):
        x = torch.ones(3, device=device).expand(2, 3)
        arg = torch.ones(2, 3, device=device) if op == "copy_" else 2
        with pytest.raises(RuntimeError, match="single memory location"):
            getattr(x, op)(arg)


# ---- threads ------------------------------------------------------------------------------------------------------


def test_inplace_writer_and_reader_threads():
    """One thread updates a tensor in place (donating its old buffer) while another keeps reading it."""
    x = torch.zeros(256, device="tpu")
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for _ in range(300):
                x.add_(1)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            stop.set()

    def reader() -> None:
        try:
            last = 0.0
            while not stop.is_set():
                s = (x * 1).sum().item()
                assert s >= last and s % 256 == 0, s
                last = s
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]
    _assert_close(x, torch.full((256,), 300.0))


@pytest.mark.parametrize("op", ["abs", "sgn", "neg", "exp", "reciprocal", "sum", "prod", "cumsum"])
def test_complex_unary_and_reductions_match_cpu(op):
    x = torch.randn(6, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    fn = (lambda t: t.cumsum(0)) if op == "cumsum" else (lambda t: getattr(t, op)())
    _assert_close(fn(x.to("tpu")), fn(x), rtol=1e-5, atol=1e-5)
