"""The fused LSTM/GRU cells PyTorch calls on tpu (_thnn_fused_*), lowered with their backwards, vs CPU's cells."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import torch_tpu
from tests.ops.harness import check


def _rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _cell(kind: str, bias: bool) -> nn.Module:
    torch.manual_seed(0)
    return (nn.LSTMCell if kind == "lstm" else nn.GRUCell)(5, 7, bias=bias)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_matches_cpu(kind, bias):
    cell = _cell(kind, bias)
    params = [p.detach() for p in cell.parameters()]
    x, h = _rand(3, 5), _rand(3, 7, seed=1)
    if kind == "lstm":
        c = _rand(3, 7, seed=2)

        def fn(x, h, c, *ps):
            return torch.lstm_cell(x, (h, c), *ps) if bias else torch.lstm_cell(x, (h, c), ps[0], ps[1])

        check(fn, x, h, c, *params, rtol=1e-5, atol=1e-6)
    else:

        def fn(x, h, *ps):
            return torch.gru_cell(x, h, *ps) if bias else torch.gru_cell(x, h, ps[0], ps[1])

        check(fn, x, h, *params, rtol=1e-5, atol=1e-6)
    counts = torch_tpu.metrics()["lowered_ops"]
    assert counts.get(f"aten::_thnn_fused_{kind}_cell", 0) == 1, counts


def test_lstm_cell_only_cy_used():
    # Only cy reaches the loss: the backward gets grad_hy = None.
    params = [p.detach() for p in _cell("lstm", True).parameters()]
    check(lambda x, h, c, *ps: torch.lstm_cell(x, (h, c), *ps)[1] * 2, _rand(3, 5), _rand(3, 7), _rand(3, 7), *params)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_reduced_precision(kind, dtype):
    cell = _cell(kind, True).to(dtype)
    params = [p.detach() for p in cell.parameters()]
    x, h, c = _rand(4, 5, dtype=dtype), _rand(4, 7, seed=1, dtype=dtype), _rand(4, 7, seed=2, dtype=dtype)
    if kind == "lstm":
        check(lambda x, h, c, *ps: torch.lstm_cell(x, (h, c), *ps), x, h, c, *params, rtol=2e-2, atol=2e-2)
    else:
        check(lambda x, h, *ps: torch.gru_cell(x, h, *ps), x, h, *params, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_multilayer_bidirectional(kind):
    torch.manual_seed(0)
    ref = (nn.LSTM if kind == "lstm" else nn.GRU)(4, 6, num_layers=2, bidirectional=True, batch_first=True)
    dev = copy.deepcopy(ref).tpu()
    results = []
    for m, device in ((ref, "cpu"), (dev, "tpu")):
        x = _rand(2, 5, 4).to(device).requires_grad_(True)
        h0 = _rand(4, 2, 6, seed=3).to(device)
        out, _ = m(x, (h0, h0 * 0.5) if kind == "lstm" else h0)
        (out * out).sum().backward()
        results.append([out.detach().cpu(), x.grad.cpu()] + [p.grad.cpu() for p in m.parameters()])
    for a, b in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics()["fallback_ops"] == {}


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_inference_mode(kind):
    torch.manual_seed(0)
    rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(4, 6)
    x = _rand(5, 2, 4)
    ref = rnn(x)[0].detach()
    rnn.tpu()
    torch_tpu.reset_op_counts()
    with torch.inference_mode():
        out = rnn(x.tpu())[0]
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics()["fallback_ops"] == {}


def test_double_backward_lstm_cell():
    # create_graph: core routes the backward through its differentiable composite, made of lowered ops.
    params = [p.detach() for p in _cell("lstm", True).parameters()]
    results = []
    for device in ("cpu", "tpu"):
        x = _rand(3, 5).to(device).requires_grad_(True)
        ps = [p.to(device) for p in params]
        h, c = torch.lstm_cell(x, (_rand(3, 7).to(device), _rand(3, 7, seed=1).to(device)), *ps)
        (gx,) = torch.autograd.grad((h * h).sum() + c.sum(), x, create_graph=True)
        (ggx,) = torch.autograd.grad(gx.pow(2).sum(), x)
        results.append((gx.detach().cpu(), ggx.cpu()))
    torch.testing.assert_close(results[1], results[0], rtol=1e-4, atol=1e-5)


def test_autocast_casts_cells():
    cell = _cell("lstm", True).tpu()
    with torch.autocast("tpu", dtype=torch.bfloat16):
        h, c = cell(_rand(2, 5).tpu())
    assert h.dtype == torch.bfloat16 and c.dtype == torch.bfloat16


def test_gru_cell_bad_shapes():
    with pytest.raises(RuntimeError, match="_thnn_fused_gru_cell"):
        torch.ops.aten._thnn_fused_gru_cell(_rand(2, 9).tpu(), _rand(2, 6).tpu(), _rand(2, 3).tpu())
    with pytest.raises(RuntimeError, match="_thnn_fused_gru_cell"):
        torch.ops.aten._thnn_fused_gru_cell(_rand(2, 9).tpu(), _rand(2, 9).tpu(), _rand(2, 4).tpu())
