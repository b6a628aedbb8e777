"""Elementwise, reduction and matmul ops on tpu against CPU PyTorch, forward and backward."""

from __future__ import annotations

import pytest
import torch

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a - 2 * b,
        lambda a, b: a * b,
        lambda a, b: a / (b.abs() + 1),
        lambda a, b: torch.maximum(a, b),
        lambda a, b: torch.where(a > b, a, b * 3),
        lambda a, b: torch.addcmul(a, a, b, value=0.5),
        lambda a, b: torch.lerp(a, b, 0.3),
    ],
)
def test_binary(fn):
    check(fn, r(3, 4), r(3, 4))


def test_broadcast_and_scalars():
    check(lambda a, b: a * b + 1.5 - a / 4, r(3, 1, 4), r(5, 1))


@pytest.mark.parametrize(
    "fn",
    [
        torch.exp,
        torch.tanh,
        torch.sigmoid,
        torch.relu,
        torch.nn.functional.gelu,
        torch.nn.functional.silu,
        lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        torch.neg,
        torch.sin,
        torch.cos,
        lambda x: x.abs().sqrt(),
        lambda x: (x.abs() + 1).log(),
        lambda x: x.clamp(-0.5, 0.5),
        lambda x: x.pow(2),
        lambda x: (x.abs() + 0.1).rsqrt(),
        lambda x: torch.nn.functional.leaky_relu(x, 0.1),
    ],
)
def test_unary(fn):
    check(fn, r(4, 5))


def test_logit():
    p = torch.rand(4, 5, generator=g) * 0.9 + 0.05
    check(torch.logit, p)
    check(lambda t: torch.logit(t, eps=0.1), p)


def test_comparisons_and_logic():
    check(lambda a, b: ((a > b) & (a < 0.5)) | ~(b >= 0), r(6), r(6), grad=False)
    check(lambda a: (a == a.round()).sum(), torch.tensor([1.0, 1.5, 2.0]), grad=False)


def test_integer_division_modes():
    a = torch.tensor([7, -7, 5, -5])
    b = torch.tensor([2, 2, -3, -3])
    check(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b, grad=False)
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b, grad=False)
    check(lambda x, y: x % y, a, b, grad=False)
    check(lambda x, y: x / y, a, b, grad=False)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.sum(),
        lambda x: x.sum(dim=1),
        lambda x: x.mean(dim=(0, 2), keepdim=True),
        lambda x: x.amax(dim=-1),
        lambda x: x.var(dim=1),
        lambda x: x.std(),
        lambda x: x.prod(dim=0),
        lambda x: x.max(dim=1).values,
        lambda x: x.norm(),
    ],
)
def test_reductions(fn):
    check(fn, r(3, 4, 5))


def test_reduction_indices_and_bools():
    x = r(4, 6)
    check(lambda t: t.max(dim=1), x, grad=False)
    check(lambda t: t.min(dim=0), x, grad=False)
    check(lambda t: t.argmax(), x, grad=False)
    check(lambda t: t.argmin(dim=1, keepdim=True), x, grad=False)
    check(lambda t: ((t > 0).all(dim=1), (t > 0).any()), x, grad=False)
    check(lambda t: t.sum(dtype=torch.float64), x, grad=False)
    check(lambda t: (t > 0).sum(), x, grad=False)


def test_matmuls():
    check(torch.mm, r(3, 4), r(4, 5))
    check(torch.bmm, r(2, 3, 4), r(2, 4, 5))
    check(lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0), r(5), r(3, 4), r(4, 5))
    check(torch.matmul, r(2, 3, 4), r(4, 6))
    check(torch.nn.functional.linear, r(7, 4), r(3, 4), r(3))


def test_views_and_inplace_aliasing():
    base = torch.arange(24.0).reshape(4, 6)
    t = base.to("tpu")
    v = t[:, 1:5:2]  # strided view
    v.mul_(10)
    base[:, 1:5:2].mul_(10)
    torch.testing.assert_close(t.cpu(), base)
    tt = t.t()
    tt[2].add_(1)
    base.t()[2].add_(1)
    torch.testing.assert_close(t.cpu(), base)
    torch.testing.assert_close(t.permute(1, 0)[::2].cpu(), base.permute(1, 0)[::2])


def test_out_and_dtype_conversions():
    a, b = r(3, 3), r(3, 3)
    out = torch.empty(3, 3, device="tpu")
    torch.add(a.to("tpu"), b.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), a + b)
    x = torch.tensor([1.7, -2.2, 3.5])
    for dt in (torch.int32, torch.int64, torch.float64, torch.bfloat16, torch.float16, torch.bool, torch.uint8):
        torch.testing.assert_close(x.to("tpu").to(dt).cpu(), x.to(dt))


def test_sgn_backward_zero_gradient_without_fallback() -> None:
    """Autograd builds sgn's (zero) gradient of a real input with _efficientzerotensor: plain zeros on tpu."""
    x = torch.tensor([1.0, -2.0, 0.0, 3.5])
    grads = []
    for device in ("cpu", "tpu"):
        v = x.detach().clone().to(device).requires_grad_()  # a leaf per device (x itself stays grad-free)
        torch_tpu.reset_op_counts()
        torch.sgn(v).mul(2).sum().backward()
        assert device == "cpu" or not torch_tpu.metrics()["fallback_ops"]
        grads.append(v.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])
    zero = torch.ops.aten._efficientzerotensor([2, 3], dtype=torch.bfloat16, device="tpu")
    assert zero.device.type == "tpu" and zero.dtype == torch.bfloat16 and not zero.cpu().any()


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
def test_tril_triu_indices_on_device(fn) -> None:
    """PyTorch's own decompositions, registered as tpu kernels: the index pattern is built on the device."""
    torch_tpu.reset_op_counts()
    for args in [(3, 3), (4, 6, 1), (5, 3, -2), (0, 3), (3, 3, 10), (6, 2, -7)]:
        actual = fn(*args, device="tpu")
        assert actual.device.type == "tpu"
        assert torch.equal(actual.cpu(), fn(*args))
    assert fn(4, 5, dtype=torch.int32, device="tpu").dtype == torch.int32
    assert not torch_tpu.metrics()["fallback_ops"]


@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([1.0, 2.0, -0.0, 1.5, float("nan"), float("inf")]),
        torch.tensor([[-1, 5, 7], [3, -128, 0]], dtype=torch.int8),
        torch.tensor([[255, 3], [1, 2]], dtype=torch.uint8),
        torch.tensor([[True, False, True], [False, False, True]]),
        torch.randn(3, 4, generator=g).bfloat16(),
        torch.randn(3, 4, generator=g).half(),
        torch.randn(3, 4, generator=g).double(),
        torch.randint(-9, 9, (3, 4), generator=g),
    ],
    ids=["f32", "i8", "u8", "bool", "bf16", "f16", "f64", "i64"],
)
@pytest.mark.parametrize("kw", [{}, {"dim": -1}, {"dim": [0], "keepdim": True}], ids=["all", "last", "first_keep"])
def test_hash_tensor_matches_cpu_bit_for_bit(x: torch.Tensor, kw: dict) -> None:
    check(lambda t: torch.hash_tensor(t, **kw), x, grad=False)


@pytest.mark.parametrize(
    "repeats",
    [[1, 0, 3, 2], [2, 2], [], [0, 0]],
)
@pytest.mark.parametrize("dtype", [torch.long, torch.int32])
def test_repeat_interleave_with_tensor_repeats(repeats: list[int], dtype: torch.dtype) -> None:
    r_ = torch.tensor(repeats, dtype=dtype)
    check(lambda t: torch.repeat_interleave(t), r_, grad=False)
    x = torch.randn(len(repeats), 3, generator=g)
    check(lambda t, rr: torch.repeat_interleave(t, rr, dim=0), x, r_)
    total = int(r_.sum())
    check(lambda t, rr: torch.repeat_interleave(t, rr, dim=0, output_size=total), x, r_)
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], dtype=dtype, device="tpu"))


_HIST_CASES = [
    (torch.ones(3), {"bins": 4}),  # equal min and max: edges widened by 0.5
    (torch.tensor([]), {"bins": 3}),  # empty: [0, 1]
    (torch.tensor([0.0, 1, 2, 3, float("nan"), 10]), {"bins": 3, "range": (0.0, 3.0)}),  # NaN and outside: not counted
    (torch.tensor([0.0, 1, 2, 3]), {"bins": torch.tensor([0.0, 1.5, 3.0])}),
    (torch.tensor([[1.0, 2.0], [3, 4]]), {"bins": 2, "weight": torch.tensor([[1.0, 2.0], [3, 4]]), "density": True}),
    (torch.randn(1000, generator=g), {"bins": 17}),
    (torch.randn(1000, generator=g).double(), {"bins": 10, "density": True}),
    (torch.arange(10.0), {"bins": 10}),  # elements on the edges, the last one on the rightmost
]


@pytest.mark.parametrize(("x", "kw"), _HIST_CASES)
def test_histogram(x: torch.Tensor, kw: dict) -> None:
    tensors = {k: v for k, v in kw.items() if isinstance(v, torch.Tensor)}
    numbers = {k: v for k, v in kw.items() if not isinstance(v, torch.Tensor)}
    names = list(tensors)
    check(
        lambda t, *ts: tuple(torch.histogram(t, **dict(zip(names, ts, strict=True)), **numbers)),
        x,
        *tensors.values(),
        grad=False,
    )


def test_histogram_range_errors() -> None:
    x = torch.tensor([1.0, float("inf")], device="tpu")
    with pytest.raises(RuntimeError, match="is not finite"):
        torch.histogram(x, bins=3)
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        torch.histogram(x, bins=3, range=(2.0, 1.0))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histogram(x, bins=0)


_HISTDD_CASES = [
    (torch.tensor([[0.0, 1.0], [1.0, 1.0], [2.0, 3.0]]), {"bins": [2, 2]}),
    (
        torch.tensor([[0.0, 1.0], [1.0, 1.0], [2.0, 3.0]]),
        {"bins": [2, 3], "range": [0.0, 2.0, 0.0, 3.0], "density": True},
    ),
    (torch.empty(0, 2), {"bins": [2, 2]}),
    (torch.randn(5, 4, 3, generator=g), {"bins": [3, 4, 2], "weight": torch.rand(5, 4, generator=g)}),
]


@pytest.mark.parametrize(("x", "kw"), _HISTDD_CASES)
def test_histogramdd(x: torch.Tensor, kw: dict) -> None:
    weight = kw.get("weight")
    numbers = {k: v for k, v in kw.items() if k != "weight"}
    if weight is None:
        check(
            lambda t: (torch.histogramdd(t, **numbers).hist, *torch.histogramdd(t, **numbers).bin_edges), x, grad=False
        )
    else:
        check(lambda t, w: torch.histogramdd(t, weight=w, **numbers).hist, x, weight, grad=False)


def test_histogramdd_with_edge_tensors_and_errors() -> None:
    edges = [torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([-2.0, 2.0])]
    check(lambda t, a, b: torch.histogramdd(t, bins=[a, b]).hist, torch.randn(7, 2, generator=g), *edges, grad=False)
    with pytest.raises(RuntimeError, match="size of bins must be equal to the innermost dimension"):
        torch.histogramdd(torch.randn(3, 2, device="tpu"), bins=[2])
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.histogramdd(torch.randn(5, device="tpu"), bins=[3])


_SHIFTS = {
    "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b,
    "left_shift_scalar": lambda a, b: torch.bitwise_left_shift(a, 3),
    "right_shift_scalar_tensor": lambda a, b: torch.bitwise_right_shift(-100, b),
    "ilshift": lambda a, b: a.clone().__ilshift__(b),
    "right_shift_": lambda a, b: a.clone().bitwise_right_shift_(b),
    "left_shift_out": lambda a, b: torch.bitwise_left_shift(a, b, out=torch.empty_like(a)),
}


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize("case", sorted(_SHIFTS))
def test_shifts_match_cpu_including_out_of_range_amounts(case: str, dtype: torch.dtype) -> None:
    a = torch.tensor([1, -8, 3, 5, 100, -1, 0, 77]).to(dtype)
    b = torch.tensor([1, 2, 40, -1, 7, 8, 3, 65]).to(dtype)  # amounts past the width and negative ones
    before = torch_tpu.metrics()["fallback_ops"]
    got = _SHIFTS[case](a.to("tpu"), b.to("tpu")).cpu()
    assert torch_tpu.metrics()["fallback_ops"] == before
    torch.testing.assert_close(got, _SHIFTS[case](a, b))
