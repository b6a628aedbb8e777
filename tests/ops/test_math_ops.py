"""Pointwise math, special functions, activations and scans lowered in math.cpp/special.cpp/activations.cpp/scans.cpp,
against CPU PyTorch: forward and backward, float32/bfloat16/float64, edge values, non-contiguous and 0-d inputs, and
no CPU fallbacks (check() fails on any)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)
INF, NAN = float("inf"), float("nan")
# Edge values every unary op sees (no subnormals: XLA-CPU flushes them to zero).
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-6, -1e-6, 10.0, -10.0, 80.0, -80.0, 1e30, -1e30, INF, -INF, NAN]


def r(*shape: int, lo: float = -3.0, hi: float = 3.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.rand(*shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def edges(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(EDGES, dtype=dtype)


def grid(lo: float, hi: float, n: int = 401, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.linspace(lo, hi, n, dtype=torch.float64).to(dtype)


BF16 = {"rtol": 1.6e-2, "atol": 1e-5}
F32 = {"rtol": 1.3e-6, "atol": 1e-5}

# name -> (function, domain for random/grid samples)
UNARY = {
    "acos": (torch.acos, (-1, 1)),
    "asin": (torch.asin, (-1, 1)),
    "atan": (torch.atan, (-20, 20)),
    "acosh": (torch.acosh, (1, 50)),
    "asinh": (torch.asinh, (-50, 50)),
    "atanh": (torch.atanh, (-0.99, 0.99)),
    "cosh": (torch.cosh, (-85, 85)),
    "sinh": (torch.sinh, (-85, 85)),
    "exp2": (torch.exp2, (-140, 127)),
    "log2": (torch.log2, (1e-30, 1e30)),
    "log10": (torch.log10, (1e-30, 1e30)),
    "frac": (torch.frac, (-100, 100)),
    "sinc": (torch.sinc, (-10, 10)),
    "angle": (torch.angle, (-5, 5)),
    "lgamma": (torch.lgamma, (-10, 40)),
    "digamma": (torch.digamma, (-10, 40)),
    "trigamma": (lambda x: torch.polygamma(1, x), (-10, 40)),
    "polygamma2": (lambda x: torch.polygamma(2, x), (-5.5, 30)),
    "polygamma3": (lambda x: torch.polygamma(3, x), (-5.5, 30)),
    "erfinv": (torch.erfinv, (-1, 1)),
    "erfc": (torch.erfc, (-5, 10)),
    "entr": (torch.special.entr, (0, 5)),
    "signbit": (torch.signbit, (-5, 5)),
    "mvlgamma": (lambda x: torch.mvlgamma(x, 3), (1.01, 20)),
    "i0": (torch.i0, (-30, 30)),
    "i0e": (torch.special.i0e, (-30, 30)),
    "i1": (torch.special.i1, (-30, 30)),
    "i1e": (torch.special.i1e, (-30, 30)),
}
# Differentiable ones get a gradient check on their random samples.
NO_GRAD = {"signbit", "frac", "angle", "polygamma2", "polygamma3", "entr"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32_dense_grid(name):
    fn, (lo, hi) = UNARY[name]
    check(fn, grid(lo, hi, 2001), grad=False, **F32)


@pytest.mark.parametrize("name", sorted(set(UNARY) - {"mvlgamma"}))
def test_unary_edge_values(name):
    fn, _ = UNARY[name]
    check(fn, edges(), grad=False, **F32)
    check(fn, edges(torch.float64), grad=False)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_bfloat16_rounds_once(name):
    fn, (lo, hi) = UNARY[name]
    check(fn, grid(lo, hi, 501, torch.bfloat16), grad=False, **BF16)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float64(name):
    fn, (lo, hi) = UNARY[name]
    check(fn, grid(lo, hi, 301, torch.float64), grad=False, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("name", sorted(set(UNARY) - NO_GRAD))
def test_unary_backward_noncontiguous_and_0d(name):
    fn, (lo, hi) = UNARY[name]
    x = r(6, 5, lo=lo, hi=hi).t()  # non-contiguous
    check(fn, x, rtol=1e-5, atol=1e-5)
    check(fn, torch.tensor((lo + hi) / 2 + 0.1), rtol=1e-5, atol=1e-5)


def test_unary_inplace_and_out():
    x = r(4, 5, lo=-0.9, hi=0.9)
    check(lambda t: t.clone().asin_(), x, grad=False)
    check(lambda t: torch.acos(t, out=torch.empty_like(t)), x, grad=False)
    check(lambda t: t.clone().lgamma_(), x, grad=False)


def test_unary_integer_inputs_promote():
    x = torch.arange(-5, 6)
    for fn in (torch.atan, torch.exp2, torch.sinh, torch.lgamma, torch.digamma, torch.signbit, torch.angle):
        check(fn, x, grad=False)
    check(torch.log2, torch.arange(1, 1025), grad=False)  # powers of two exact


def test_log2_exact_at_powers_of_two():
    x = torch.tensor([2.0**k for k in range(-126, 128)])
    assert torch.equal(torch.log2(x.to("tpu")).cpu(), torch.log2(x))


def test_exp2_exact_at_integers():
    x = torch.arange(-126, 128, dtype=torch.float32)  # normal results (XLA-CPU flushes subnormals)
    assert torch.equal(torch.exp2(x.to("tpu")).cpu(), torch.exp2(x))


def test_signbit_negative_zero_and_nan():
    x = torch.tensor([0.0, -0.0, -NAN, NAN, -INF, 1.0])
    assert torch.equal(torch.signbit(x.to("tpu")).cpu(), torch.signbit(x))


# ---- binary ----

BINARY = {
    "copysign": torch.copysign,
    "xlogy": torch.xlogy,
    "xlog1py": torch.special.xlog1py,
    "hypot": torch.hypot,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "nextafter": torch.nextafter,
    "heaviside": torch.heaviside,
}


def edge_pairs(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    e = edges(dtype)
    return e.repeat_interleave(len(EDGES)), e.repeat(len(EDGES))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_binary_edges(name, dtype):
    a, b = edge_pairs(dtype)
    tol = BF16 if dtype == torch.bfloat16 else {}
    check(BINARY[name], a, b, grad=False, **tol)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast_noncontiguous(name):
    a = r(5, 4).t()
    b = r(4, 1, lo=0.1, hi=3)
    grad = name not in ("nextafter", "heaviside")
    check(BINARY[name], a, b, grad=grad, rtol=1e-5, atol=1e-5)
    check(BINARY[name], torch.tensor(0.7), torch.tensor(1.3), grad=grad)


def test_binary_scalar_operands():
    x = r(3, 4)
    check(lambda t: torch.copysign(t, -1.0), x)
    check(lambda t: torch.xlogy(t, 2.5), x)
    check(lambda t: torch.xlogy(2.0, t.abs()), x)
    check(lambda t: torch.special.xlog1py(t, 0.5), x)


def test_hypot_large_and_logaddexp_large():
    a = torch.tensor([1e30, 3e38, 1e-30, 0.0, -3e38])
    b = torch.tensor([1e30, 3e38, 1e-30, 0.0, 1.0])
    check(torch.hypot, a, b, grad=False)
    check(torch.logaddexp, a * 1e-36, b * 1e-36, grad=False)


def test_binary_integer_inputs_promote():
    a, b = torch.arange(-3, 3), torch.tensor([2, -1, 0, 3, 1, -2])
    for fn in (torch.copysign, torch.xlogy, torch.heaviside):
        check(fn, a, b, grad=False)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.logaddexp(a.to("tpu"), b.to("tpu"))


def test_polygamma_orders():
    x = grid(-4.3, 12, 301)
    for n in range(5):
        check(lambda t, n=n: torch.polygamma(n, t), x, grad=False, rtol=1e-5, atol=1e-5)
    check(lambda t: torch.polygamma(2, t), r(4, 3, lo=0.2, hi=5), rtol=1e-5, atol=1e-5)


# ---- activations ----

ACTIVATIONS = {
    "elu": lambda x: F.elu(x, 0.7),
    "celu": lambda x: F.celu(x, 1.3),
    "selu": F.selu,
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "softplus": lambda x: F.softplus(x, 2.0, 5.0),
    "softshrink": lambda x: F.softshrink(x, 0.4),
    "hardshrink": lambda x: F.hardshrink(x, 0.4),
    "glu": lambda x: F.glu(x, 0),
    "glu_last": lambda x: F.glu(x, -1),
    "prelu": lambda x: F.prelu(x, torch.tensor([0.25], device=x.device, dtype=x.dtype)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward_backward(name):
    x = r(6, 8, lo=-6, hi=6)
    check(ACTIVATIONS[name], x, rtol=1e-5, atol=1e-5)
    check(ACTIVATIONS[name], x[:, ::2], rtol=1e-5, atol=1e-5)  # non-contiguous


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_bfloat16(name):
    # glu's bfloat16 gradient: ours rounds once from float32; PyTorch's CPU kernel differs in a few small elements.
    check(ACTIVATIONS[name], r(6, 8, lo=-6, hi=6, dtype=torch.bfloat16), grad=not name.startswith("glu"), **BF16)


@pytest.mark.parametrize("name", sorted(set(ACTIVATIONS) - {"glu", "glu_last"}))
def test_activation_edges(name):
    check(ACTIVATIONS[name], edges(), grad=False)


def test_activation_inplace_and_edge_grads():
    x = torch.tensor([-3.0, 3.0, 0.0, -0.4, 0.4, 20.0, -1.0])
    for fn in (F.hardswish, F.hardsigmoid, lambda t: F.softshrink(t, 0.4), lambda t: F.hardshrink(t, 0.4), F.elu):
        check(fn, x)
    check(lambda t: F.elu(t.clone(), inplace=True), r(4, 4))
    check(lambda t: F.hardswish(t.clone(), inplace=True), r(4, 4), grad=False)


def test_prelu_per_channel_weight_grad():
    w = torch.tensor([0.1, 0.2, 0.3])
    check(lambda x, ww: F.prelu(x, ww), r(2, 3, 4, 5), w)


def test_glu_odd_dim_raises():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(torch.ones(3, 5, device="tpu"), -1)


# ---- scans and reductions ----


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_forward_backward(dim):
    check(lambda x: torch.cumprod(x, dim), r(5, 6, lo=0.5, hi=1.5), rtol=1e-5, atol=1e-5)
    check(lambda x: torch.cumprod(x, dim), r(6, 5, lo=-1.5, hi=1.5).t(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_forward_backward(dim):
    # _logcumsumexp has no meta kernel in PyTorch: torch_tpu._meta supplies one, so it runs lowered (no fallback).
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(3)) * 30
    x[1, 2] = -float("inf")
    check(lambda a: torch.logcumsumexp(a, dim), x)
    check(lambda a: torch.logcumsumexp(a, 0), torch.randn(5).bfloat16(), rtol=1.6e-2, atol=1e-2)


def test_cumprod_dtypes_and_prod_backward_with_zeros():
    check(lambda x: torch.cumprod(x, 0), torch.arange(1, 9), grad=False)
    check(lambda x: torch.cumprod(x, 0, dtype=torch.float64), r(7), grad=False)
    check(lambda x: torch.cumprod(x, 1), r(4, 16, lo=0.5, hi=1.5, dtype=torch.bfloat16), grad=False, **BF16)
    x = torch.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, 0.5]])
    check(lambda t: torch.prod(t, 1), x)
    check(lambda t: torch.prod(t), x)
    check(lambda t: torch.cumprod(t, 0), torch.tensor(3.0))


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
def test_cummax_cummin_values_indices(fn):
    x = torch.tensor([[1.0, NAN, 3.0, 3.0, NAN, 0.0, 5.0], [2.0, 2.0, -1.0, 4.0, 4.0, -INF, INF]])
    check(lambda t: fn(t, 1), x, grad=False)
    check(lambda t: fn(t, 0), r(5, 4), rtol=1e-5, atol=1e-5)
    check(lambda t: fn(t, 0), torch.randint(-3, 3, (9, 2), generator=g), grad=False)
    check(lambda t: fn(t, 0), torch.tensor([False, True, False, True]), grad=False)
    check(lambda t: fn(t, 0), torch.tensor(2.0), grad=False)


def test_isin_variants():
    e = torch.randint(0, 20, (4, 6), generator=g)
    t = torch.tensor([3, 7, 11, 19])
    check(torch.isin, e, t, grad=False)
    check(lambda a, b: torch.isin(a, b, invert=True), e, t, grad=False)
    check(lambda a: torch.isin(a, 7), e, grad=False)
    check(lambda b: torch.isin(7, b), t, grad=False)
    check(torch.isin, r(5), torch.tensor([0.5, NAN]), grad=False)
    check(torch.isin, e, torch.tensor([], dtype=torch.int64), grad=False)


def test_count_nonzero_nansum_aminmax():
    x = torch.tensor([[0.0, 1.0, NAN, -2.0], [0.0, 0.0, 3.0, INF]])
    check(torch.count_nonzero, x, grad=False)
    check(lambda t: torch.count_nonzero(t, 1), x, grad=False)
    check(lambda t: torch.count_nonzero(t, (0, 1)), x, grad=False)
    check(torch.nansum, x)
    check(lambda t: torch.nansum(t, 1, keepdim=True), x)
    check(lambda t: torch.nansum(t, 0), x.to(torch.bfloat16), grad=False, **BF16)
    check(torch.aminmax, x, grad=False)
    check(lambda t: torch.aminmax(t, dim=1, keepdim=True), x, grad=False)
    check(lambda t: torch.aminmax(t, dim=0), torch.randint(-5, 5, (3, 4), generator=g), grad=False)


def test_norm_and_dist():
    x, y = r(4, 5), r(4, 5)
    for p in (1, 2, 3, INF, 0):
        check(lambda a, b, p=p: torch.dist(a, b, p), x, y, rtol=1e-5, atol=1e-5, grad=p != 0)
    check(lambda a: torch.norm(a, 2, dim=1, keepdim=True), x)


def test_no_fallbacks_counted():
    torch_tpu.reset_op_counts()
    x = r(3, 4).to("tpu")
    torch.lgamma(x)
    torch.hypot(x, x)
    F.hardswish(x)
    torch.cumprod(x, 0)
    torch.isin(x, x[0])
    assert not torch_tpu.metrics()["fallback_ops"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fn", [torch.addcmul, torch.addcdiv])
def test_addcmul_addcdiv_value_keeps_full_precision(fn, dtype):
    # PyTorch reads `value` as float32 (not rounded to the tensor dtype) and rounds the result once.
    x, t1, t2 = r(5, 5, dtype=dtype), r(5, 1, dtype=dtype), r(1, 5, lo=0.5, hi=2, dtype=dtype)
    expected = fn(x, t1, t2, value=3.14)
    actual = fn(x.to("tpu"), t1.to("tpu"), t2.to("tpu"), value=3.14).cpu()
    assert torch.equal(actual, expected)


def test_equal_reads_one_value():
    a = r(4, 5)
    t = a.to("tpu")
    assert torch.equal(t, t.clone())
    assert not torch.equal(t, t + 1)
    assert not torch.equal(t, t[:3])
    assert torch.equal(t, a.double().to("tpu"))  # compares values after promotion, as on the CPU
    n = torch.tensor([NAN]).to("tpu")
    assert not torch.equal(n, n)
    assert torch.equal(torch.empty(0, device="tpu"), torch.empty(0, device="tpu"))
    torch_tpu.reset_op_counts()
    torch.equal(t, t.t().contiguous().t())
    assert not torch_tpu.metrics()["fallback_ops"]


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, INF])
def test_renorm(p):
    x = r(4, 3, 5)
    check(lambda t: torch.renorm(t, p, 1, 2.0), x, rtol=1e-5, atol=1e-5)
    check(lambda t: torch.renorm(t, p, 0, 0.5), x.transpose(0, 2), rtol=1e-5, atol=1e-5)
    check(lambda t: torch.renorm(t, p, -1, 1.0), x.to(torch.bfloat16), grad=False, **BF16)


# ---- complex results: complex(), polar(), complex numbers as operands ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_and_polar(dtype):
    g = torch.Generator().manual_seed(5)
    re, im = torch.randn(3, 4, generator=g, dtype=dtype), torch.randn(4, generator=g, dtype=dtype)
    check(torch.complex, re, im, grad=False)
    check(lambda r, t: torch.polar(r.abs(), t), re, im)  # backward multiplies by 1j


def test_complex_numbers_as_operands_are_not_reused_across_values():
    # A Python complex number reaches the kernels as a CPU scalar (mul.Tensor) or as a Scalar (alpha); both must
    # work, and a cached program must never keep an earlier value.
    z = torch.randn(5, dtype=torch.complex64, generator=torch.Generator().manual_seed(6))
    for c in (1j, 2j, 3 - 1j, -0.5 + 0.25j):
        torch.testing.assert_close((z.to("tpu") * c).cpu(), z * c)
        torch.testing.assert_close((z.to("tpu") + c).cpu(), z + c)
        torch.testing.assert_close(torch.add(z.to("tpu"), z.to("tpu"), alpha=c).cpu(), torch.add(z, z, alpha=c))
    assert not torch_tpu.metrics()["fallback_ops"]
