"""float8 tensors (e4m3fn, e5m2 and their fnuz variants) on tpu, against CPU PyTorch bit for bit: conversions from
float32, bfloat16 and integers (rounding, subnormals, saturation at e4m3fn's largest value, infinities and NaN), the
copies and layout ops CPU implements for float8, and the quantize-dequantize pattern FP8 recipes use (a scaled cast
and back), eagerly and under torch.compile. They once raised "tpu does not support dtype Float8_e4m3fn"."""

from __future__ import annotations

import pytest
import torch

import torch_tpu  # noqa: F401

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]
EDGES = [0.0, -0.0, 1.0, -2.5, 0.1, 3e-3, 1e-3, 240.0, 250.0, 448.0, 460.0, 480.0, 1000.0, -1000.0, 57344.0, 6e4]
EDGES += [1e6, float("inf"), -float("inf"), 2**-9, 2**-10, 2**-16, 2**-17, 2**-18, 0.0625 + 2**-8]


def same_values(cpu: torch.Tensor, tpu: torch.Tensor) -> None:
    tpu = tpu.cpu()
    assert tpu.dtype == cpu.dtype
    a, b = cpu.float(), tpu.float()
    assert torch.equal(a.isnan(), b.isnan())
    # equal values, signed zeros included (NaN payloads may differ: e5m2's NaN is 0x7F on CPU, 0x7E from XLA)
    ok = a.isnan() | ((a == b) & (a.signbit() == b.signbit()))
    assert bool(ok.all()), (a[~ok], b[~ok])


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
@pytest.mark.parametrize("source", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_conversion_rounds_and_saturates_as_cpu(dtype: torch.dtype, source: torch.dtype) -> None:
    values = torch.tensor(EDGES + [float("nan")]).to(source)
    values = torch.cat([values, torch.randn(512, generator=torch.Generator().manual_seed(0)).to(source) * 300])
    same_values(values.to(dtype), values.to("tpu").to(dtype))
    # and back: every float8 value converts exactly to the wider types
    as_f8 = values.to(dtype)
    same_values(as_f8.to(source), as_f8.to("tpu").to(source))


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_integer_sources_and_targets(dtype: torch.dtype) -> None:
    ints = torch.tensor([-2000, -500, -449, -448, -3, 0, 7, 100, 449, 470, 500, 30000], dtype=torch.int32)
    same_values(ints.to(dtype), ints.to("tpu").to(dtype))
    f8 = (torch.randn(64, generator=torch.Generator().manual_seed(1)) * 50).to(dtype)
    assert torch.equal(f8.to(torch.int32), f8.to("tpu").to(torch.int32).cpu())


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_layout_ops_and_copies(dtype: torch.dtype) -> None:
    x = (torch.randn(6, 8, generator=torch.Generator().manual_seed(2)) * 100).to(dtype)
    t = x.to("tpu")
    assert torch.equal(t.cpu().view(torch.uint8), x.view(torch.uint8))  # the bytes travel unchanged
    cases = [
        (lambda v: torch.cat([v, v.flip(0)]), "cat/flip"),
        (lambda v: v.t().contiguous(), "transpose"),
        (lambda v: v[[0, 2, 4], 1:5], "index"),
        (lambda v: torch.where(v.float() > 0, v, torch.zeros_like(v)), "where"),
        (lambda v: v.clone().fill_(3.3), "fill"),
        (lambda v: v.abs(), "abs"),
        (lambda v: v.clone().copy_(torch.full(v.shape, 500.0, device=v.device)), "copy_ from float32"),
    ]
    for fn, what in cases:
        same_values(fn(x), fn(t))
        assert what


def _fake_quant(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # per-row scaled cast, as FP8 training recipes and weight-only FP8 quantization do
    scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / torch.finfo(dtype).max
    return (x / scale).to(dtype).to(x.dtype) * scale


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_scaled_cast_round_trip_eager_and_compiled(dtype: torch.dtype) -> None:
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(3)) * 3
    want = _fake_quant(x, dtype)
    torch.testing.assert_close(_fake_quant(x.to("tpu"), dtype).cpu(), want, rtol=0, atol=0)
    compiled = torch.compile(lambda v: _fake_quant(v, dtype), backend="tpu")
    for _ in range(2):  # the second call replays the captured program
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), want, rtol=0, atol=0)


def test_stablehlo_spelling_of_float8_arguments() -> None:
    from torch_tpu._internal import stablehlo_text

    assert stablehlo_text.tensor_type([2, 3], torch.float8_e4m3fn) == "tensor<2x3xf8E4M3FN>"
    assert stablehlo_text.tensor_type([], torch.float8_e5m2) == "tensor<f8E5M2>"


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_numbers_that_overflow_the_dtype_raise_as_on_cpu(dtype: torch.dtype) -> None:
    # torch.full / fill_ check their number against the dtype (only e5m2 holds infinities); tpu saturated instead
    for value in (float("inf"), -float("inf"), 1e6, 300.0, float("nan"), 1.5):
        try:
            want = torch.full((2,), value, dtype=dtype)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=str(e)):
                torch.full((2,), value, dtype=dtype, device="tpu").cpu()
            continue
        same_values(want, torch.full((2,), value, dtype=dtype, device="tpu"))
