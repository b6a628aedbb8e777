"""TorchTPU's `torch_tpu._internal.utils.utils`: `OpTracer` records the ATen ops a block dispatches (the same ops
on tpu as on CPU, with their counts), and `assert_close` accepts tpu results that match their CPU reference and
rejects, with a report, those that do not, in each of its modes."""

from __future__ import annotations

import pytest
import torch

import torch_tpu
from torch_tpu._internal.utils import tracer_utils
from torch_tpu._internal.utils.utils import CheckValueMode, OpTracer, assert_close


def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sum(0) * 2 + torch.nn.functional.gelu(x).mean()


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_op_tracer_records_the_same_ops_as_on_cpu(mode: str) -> None:
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    with OpTracer() as on_cpu:
        ref = block(x, w)
    xt, wt = x.to("tpu"), w.to("tpu")
    with torch_tpu.eager_mode(mode), OpTracer() as on_tpu:
        out = block(xt, wt)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    assert dict(on_tpu.ops_log) == dict(on_cpu.ops_log)
    aten = on_tpu.ops_log["aten"]
    for name in ("aten.mm.default", "aten.relu.default", "aten.sum.dim_IntList", "aten.gelu.default"):
        assert aten[name] == 1, aten
    assert aten["aten.mul.Tensor"] == 1 and on_tpu.num_atens() == sum(aten.values())


def test_op_tracer_as_decorator_starts_a_fresh_log_per_call() -> None:
    tracer = OpTracer()

    @tracer
    def twice(x: torch.Tensor) -> torch.Tensor:
        return (x + 1) + (x + 2)

    x = torch.arange(4.0, device="tpu")
    torch.testing.assert_close(twice(x).cpu(), torch.arange(4.0) * 2 + 3)
    twice(x)
    assert tracer.ops_log["aten"] == {"aten.add.Tensor": 3}
    wrapped = OpTracer()
    torch.testing.assert_close(wrapped(torch.sqrt)(x).cpu(), torch.arange(4.0).sqrt())
    assert wrapped.ops_log["aten"] == {"aten.sqrt.default": 1}
    text = tracer_utils.pformat_op_tracer(tracer)
    assert text.splitlines() == ["Ops for namespace: 'aten' (1 ops)", "  aten.add.Tensor: 3"]


def test_assert_close_passes_tpu_results_against_cpu() -> None:
    x = torch.randn(6, 7)
    xt = x.to("tpu")
    assert_close(xt.exp(), x.exp())
    assert_close([xt.sin(), (xt * 2,), None], [x.sin(), (x * 2,), None])
    assert_close(xt.to(torch.bfloat16) + 1, x.to(torch.bfloat16) + 1)
    assert_close((xt > 0).sum(), (x > 0).sum())
    assert_close(xt.half(), x.float(), check_dtype=False, check_value=CheckValueMode.LOOSE, atol=1e-3, rtol=1e-3)
    assert_close(xt + 5.0, x, check_value=CheckValueMode.SKIP)  # shapes and dtypes only


def test_assert_close_rejects_with_a_report() -> None:
    x = torch.randn(3, 4)
    off = x.clone()
    off[1, 2] += 0.5
    with pytest.raises(
        AssertionError, match=r"(?s)layer 3 output.*Largest differences:\n  at \(1, 2\).*To pass STRICT"
    ):
        assert_close(off.to("tpu"), x, preamble="layer 3 output")
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(x.to("tpu"), x.T)
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_close(x.to("tpu").double(), x)
    with pytest.raises(AssertionError, match="differ in length"):
        assert_close([x], [x, x])
    with pytest.raises(AssertionError, match="None"):
        assert_close(None, x)
    with pytest.raises(AssertionError, match="can only compare tensors"):
        assert_close(1.0, x)


def test_strict_needs_both_bounds_loose_either() -> None:
    expected = torch.tensor([0.0, 100.0, -0.0])
    actual = torch.tensor([5e-6, 100.0005, 0.0]).to("tpu")
    # within atol + rtol*|e| (LOOSE), but 5e-6 against an exact 0 has no relative bound (STRICT)
    assert_close(actual, expected, rtol=1e-5, atol=1e-5, check_value=CheckValueMode.LOOSE)
    with pytest.raises(AssertionError, match="no rtol passes STRICT"):
        assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    # 100.0005: relative error 5e-6 passes rtol=1e-5, absolute error 5e-4 fails atol=1e-4
    with pytest.raises(AssertionError, match="atol >= 0.000"):
        assert_close(actual[1:], expected[1:], rtol=1e-5, atol=1e-4)
    assert_close(actual[1:], expected[1:], rtol=1e-5, atol=1e-3)  # 0.0 against -0.0 passes


def test_callable_atol_is_elementwise() -> None:
    expected = torch.tensor([1.0, 10.0, 100.0])
    actual = (expected + torch.tensor([0.05, 0.5, 0.5])).to("tpu")

    def tenth(e: float) -> float:
        return abs(e) / 10

    assert_close(actual, expected, atol=tenth)
    with pytest.raises(AssertionError, match=r"(?s)2 of 3 elements.*at \(0,\).*at \(1,\)"):
        assert_close(actual, expected, atol=lambda e: abs(e) / 100)
    with pytest.raises(ValueError, match="rtol must be None"):
        assert_close(actual, expected, rtol=0.1, atol=tenth)


def test_loader_module_sets_up_device_and_backend() -> None:
    # Ray's TPU device manager calls torch_tpu._loader.load() to get tpu_dist registered; TorchTPU's own scripts call
    # _init_device("tpu").
    import torch.distributed as dist

    import torch_tpu._loader as loader

    loader.load()
    loader._init_device("tpu")
    assert "tpu_dist" in dist.Backend.backend_list and dist.Backend.default_device_backend_map["tpu"] == "tpu_dist"
    assert torch.tpu.is_available()
    with pytest.raises(ValueError, match="not 'npu'"):
        loader._init_device("npu")
