"""Quantized tpu tensors against the CPU's: per-tensor and per-channel affine storage, quantize/dequantize, int_repr,
quantizer queries, copies both ways, views, printing; and the int8 weight-only linear that runs on the device."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import torch_tpu
from torch_tpu.quantization import Int8WeightOnlyLinear

pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")


def _x() -> torch.Tensor:
    return torch.randn(4, 6, generator=torch.Generator().manual_seed(0)) * 3


@pytest.mark.parametrize(("dtype", "zp"), [(torch.qint8, 3), (torch.quint8, 128), (torch.qint32, -7)])
def test_per_tensor_matches_cpu(dtype, zp):
    x = _x()
    want = torch.quantize_per_tensor(x, 0.05, zp, dtype)
    got = torch.quantize_per_tensor(x.to("tpu"), 0.05, zp, dtype)
    assert got.device.type == "tpu" and got.dtype == dtype and got.is_quantized
    assert got.qscheme() == torch.per_tensor_affine and got.q_scale() == 0.05 and got.q_zero_point() == zp
    assert torch.equal(got.int_repr().cpu(), want.int_repr())
    assert torch.equal(got.dequantize().cpu(), want.dequantize())
    assert not torch_tpu.metrics()["fallback_ops"].get("quantize_per_tensor")


def test_per_channel_matches_cpu():
    x = _x()
    g = torch.Generator().manual_seed(1)
    scales = torch.rand(6, generator=g, dtype=torch.float64) * 0.1 + 0.01
    zps = torch.randint(-5, 5, (6,), generator=g)
    want = torch.quantize_per_channel(x, scales, zps, 1, torch.qint8)
    got = torch.quantize_per_channel(x.to("tpu"), scales, zps, 1, torch.qint8)
    assert got.qscheme() == torch.per_channel_affine and got.q_per_channel_axis() == 1
    assert torch.equal(got.q_per_channel_scales(), want.q_per_channel_scales())
    assert torch.equal(got.q_per_channel_zero_points(), want.q_per_channel_zero_points())
    assert torch.equal(got.int_repr().cpu(), want.int_repr())
    # The CPU dequantizes per-channel tensors in float64; tpu (like CUDA) in float32: equal within an ulp.
    torch.testing.assert_close(got.dequantize().cpu(), want.dequantize(), atol=1e-6, rtol=1e-6)
    back = got.cpu()
    assert back.qscheme() == torch.per_channel_affine and torch.equal(back.int_repr(), want.int_repr())


def test_copies_views_and_printing():
    x = _x()
    want = torch.quantize_per_tensor(x, 0.1, 2, torch.qint8)
    got = torch.quantize_per_tensor(x.to("tpu"), 0.1, 2, torch.qint8)
    back = got.cpu()
    assert back.is_quantized and back.device.type == "cpu" and torch.equal(back.int_repr(), want.int_repr())
    there = want.to("tpu")
    assert there.device.type == "tpu" and torch.equal(there.int_repr().cpu(), want.int_repr())
    assert torch.equal(got[1:3].dequantize().cpu(), want[1:3].dequantize())
    assert torch.equal(got.t().int_repr().cpu(), want.t().int_repr())
    text = repr(got)
    assert "tpu:0" in text and "quantization_scheme=torch.per_tensor_affine" in text and "scale=0.1" in text


def test_int8_weight_only_linear_runs_on_device_and_matches_cpu():
    torch.manual_seed(0)
    linear = nn.Linear(32, 16)
    x = torch.randn(2, 5, 32)
    cpu_q = Int8WeightOnlyLinear.from_float(linear)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tpu_q = Int8WeightOnlyLinear.from_float(linear.to("tpu"))
    assert tpu_q.weight_int8.device.type == "tpu" and tpu_q.weight_int8.dtype == torch.int8
    assert torch.equal(tpu_q.weight_int8.cpu(), cpu_q.weight_int8)
    before = torch_tpu.metrics()
    y = tpu_q(x.to("tpu"))
    after = torch_tpu.metrics()
    assert after["executions"] - before["executions"] == 1  # dequantize + matmul + bias: one program
    assert after["fallback_ops"] == before["fallback_ops"]
    torch.testing.assert_close(y.cpu(), cpu_q(x), atol=1e-5, rtol=1e-5)
    # and close to the float layer (int8 rounding error only)
    torch.testing.assert_close(y.cpu(), linear.cpu()(x).detach(), atol=0.05, rtol=0.05)


def test_bad_quantized_requests_raise_clearly():
    x = torch.randn(3, device="tpu")
    with pytest.raises(RuntimeError, match="axis 2 is out of range"):
        torch.quantize_per_channel(
            torch.randn(2, 3, device="tpu"), torch.ones(3), torch.zeros(3, dtype=torch.long), 2, torch.qint8
        )
    q = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    with pytest.raises(RuntimeError, match="dequantize"):
        q.to(torch.float32)
