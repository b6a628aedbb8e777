"""Accuracy against a float64 answer, compared with CPU PyTorch's own error: float32 sums over many elements (XLA-CPU
adds a reduction's terms one after another unless the lowering splits it) and float32 erfinv near +-1."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import torch_tpu
from tests.ops.harness import dumped_programs


def _mean_errors(x: torch.Tensor, dims: tuple[int, ...]) -> tuple[float, float]:
    exact = x.double().sum(dims)
    cpu = (x.sum(dims).double() - exact).abs().mean().item()
    tpu = (x.to("tpu").sum(dims).cpu().double() - exact).abs().mean().item()
    return cpu, tpu


@pytest.mark.parametrize(
    ("shape", "dims"),
    [
        ((16, 64, 32, 32), (0, 2, 3)),  # BatchNorm statistics and conv bias gradients
        ((2, 4, 22, 22, 19), (0, 2, 3, 4)),
        ((200003,), (0,)),  # no divisor near its square root: padded
        ((4096, 64), (0,)),  # leading dimensions: summed by halving
        ((16384, 64), (0,)),
        ((32, 48, 256), (0, 1)),
    ],
)
def test_large_float32_sums_are_as_accurate_as_cpu(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    g = torch.Generator().manual_seed(0)
    cpu_err = tpu_err = 0.0
    for _ in range(4):
        x = torch.randn(*shape, generator=g) + 0.5  # a nonzero mean makes the running sum grow
        c, t = _mean_errors(x, dims)
        cpu_err, tpu_err = cpu_err + c, tpu_err + t
    # Summed term by term, the first two shapes were 29x and 33x CPU's error.
    assert tpu_err <= 2.5 * cpu_err, (tpu_err, cpu_err)


@pytest.mark.parametrize(
    ("shape", "dims", "keepdim"),
    [
        ((7, 5), (0,), False),  # odd row counts: padded with a zero row at every odd step
        ((13, 3, 2), (0, 1), True),
        ((5, 3, 7), (0, 2), False),  # a leading and a trailing dimension: the trailing one first
        ((6, 4, 3, 5), (0, 2, 3), True),  # BatchNorm's statistics
        ((0, 3), (0,), False),  # an empty sum
        ((3, 0, 4), (0,), True),
        ((1, 9), (0,), False),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_sums_over_leading_dimensions_match_cpu(shape, dims, keepdim, dtype) -> None:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    got = x.to("tpu").sum(dims, keepdim=keepdim).cpu()
    torch.testing.assert_close(got, x.sum(dims, keepdim=keepdim))
    mean = x.to("tpu").mean(dims, keepdim=keepdim).cpu()
    torch.testing.assert_close(mean, x.mean(dims, keepdim=keepdim), equal_nan=True)  # empty: nan, as on CPU


def test_leading_dimension_sums_lower_to_row_additions(tmp_path: Path) -> None:
    # XLA-CPU's reduce over a leading dimension loads one strided term at a time; rows added elementwise vectorize.
    x = torch.randn(37, 11, 6)  # a shape no other test compiles, so the program is fresh
    with dumped_programs(tmp_path) as programs:
        got = x.to("tpu").sum((0, 1)).cpu()
    torch.testing.assert_close(got, x.sum((0, 1)))
    assert programs, "nothing was compiled"
    assert not any("stablehlo.reduce" in p for p in programs)
    assert any("stablehlo.slice" in p for p in programs)


def test_sum_of_mean_and_batch_norm_statistics() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 16, 24, 24, generator=g) * 3 + 10
    bn_cpu, bn_tpu = torch.nn.BatchNorm2d(16), torch.nn.BatchNorm2d(16).to("tpu")
    torch_tpu.reset_op_counts()
    out = bn_tpu(x.to("tpu")).cpu()
    torch.testing.assert_close(out, bn_cpu(x))
    torch.testing.assert_close(bn_tpu.running_mean.cpu(), bn_cpu.running_mean)
    torch.testing.assert_close(bn_tpu.running_var.cpu(), bn_cpu.running_var)
    torch.testing.assert_close(x.to("tpu").mean((0, 2, 3)).cpu(), x.mean((0, 2, 3)))
    assert not torch_tpu.metrics()["fallback_ops"]


def test_erfinv_float32_within_half_an_ulp_near_one() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.cat([1 - torch.rand(4000, generator=g) * 1e-3, torch.rand(4000, generator=g) * 2 - 1])
    x = torch.cat([x, -x, torch.tensor([0.99999994, -0.99999994, 0.7, 0.0, 1.0, -1.0, 1.5])])
    exact = torch.erfinv(x.double())
    got = torch.erfinv(x.to("tpu")).cpu()
    torch.testing.assert_close(got.isnan(), exact.isnan())
    finite = exact.isfinite()
    assert torch.equal(got[~finite].nan_to_num(), exact[~finite].float().nan_to_num())
    ulp = torch.finfo(torch.float32).eps * exact[finite].abs().clamp_min(torch.finfo(torch.float32).tiny)
    err = ((got[finite].double() - exact[finite]).abs() / ulp).max().item()
    assert err <= 0.5 + 1e-6, f"{err} ulps (XLA's float32 erf_inv alone is ~50 ulps off near 1)"
    # The backward multiplies by exp(erfinv(x)^2): it inherits the accuracy.
    leaf = x[:8000].clone().requires_grad_()
    leaf_tpu = x[:8000].to("tpu").requires_grad_()
    torch.erfinv(leaf).sum().backward()
    torch.erfinv(leaf_tpu).sum().backward()
    torch.testing.assert_close(leaf_tpu.grad.cpu(), leaf.grad, rtol=2e-6, atol=0)
