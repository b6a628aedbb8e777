"""Numerical edge cases of lowered ops against CPU PyTorch: NaN/Inf/-0., half-precision accumulation, integer
dtypes, empty inputs, argument positions of out= overloads, and PyTorch's errors. Every check also asserts that
nothing fell back to the CPU, so the values come from the lowerings. The seeded fuzz over all elementwise and
reduction rows is in test_numerics_fuzz.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tests.ops.numerics_compare import assert_same, compare, lowered_only, t

nan, inf = float("nan"), float("inf")

# ---- 1. argument positions of out= overloads ---------------------------------------------------------------


def test_div_out_overloads() -> None:
    a, b = t([1.0, -7.0, 5.0]), t([2.0, 2.0, -3.0])
    compare(lambda x, y: torch.div(x, y, out=torch.empty(3, device=x.device)), a, b)
    for mode in ("floor", "trunc"):
        compare(lambda x, y, m=mode: torch.div(x, y, rounding_mode=m, out=torch.empty(3, device=x.device)), a, b)
    compare(lambda x, y: torch.floor_divide(x, y, out=torch.empty(3, device=x.device)), a, b)


def test_reduction_out_overloads_keep_their_dims() -> None:
    x = torch.arange(1.0, 13.0).reshape(3, 4)
    compare(lambda v: torch.prod(v, 1, out=torch.empty(0, device=v.device)), x)
    compare(lambda v: torch.all(v > 3, 0, out=torch.empty(0, dtype=torch.bool, device=v.device)), x)
    compare(lambda v: torch.any(v > 11, 1, out=torch.empty(0, dtype=torch.bool, device=v.device)), x)
    compare(lambda v: torch.sum(v, (0,), out=torch.empty(0, device=v.device)), x)
    compare(lambda v: torch.mean(v, (1,), out=torch.empty(0, device=v.device)), x)


# ---- 2. transposed convolutions, forward and backward ------------------------------------------------------


CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize(
    ("stride", "padding", "output_padding", "dilation", "groups"),
    [(1, 0, 0, 1, 1), (2, 1, 1, 1, 2), (3, 2, 2, 1, 1), (1, 0, 1, 2, 1), (2, 1, 1, 3, 2), (3, 0, 2, 2, 2)],
)
def test_conv_transpose(nd: int, stride: int, padding: int, output_padding: int, dilation: int, groups: int) -> None:
    g = torch.Generator().manual_seed(nd * 100 + stride * 10 + dilation)
    x = torch.randn(2, 4, *(5, 4, 3)[:nd], generator=g)
    w = torch.randn(4, 3, *(3, 2, 2)[:nd], generator=g)
    bias = torch.randn(3 * groups, generator=g)

    def run(device: str) -> list[torch.Tensor]:
        leaves = [v.detach().to(device).requires_grad_() for v in (x, w, bias)]
        y = CONV_T[nd](*leaves, stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                       dilation=dilation)  # fmt: skip
        seed = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(device)
        y.backward(seed)
        return [y.detach()] + [v.grad for v in leaves]

    expected = run("cpu")
    with lowered_only():
        actual = run("tpu")
    assert_same(actual, expected, rtol=1e-4, atol=1e-4)


# ---- 3. unary ops on integer and bool tensors --------------------------------------------------------------

INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool])
@pytest.mark.parametrize(
    "fn",
    [torch.ceil, torch.floor, torch.round, torch.trunc, torch.abs, torch.sign, torch.sgn, torch.neg, torch.square,
     torch.bitwise_not, torch.relu, F.gelu, F.silu, F.softplus, torch.exp, torch.sqrt],
)  # fmt: skip
def test_unary_on_integers(dtype: torch.dtype, fn: Callable[..., Any]) -> None:
    if dtype == torch.bool:
        x = t([True, False, True])
    else:
        info = torch.iinfo(dtype)
        x = t([0, 1, 7, info.max, info.min, info.min + 1], torch.int64).to(dtype)
    compare(fn, x)


# ---- 4. histc ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "dtype", "bins", "lo", "hi"),
    [
        ([1.0, 2.0, nan, 5.0, 3.0, -1.0], torch.float32, 3, 0, 3),
        ([2.0, 2.0], torch.float32, 3, 0, 0),
        ([0.1, 0.2, 0.30000001, 0.7, 0.8], torch.float32, 7, 0.1, 0.8),
        ([0, 1, 1, 7, 3, 3, 3, 9, -1], torch.int32, 8, 0, 7),
        ([4, -5, 8, 8, 0], torch.int64, 5, 0, 0),
        ([3, 3, 3], torch.int8, 4, 0, 0),
        ([0.5, -0.25, 0.75, 1.0], torch.float16, 4, -1, 1),
        ([0.5, -0.25, 0.75, 1.0], torch.bfloat16, 3, 0, 0),
        ([1.5, 2.5, 1e10], torch.float64, 4, 0, 0),
        ([], torch.float32, 3, 0, 0),
    ],
)
def test_histc(values: list[float], dtype: torch.dtype, bins: int, lo: float, hi: float) -> None:
    x = t(values, torch.float64).to(dtype)
    expected = torch.histc(x.float() if not x.is_floating_point() else x, bins=bins, min=lo, max=hi).to(dtype)
    with lowered_only():
        actual = torch.histc(x.to("tpu"), bins=bins, min=lo, max=hi)
    assert_same(actual, expected)


def test_histc_large_random() -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.rand(20000, generator=g)
    ints = torch.randint(0, 64, (20000,), generator=g, dtype=torch.int32)
    with lowered_only():
        for bins, lo, hi in [(7, 0.1, 0.8), (13, 0.0, 1.0), (100, 0.05, 0.95), (10, 0, 0)]:
            assert_same(torch.histc(x.to("tpu"), bins, lo, hi), torch.histc(x, bins, lo, hi))
        # MoE routing: expert counts of integer expert ids.
        counts = torch.histc(ints.to("tpu"), bins=64, min=0, max=63)
        assert_same(counts, torch.bincount(ints, minlength=64).to(torch.int32))


# ---- 5. NaN propagation ------------------------------------------------------------------------------------


SPECIAL = [1.0, nan, -2.0, inf, -inf, 0.0, -0.0, nan, 3.0]


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch.maximum(a, b),
        lambda a, b: torch.minimum(a, b),
        lambda a, b: torch.max(a, b),
        lambda a, b: torch.fmax(a, b),
        lambda a, b: torch.fmin(a, b),
        lambda a, b: torch.clamp(a, min=b),
        lambda a, b: torch.clamp(a, max=b),
        lambda a, b: torch.clamp(a, b, b + 1),
        lambda a, b: torch.clamp_min(a, b),
    ],
)
def test_nan_binary(fn: Callable[..., Any]) -> None:
    v = t(SPECIAL)
    a, b = v.repeat_interleave(len(SPECIAL)), v.repeat(len(SPECIAL))
    compare(fn, a, b)


@pytest.mark.parametrize(
    "fn",
    [
        torch.max,
        torch.min,
        torch.amax,
        torch.amin,
        torch.argmax,
        torch.argmin,
        lambda x: x.max(dim=1),
        lambda x: x.min(dim=1),
        lambda x: x.max(dim=0, keepdim=True),
        lambda x: torch.amax(x, 1),
        lambda x: torch.argmax(x, 1),
        lambda x: torch.argmin(x, 0),
        lambda x: torch.clamp(x, -1.0, 1.0),
        lambda x: torch.clamp(x, nan, 1.0),
        F.hardtanh,
        torch.relu,
        torch.sign,
        lambda x: torch.linalg.vector_norm(x, inf, 1),
        lambda x: torch.linalg.vector_norm(x, -inf, 1),
    ],
)
def test_nan_reductions_and_unary(fn: Callable[..., Any]) -> None:
    x = t([[1.0, nan, 2.0, nan], [3.0, -1.0, 0.5, 2.0], [-inf, inf, nan, 0.0]])
    compare(fn, x)


# ---- 6. half-precision reductions accumulate in float32 ------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "fn",
    [
        torch.std,
        torch.var,
        torch.var_mean,
        torch.std_mean,
        torch.linalg.vector_norm,
        torch.norm,
        torch.sum,
        torch.mean,
        lambda x: torch.prod(x / 100),
        lambda x: torch.cumsum(x, 0),
        lambda x: torch.softmax(x, 0),
        lambda x: torch.log_softmax(x, 0),
    ],
)
def test_half_reductions(dtype: torch.dtype, fn: Callable[..., Any]) -> None:
    for values in ([300.0, -300.0, 100.0], [6e4, 6e4, -6e4], [1.0, 1e-3, 250.0, -17.5, 3e4]):
        compare(fn, t(values).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("exponent", [-2.0, -1.0, -0.5, 0.5, 2.0, 3.0, 1.5])
def test_half_pow_scalar_exact(dtype: torch.dtype, exponent: float) -> None:
    """PyTorch's pow kernels for these exponents (x*x*x and 1/(x*x) round x*x first in bfloat16, not in float16)."""
    x = (torch.rand(4096, generator=torch.Generator().manual_seed(0)) * 3 + 0.05).to(dtype)
    with lowered_only():
        actual = x.to("tpu").pow(exponent).cpu()
    assert torch.equal(actual, x.pow(exponent))


def test_half_sum_exact() -> None:
    """float16 sums accumulate in float32 as CPU's do: 6e4 + 6e4 overflows float16 but not the accumulator."""
    big = torch.tensor([6e4, 6e4, -6e4], dtype=torch.float16)
    spread = torch.tensor([300.0, -300.0, 100.0], dtype=torch.float16)
    with lowered_only():
        assert torch.equal(big.to("tpu").sum().cpu(), big.sum())
        assert torch.equal(spread.to("tpu").std().cpu(), spread.std())
    assert big.sum().isfinite()  # the case is the one where float16 accumulation would give inf


# ---- 7. erf and gelu at the extremes -----------------------------------------------------------------------


def test_erf_saturates() -> None:
    x = t([-1e30, -1e6, -10.0, -4.0, -3.95, 3.95, 4.0, 10.0, 1e6, 1e30, inf, -inf, nan, 0.0, -0.0])
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        compare(torch.erf, x.to(dtype))
    with lowered_only():
        assert torch.erf(torch.tensor([-1e6, 1e6], device="tpu")).tolist() == [-1.0, 1.0]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_extremes(approximate: str) -> None:
    # +inf is left out: CPU's own answer differs between its vectorized (nan) and scalar (inf) paths.
    values = [-1e30, -1e6, -10.0, -3.9, -1.0, 0.0, -0.0, 1.0, 3.9, 10.0, 1e6, 1e30, -inf, nan]
    x = t(values)

    def fwd_bwd(v: torch.Tensor) -> list[torch.Tensor]:
        v = v.detach().requires_grad_()
        y = F.gelu(v, approximate=approximate)
        (grad,) = torch.autograd.grad(y.sum(), v)
        return [y.detach(), grad]

    compare(fwd_bwd, x, rtol=1e-5, atol=1e-6)
    with lowered_only():
        y = F.gelu(torch.tensor([-10.0, -1e6, -1e30], device="tpu"), approximate=approximate).cpu()
    assert (y == 0).all() and torch.signbit(y).all()


# ---- 8. floor division, remainder, fmod with signs and specials ----------------------------------------------


FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -7.0, 1e30, -1e30, inf, -inf, nan]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        torch.floor_divide,
        torch.remainder,
        torch.fmod,
        lambda a, b: a / b,
    ],
)
def test_float_division_signs(dtype: torch.dtype, fn: Callable[..., Any]) -> None:
    v = t(FLOATS).to(dtype)
    a, b = v.repeat_interleave(len(FLOATS)), v.repeat(len(FLOATS))
    expected = fn(a, b)
    with lowered_only():
        actual = fn(a.to("tpu"), b.to("tpu")).cpu()
    torch.testing.assert_close(actual, expected, equal_nan=True)
    zeros = expected == 0
    assert torch.equal(torch.signbit(actual[zeros]), torch.signbit(expected[zeros])), "signed zeros differ"


def test_floor_div_by_inf() -> None:
    with lowered_only():
        r = torch.div(torch.tensor([-0.5, 0.5], device="tpu"), inf, rounding_mode="floor").cpu()
    assert r.tolist() == [-1.0, 0.0] and not torch.signbit(r[1])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_division_nonzero(dtype: torch.dtype) -> None:
    info = torch.iinfo(dtype)
    v = t([1, 2, 3, 7, -1, -3, -8, info.max, info.min], torch.int64).to(dtype)
    a, b = v.repeat_interleave(len(v)), v.repeat(len(v))
    # Division by zero may give anything; INT_MIN / -1 overflows (undefined in C++): both left out.
    keep = (b != 0) & ~((a == info.min) & (b == -1))
    a, b = a[keep], b[keep]
    for fn in (torch.floor_divide, torch.remainder, torch.fmod, lambda x, y: torch.div(x, y, rounding_mode="trunc")):
        compare(fn, a, b)


# ---- 9. integer pow ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_pow(dtype: torch.dtype) -> None:
    info = torch.iinfo(dtype)
    bases = [0, 1, 2, 3, 7, -1, -2, -3, info.max, info.min]
    exps = [0, 1, 2, 3, 5, 8, 13, 31, 63, 64, 100, 132, -1, -2, -3]
    b = t(bases, torch.int64).to(dtype)
    e = t([x for x in exps if info.min <= x <= info.max], torch.int64).to(dtype)
    compare(lambda x, y: x.reshape(-1, 1) ** y.reshape(1, -1), b, e)
    for k in (0, 1, 2, 3, 5, 64, 132):
        compare(lambda x, k=k: x**k, b)
    compare(lambda x: x**-1, b)  # CPU refuses negative scalar powers of integers
    compare(lambda y: 2 ** y, e)  # fmt: skip
    compare(lambda y: torch.pow(3, y), e)


def test_integer_pow_examples() -> None:
    with lowered_only():
        assert (torch.tensor([2], device="tpu") ** torch.tensor([64], device="tpu")).item() == 0
        assert (torch.tensor([3], dtype=torch.uint8, device="tpu") ** 132).item() == 81


# ---- 10. PyTorch's errors for reductions without an identity ---------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        torch.max,
        torch.min,
        torch.amax,
        torch.amin,
        torch.argmax,
        torch.argmin,
        lambda x: x.max(dim=0),
        lambda x: x.min(dim=-2),
        lambda x: x.max(dim=1),
        lambda x: x.amax(0),
        lambda x: x.amin(-2),
        lambda x: x.amax((0, 1)),
        lambda x: x.argmax(0),
        lambda x: x.argmin(1),
        torch.prod,
        lambda x: x.prod(0),
        torch.sum,
        lambda x: x.std(0),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_empty_reductions(fn: Callable[..., Any], dtype: torch.dtype) -> None:
    x = torch.empty(0, 3, dtype=dtype)
    compare(fn, x)


@pytest.mark.parametrize(
    "fn", [torch.max, torch.min, torch.amax, torch.amin, torch.argmax, torch.argmin, lambda x: x.max(1), torch.prod]
)
def test_bool_reductions(fn: Callable[..., Any]) -> None:
    compare(fn, t([[True, False], [False, False]]))


# ---- found on the way: NaN/Inf in pooling, scatter_reduce, activation backwards, half-precision losses ---------


POOL_INPUT = t([[1.0, nan, 3.0, -1.0], [inf, 2.0, -inf, 0.5], [0.1, 0.2, 0.3, 0.4], [nan, nan, 1.0, 2.0]])


@pytest.mark.parametrize(
    "fn",
    [
        lambda v: F.max_pool2d(v, 2, return_indices=True),
        lambda v: F.max_pool2d(v, 2, 1, return_indices=True),
        lambda v: F.adaptive_avg_pool2d(v, 3),
        lambda v: F.adaptive_avg_pool2d(v, 1),
        lambda v: F.adaptive_avg_pool2d(v, (2, 3)),
        lambda v: F.avg_pool2d(v, 2),
    ],
)
def test_pooling_specials(fn: Callable[..., Any]) -> None:
    compare(fn, POOL_INPUT.reshape(1, 1, 4, 4))
    compare(fn, POOL_INPUT.reshape(1, 4, 4).half())


@pytest.mark.parametrize("mode", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_nan(mode: str, include_self: bool) -> None:
    index = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 0, 1, 2, 3, 0, 1, 2, 3])
    base = t([0.0, nan, 0.0, 0.0])
    compare(
        lambda s, i, v: s.scatter_reduce(0, i, v, mode, include_self=include_self), base, index, POOL_INPUT.flatten()
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda s, i, v: s.scatter_add(0, i, v),
        lambda s, i, v: s.scatter(0, i, v, reduce="add"),
        lambda s, i, v: s.scatter_reduce(0, i, v, "sum"),
        lambda s, i, v: s.scatter_reduce(0, i, v, "mean"),
        lambda s, i, v: s.scatter_reduce(0, i, v, "mean", include_self=False),
        lambda s, i, v: s.scatter_reduce(0, i, v / 64 + 1, "prod"),
        lambda s, i, v: s.index_add(0, i, v),  # CPU's index_add and index_reduce accumulate in the tensor's type
        lambda s, i, v: s.index_reduce(0, i, v, "mean"),
    ],
)
def test_half_scatter_accumulation(dtype: torch.dtype, fn: Callable[..., Any]) -> None:
    """2000 updates into 3 slots: CPU's scatter family sums float16/bfloat16 in float32 and rounds once (bfloat16
    summed in its own type drifts by several percent and counts stall at 256); exact equality with CPU."""
    gen = torch.Generator().manual_seed(0)
    values = (torch.randn(2000, generator=gen) * 3).to(dtype)
    index = torch.randint(0, 3, (2000,), generator=gen)
    expected = fn(torch.ones(3, dtype=dtype), index, values)
    with lowered_only():
        actual = fn(torch.ones(3, dtype=dtype, device="tpu"), index.to("tpu"), values.to("tpu")).cpu()
    assert torch.equal(actual, expected), (actual, expected)


@pytest.mark.parametrize(
    "fn",
    [
        F.relu,
        F.hardtanh,
        F.relu6,
        lambda v: F.threshold(v, 0.5, -1.0),
        F.leaky_relu,
        lambda v: torch.logit(v / 8),
        lambda v: torch.logit(v / 8, 1e-3),
    ],
)
def test_activation_backward_nan(fn: Callable[..., Any]) -> None:
    def grad_of(v: torch.Tensor) -> torch.Tensor:
        v = v.detach().requires_grad_()
        return torch.autograd.grad(fn(v).sum(), v)[0]

    compare(grad_of, t([-2.0, -1.0, 0.0, 0.5, 1.0, 6.0, 7.0, nan, inf, -inf]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "fn",
    [
        F.mse_loss,
        F.smooth_l1_loss,
        F.huber_loss,
        lambda a, b: F.mse_loss(a, b, reduction="sum"),
    ],
)
def test_half_losses_round_elements(dtype: torch.dtype, fn: Callable[..., Any]) -> None:
    a = t([300.0, -300.0, 100.0, 0.5, 2.0]).to(dtype)
    compare(fn, a, torch.zeros(5, dtype=dtype))
    compare(fn, a / 100, torch.ones(5, dtype=dtype), rtol=1e-2, atol=1e-2)


# ---- found on the way: number arguments (rounding, PyTorch's checks) and bool operands ----------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_times_python_number(dtype: torch.dtype) -> None:
    # CPU's mul/div read a Python number in float32 (3 * 0.1 -> 0.3000 in float16, not 0.2998); add/sub and
    # alpha round it to the tensor's dtype first.
    x = t([0.0, 1.0, 3.0, 7.0, 1000.0, inf, -2.5]).to(dtype)
    for fn in (
        lambda v: v * 0.1,
        lambda v: v / 10.0,
        lambda v: v * 1e10,
        lambda v: v / 1e10,
        lambda v: 1e10 / v,
        lambda v: v + 0.1,
        lambda v: v - 1e10,
        lambda v: 0.1 - v,
        lambda v: torch.add(v, v, alpha=0.3),
        lambda v: torch.sub(v, v, alpha=0.1),
        lambda v: torch.addcmul(v, v, v, value=0.1),
    ):
        compare(fn, x)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a - b,
        lambda a, b: a - True,
        lambda a, b: torch.rsub(a, b),
        lambda a, b: torch.add(a, b, alpha=0.5),
        lambda a, b: torch.add(a.int(), b.int(), alpha=0.5),
        lambda a, b: torch.add(a.int(), b.int(), alpha=True),
        lambda a, b: torch.add(a.to(torch.int8), b.to(torch.int8), alpha=300),
        lambda a, b: torch.add(a.half(), b.half(), alpha=1e10),
        lambda a, b: torch.clamp(a.to(torch.int8), min=300),
        lambda a, b: torch.clamp(a.to(torch.uint8), min=-3),
        lambda a, b: torch.clamp(a, min=True),
        lambda a, b: a.half().masked_fill(b, -1e10),
        lambda a, b: a.to(torch.int8) ** 300,
        lambda a, b: a * nan,
        lambda a, b: a / nan,
        lambda a, b: a * torch.full(a.shape, -inf, device=a.device),
    ],
)
def test_number_argument_checks_and_bools(fn: Callable[..., Any]) -> None:
    compare(fn, t([True, False, True]), t([False, False, True]))


def test_matrix_products_alpha_zero_and_bool() -> None:
    g = torch.Generator().manual_seed(5)
    a = t([[inf, 1.0, 0.0, 2.0], [nan, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]])
    b, c = torch.randn(4, 2, generator=g), torch.randn(3, 2, generator=g)
    compare(lambda s, x, y: torch.addmm(s, x, y, alpha=0), c, a, b)
    compare(lambda s, x, y: torch.addmv(s, x, y, alpha=0), c[:, 0], a, b[:, 0])
    compare(lambda s, x, y: torch.addmm(s, x, y, beta=0), c * nan, b.T, b)
    compare(lambda s, x, y: torch.baddbmm(s, x, y, alpha=0), c[None], a[None], b[None])
    compare(torch.mm, a > 0, b > 0)
    compare(torch.bmm, (a > 0)[None], (b > 0)[None])
    compare(torch.mm, (a.nan_to_num() * 10).to(torch.int32), (b * 10).to(torch.int32))
