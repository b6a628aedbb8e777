"""Selection, search and small factory ops on tpu against CPU PyTorch: median/nanmedian (values and indices, ties
and NaN), searchsorted/bucketize, trace, eye, logspace, channel_shuffle, take/put_, nonzero_static, frexp, gcd/lcm,
masked_scatter. Every check also asserts that nothing fell back to the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)
nan, inf = float("nan"), float("inf")


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def ties(*shape: int, lo: int = -3, hi: int = 4) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=g)


def exact(fn, *args, grad: bool = False) -> None:
    check(fn, *args, rtol=0, atol=0, grad=grad)


def _raises_like_cpu(fn, *args):
    with pytest.raises(Exception) as expected:
        fn(*args)
    torch_tpu.reset_op_counts()
    with pytest.raises(expected.type):
        fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
        torch.tpu.synchronize()  # device-side checks report at the next sync in fused mode
    assert not torch_tpu.metrics()["fallback_ops"]


# ---- median / nanmedian ----


@pytest.mark.parametrize("fn", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_median_dim_ties(fn, dtype):
    for shape, dim in [((7,), 0), ((4, 6), 1), ((5, 4), 0), ((3, 1, 8), -1), ((2, 3, 4), 1)]:
        x = ties(*shape).to(dtype)
        exact(lambda t, dim=dim: fn(t, dim), x)
        exact(lambda t, dim=dim: fn(t, dim, keepdim=True), x)
        exact(lambda t: fn(t), x)


@pytest.mark.parametrize("fn", [torch.median, torch.nanmedian])
def test_median_nan_rows(fn):
    x = ties(6, 9).float()
    x[0, 2] = nan
    x[1, :] = nan
    x[2, ::2] = nan
    x[3, 4] = nan
    x[3, 7] = nan
    exact(lambda t: fn(t, 1), x)
    exact(lambda t: fn(t, 0), x)
    exact(lambda t: fn(t), x)
    exact(lambda t: fn(t), torch.tensor([nan, 1.0, 2.0]))
    exact(lambda t: fn(t), torch.tensor([nan, nan]))


@pytest.mark.parametrize("fn", [torch.median, torch.nanmedian])
def test_median_grad_noncontiguous_and_scalars(fn):
    check(lambda t: fn(t, 0)[0], r(5, 4).t())
    check(lambda t: fn(t), r(3, 5))
    exact(lambda t: fn(t, 0), torch.tensor(2.5))
    exact(lambda t: fn(t), torch.tensor(2.5))
    exact(lambda t: fn(t), torch.empty(0))
    exact(lambda t: fn(t, 1), torch.empty(0, 3))


def test_median_out():
    def fn(t):
        values, indices = torch.empty(0, device=t.device), torch.empty(0, dtype=torch.long, device=t.device)
        torch.median(t, 1, out=(values, indices))
        return values, indices

    exact(fn, ties(4, 5).float())


# ---- kthvalue (the CPU's quickselect replayed: tied values report the CPU's index) ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_kthvalue_ties(dtype):
    # Each (shape, k) compiles its own while loop: a few cases that exercise every branch of the quickselect.
    for shape, dim, ks in [((9,), 0, (1, 5)), ((4, 7), 1, (2, 7)), ((3, 17), -1, (9,))]:
        x = ties(*shape).to(dtype)
        for k in ks:
            exact(lambda t, k=k, dim=dim: torch.kthvalue(t, k, dim), x)
    exact(lambda t: torch.kthvalue(t, 3, 0, keepdim=True), ties(5, 2).to(dtype))


def test_kthvalue_nan_grad_and_scalars():
    x = ties(5, 8).float()
    x[x == 1] = nan
    x[2, :] = nan
    for k in (1, 6):
        exact(lambda t, k=k: torch.kthvalue(t, k, 1), x)
    exact(lambda t: torch.kthvalue(t, 3, 0), x)
    check(lambda t: torch.kthvalue(t, 2, 0)[0], r(4, 3).t())
    exact(lambda t: torch.kthvalue(t, 1), torch.tensor(1.5))
    exact(lambda t: torch.kthvalue(t, 40, 1), (r(2, 64) * 2).round())


# ---- mode (libstdc++'s introsort replayed: the CPU's index among tied values) ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_mode_ties(dtype):
    for shape, dim, hi in [((9,), 0, 3), ((3, 16), 1, 4), ((2, 40), -1, 3), ((120, 2), 0, 10), ((2, 3, 5), 1, 2)]:
        x = ties(*shape, lo=-hi, hi=hi).to(dtype)
        exact(lambda t, dim=dim: torch.mode(t, dim), x)
    exact(lambda t: torch.mode(t, 0, keepdim=True), ties(20, 3).to(dtype))


def test_mode_nan_and_scalars():
    x = ties(3, 50).float()
    x[x == 1] = nan
    exact(lambda t: torch.mode(t, 1), x)
    exact(lambda t: torch.mode(t, 1), x[:, :12])
    exact(lambda t: torch.mode(t), torch.tensor(2.5))
    exact(lambda t: torch.mode(t), ties(400))
    exact(lambda t: torch.mode(t, 0), ties(5, 4).t())


# ---- searchsorted / bucketize ----


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_with_nan_and_inf(right):
    bd = torch.tensor([1.0, 2.0, 2.0, 3.0, nan])
    v = torch.tensor([[nan, 0.0, 2.0, 2.5], [3.0, 4.0, inf, -inf]])
    exact(lambda b, x: torch.searchsorted(b, x, right=right), bd, v)
    exact(lambda b, x: torch.searchsorted(b, x, side="right" if right else "left"), bd[:4], v)
    exact(lambda b, x: torch.bucketize(x, b, right=right), bd[:4], v)
    exact(lambda b, x: torch.bucketize(x, b, right=right, out_int32=True), bd[:4], v)


def test_searchsorted_batched_sorter_and_dtypes():
    bd = torch.sort(ties(3, 4, 9), dim=-1)[0]
    v = ties(3, 4, 5)
    exact(lambda b, x: torch.searchsorted(b, x), bd, v)
    exact(lambda b, x: torch.searchsorted(b, x, right=True, out_int32=True), bd, v)
    exact(lambda b, x: torch.searchsorted(b, x), bd.float(), v)  # mixed dtypes promote
    exact(lambda b, x: torch.searchsorted(b, x), bd.bfloat16(), v.bfloat16())
    unsorted = ties(2, 7).float()
    order = unsorted.argsort(-1)
    exact(lambda b, s, x: torch.searchsorted(b, x, sorter=s), unsorted, order, r(2, 3))
    exact(lambda b, s, x: torch.searchsorted(b, x, side="right", sorter=s), unsorted, order, ties(2, 3).float())
    exact(lambda b, x: torch.searchsorted(b, x), unsorted, r(2, 3))  # unsorted: the CPU's binary search answer
    exact(lambda b, x: torch.searchsorted(b, x), torch.empty(0), r(3))
    exact(lambda b, x: torch.searchsorted(b, x), r(4).sort()[0], torch.empty(0))
    exact(lambda b, x: torch.searchsorted(b, x), r(4, 3).sort()[0].t(), r(3, 2))  # non-contiguous


def test_bucketize_scalar():
    bd = torch.tensor([1, 3, 5, 7])
    for v in (0, 3, 4, 9):
        exact(lambda b, v=v: torch.bucketize(v, b), bd)
        exact(lambda b, v=v: torch.bucketize(v, b, right=True, out_int32=True), bd)


def test_searchsorted_sorter_out_of_range():
    _raises_like_cpu(lambda b, s, x: torch.searchsorted(b, x, sorter=s), r(4), torch.tensor([0, 1, 4, 2]), r(2))


# ---- trace / eye / logspace / channel_shuffle ----


@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (7, 2), (1, 1), (0, 3)])
def test_trace(shape):
    check(torch.trace, r(*shape))
    exact(torch.trace, ties(*shape))
    check(torch.trace, r(*shape).bfloat16(), rtol=1e-2, atol=1e-2, grad=False)
    check(torch.trace, r(shape[1], shape[0]).t())


def test_eye():
    for n, m in [(0, 0), (1, 1), (3, 3), (4, 2), (2, 5)]:
        for dtype in (torch.float32, torch.int64, torch.bool, torch.bfloat16):
            torch_tpu.reset_op_counts()
            torch.testing.assert_close(torch.eye(n, m, dtype=dtype, device="tpu").cpu(), torch.eye(n, m, dtype=dtype))
            torch.testing.assert_close(torch.eye(n, dtype=dtype, device="tpu").cpu(), torch.eye(n, dtype=dtype))
            assert not torch_tpu.metrics()["fallback_ops"]
    check(lambda a: torch.linalg.matrix_power(a, 0), r(2, 3, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int32])
def test_logspace(dtype):
    cases = [(0, 1, 5, 10.0), (-3, 2, 7, 2.0), (1.5, -2.25, 9, 3.0), (2, 2, 4, 10.0), (0, 3, 1, 2.0), (0, 3, 0, 2.0)]
    for start, end, steps, base in cases:
        torch_tpu.reset_op_counts()
        expected = torch.logspace(start, end, steps, base=base, dtype=dtype)
        actual = torch.logspace(start, end, steps, base=base, dtype=dtype, device="tpu")
        # float64: XLA's double pow may differ from glibc's in the last bit; float32 and narrower round that away.
        tol = 1e-15 if dtype == torch.float64 else 0
        torch.testing.assert_close(actual.cpu(), expected, rtol=tol, atol=0)
        assert not torch_tpu.metrics()["fallback_ops"]
    s, e = torch.tensor(-1.0), torch.tensor(2.0)
    expected = torch.logspace(s, e, 6, base=3.0, dtype=dtype)
    torch.testing.assert_close(torch.logspace(s.to("tpu"), e.to("tpu"), 6, base=3.0, dtype=dtype).cpu(), expected)


@pytest.mark.parametrize(("shape", "groups"), [((1, 4, 3, 3), 2), ((2, 6, 5), 3), ((2, 8, 2, 2, 2), 4), ((3, 4, 2), 1)])
def test_channel_shuffle(shape, groups):
    check(lambda x: F.channel_shuffle(x, groups), r(*shape))
    exact(lambda x: F.channel_shuffle(x, groups), ties(*shape))


# ---- take / put_ ----


def test_take():
    idx = torch.tensor([[0, -1, 5], [11, -12, 3]])
    check(torch.take, r(3, 4), idx)
    check(torch.take, r(4, 3).t(), idx)  # non-contiguous: row-major order of the logical tensor
    exact(torch.take, ties(3, 4), idx)
    check(torch.take, r(3, 4), torch.tensor(7))
    check(torch.take, torch.tensor(2.0), torch.tensor([0, -1, 0]))
    check(torch.take, r(3), torch.empty(0, dtype=torch.long))


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    idx = torch.tensor([1, -1, 4, 4, 0])
    check(lambda x, s: x.clone().put_(idx.to(x.device), s, accumulate), r(2, 3), r(5))
    check(lambda x, s: torch.put(x, idx.to(x.device), s, accumulate), r(2, 3), r(5))
    exact(lambda x, s: x.clone().put_(idx.to(x.device), s, accumulate), ties(2, 3), ties(5))
    check(lambda x, s: x.put(torch.tensor([[0, 2]], device=x.device), s, accumulate), r(3), r(1, 2))
    check(lambda x, s: x.put(torch.empty(0, dtype=torch.long, device=x.device), s, accumulate), r(3), r(0))


@pytest.mark.parametrize("bad", [12, -13])
def test_take_put_out_of_range(bad):
    idx = torch.tensor([0, bad])
    with pytest.raises(IndexError):
        torch.take(r(3, 4).to("tpu"), idx.to("tpu")).cpu()
    _raises_like_cpu(torch.take, r(3, 4), idx)
    _raises_like_cpu(lambda x, i, s: x.put_(i, s), r(3, 4), idx, r(2))
    _raises_like_cpu(lambda x, i, s: x.put_(i, s, accumulate=True), r(3, 4), idx, r(2))


# ---- nonzero_static ----


@pytest.mark.parametrize("size", [0, 1, 3, 7, 20])
def test_nonzero_static(size):
    x = ties(3, 5, lo=0, hi=2)
    exact(lambda t: torch.nonzero_static(t, size=size), x)
    exact(lambda t: torch.nonzero_static(t, size=size, fill_value=-5), x.float())
    exact(lambda t: torch.nonzero_static(t, size=size), x.bool().t())
    exact(lambda t: torch.nonzero_static(t, size=size), ties(2, 2, 3, lo=0, hi=2))
    exact(lambda t: torch.nonzero_static(t, size=size, fill_value=9), torch.tensor(3.0))
    exact(lambda t: torch.nonzero_static(t, size=size), torch.zeros(4))


# ---- frexp / gcd / lcm ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.float16])
def test_frexp(dtype):
    x = torch.tensor([0.0, -0.0, 1.0, -3.5, inf, -inf, nan, 1e-40, -1e-42, 3e38, 0.75, 1e-8, 6e4])
    if dtype == torch.float16:
        x = x.clamp(-6e4, 6e4)
    exact(torch.frexp, x.to(dtype))
    exact(torch.frexp, r(4, 5).to(dtype).t() * 1000)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_gcd_lcm(dtype):
    lo = 0 if dtype == torch.uint8 else -40
    a, b = ties(6, 7, lo=lo, hi=40).to(dtype), ties(7, lo=lo, hi=40).to(dtype)
    a[0, :3] = 0
    exact(torch.gcd, a, b)
    exact(torch.lcm, a, b)
    exact(lambda x, y: x.clone().gcd_(y), a, b)
    exact(lambda x: torch.gcd(x, torch.tensor(12, dtype=dtype)), a.t())


def test_gcd_int64_extremes():
    lo, hi = -(2**63), 2**63 - 1
    a = torch.tensor([0, 0, -4, 6, -9, hi, lo, lo, 5, hi, 1071])
    b = torch.tensor([0, 5, 6, -4, -6, 3, 0, lo, lo, hi - 1, 462])
    exact(torch.gcd, a, b)
    exact(torch.lcm, a[:-3], b[:-3])


# ---- masked_scatter ----


def test_masked_scatter():
    mask = torch.rand(4, 5, generator=g) > 0.5
    check(lambda x, s: x.masked_scatter(mask.to(x.device), s), r(4, 5), r(4, 5))
    check(lambda x, s: x.masked_scatter(mask[0].to(x.device), s), r(4, 5), r(30))  # mask broadcast, larger source
    check(lambda x, s: x.masked_scatter(torch.tensor(True, device=x.device), s), r(2, 3), r(2, 3))
    check(lambda x, s: x.clone().masked_scatter_(mask.t().to(x.device), s), r(5, 4), r(3, 7))
    exact(lambda x, s: x.masked_scatter(mask.to(x.device), s), ties(4, 5), ties(20))
    check(lambda x, s: x.masked_scatter(torch.zeros(3, dtype=torch.bool, device=x.device), s), r(3), r(0))


def test_masked_select_backward():
    mask = torch.rand(3, 4, generator=g) > 0.3
    check(lambda x: x.masked_select(mask.to(x.device)), r(3, 4))
    check(lambda x: x.masked_select(mask[1].to(x.device)), r(3, 4))
    check(lambda x: torch.combinations(x, 2), r(5))


def test_masked_scatter_too_few_source_elements():
    _raises_like_cpu(lambda x, m, s: x.masked_scatter(m, s), r(3), torch.tensor([True, True, True]), r(2))


# ---- torch.compile: the same rules serve the compiled graph ----


def test_compiled_graph_matches_cpu():
    def f(x, b, i):
        v, k = torch.kthvalue(x, 2, 1)
        m = torch.median(x, 0)
        mo = torch.mode(x, 1)
        return v, k, m.values, m.indices, mo.values, mo.indices, torch.searchsorted(b, x), torch.take(x, i)

    x = ties(4, 20).float()
    b, i = torch.sort(r(7))[0], torch.tensor([0, -1, 5])
    expected = f(x, b, i)
    torch_tpu.reset_op_counts()
    actual = torch.compile(f, backend="tpu")(x.to("tpu"), b.to("tpu"), i.to("tpu"))
    for e, a in zip(expected, actual, strict=True):
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0)
    assert not torch_tpu.metrics()["fallback_ops"]


# ---- argument errors raise like the CPU's ----


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.kthvalue(x, 1, 1),
        lambda x: torch.median(x, 1),
        lambda x: torch.nanmedian(x, -1),
        lambda x: torch.mode(x, 1),
    ],
)
def test_reduction_over_empty_dim(fn):
    _raises_like_cpu(fn, torch.zeros(3, 0))


def test_argument_errors():
    _raises_like_cpu(lambda x: torch.kthvalue(x, 5, 1), r(3, 4))
    _raises_like_cpu(lambda x, i, s: x.put_(i, s), torch.zeros(0), torch.tensor([0]), r(1))
    _raises_like_cpu(lambda x, i, s: x.put_(i, s), r(3), torch.tensor([0, 1]), r(1))
    _raises_like_cpu(lambda x: torch.nonzero_static(x, size=-1), r(3))
    _raises_like_cpu(lambda b, x: torch.searchsorted(b, x, side="middle"), r(3), r(2))
    _raises_like_cpu(lambda b, x: torch.searchsorted(b, x, side="left", right=True), r(3), r(2))
    _raises_like_cpu(lambda x: F.channel_shuffle(x, 2), r(1, 5, 2, 2))
    _raises_like_cpu(torch.frexp, torch.tensor([1, 2]))


@pytest.mark.parametrize(
    "fn",
    [
        torch.median,
        torch.nanmedian,
        lambda t: torch.median(t, 0),
        lambda t: torch.kthvalue(t, 1),
        lambda t: torch.trace(t.view(1, 3)),
        lambda t: torch.searchsorted(t, t),
        lambda t: torch.bucketize(t, t),
    ],
)
def test_bool_not_implemented_like_cpu(fn):
    _raises_like_cpu(fn, torch.tensor([True, False, True]))
    exact(lambda t: torch.mode(t, 0), torch.tensor([True, False, True]))
