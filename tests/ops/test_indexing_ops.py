"""Indexing, joining and shape ops on tpu against CPU PyTorch, forward and backward, plus index range errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def idx(*values: int) -> torch.Tensor:
    return torch.tensor(values)


def put(x: torch.Tensor, key, value) -> torch.Tensor:
    y = x.clone()
    y[key] = value
    return y


def add_at(x: torch.Tensor, key, value) -> torch.Tensor:
    y = x.clone()
    y[key] += value
    return y


# ---- joining ----


def test_cat_and_stack():
    check(lambda a, b: torch.cat([a, b * 2], 0), r(2, 3), r(4, 3))
    check(lambda a, b: torch.cat([a, b, a], -1), r(2, 3), r(2, 1))
    check(lambda a, b: torch.stack([a, b], 1), r(2, 3), r(2, 3))
    check(lambda a: torch.stack([a, a.sin(), a.cos()]), r(4))


def test_cat_skips_empty_and_promotes():
    check(lambda a, e: torch.cat([e, a, e], 0), r(2, 3), torch.empty(0))
    check(lambda a, b: torch.cat([a, b]), idx(1, 2), torch.tensor([0.5, 1.5]), grad=False)
    check(lambda a: torch.cat([a[:0], a]), r(3, 2))


def test_cat_out():
    def fn(a, b):
        out = torch.empty(0, device=a.device)
        torch.cat([a, b], 1, out=out)
        return out

    check(fn, r(2, 2), r(2, 3), grad=False)


# ---- index_select / gather / scatter / index_add ----


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    check(lambda x, i: x.index_select(dim, i), r(4, 5), idx(3, 0, 3, 1))


def test_index_select_scalar_index_and_ints():
    check(lambda x, i: x.index_select(0, i), r(4, 5), torch.tensor(2))
    check(lambda x, i: x.index_select(1, i), torch.arange(12).reshape(3, 4), idx(2, 2, 0), grad=False)


@pytest.mark.parametrize("dim", [0, 1])
def test_gather(dim):
    index = torch.tensor([[0, 2, 1], [3, 0, 0]])
    check(lambda x, i: x.gather(dim, i), r(4, 4), index)


def test_gather_3d_smaller_index():
    index = torch.randint(0, 4, (2, 3, 2), generator=g)
    check(lambda x, i: torch.gather(x, 1, i), r(3, 4, 5), index)


def test_scatter_src_and_value():
    index = torch.tensor([[0, 1, 2], [2, 0, 1]])
    check(lambda x, i, s: x.scatter(0, i, s), r(3, 4), index, r(2, 3))
    check(lambda x, i, s: x.scatter(0, i, s), r(3, 4), index, r(2, 5), grad=False)  # src larger than index
    check(lambda x, i: x.scatter(1, i, 2.5), r(2, 4), index)
    check(lambda x, i: x.scatter(1, i, -1), torch.zeros(2, 4, dtype=torch.long), index, grad=False)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_inplace_and_reduce():
    index = torch.tensor([[0, 1, 2], [0, 0, 1]])

    def inplace(x, i, s):
        y = x.clone()
        y.scatter_(1, i, s)
        return y

    check(inplace, r(2, 4), index, r(2, 3))
    check(lambda x, i, s: x.scatter(1, i, s, reduce="multiply"), r(2, 4), index, r(2, 3), grad=False)
    check(lambda x, i, s: x.scatter(1, i, s, reduce="add"), r(2, 4), index, r(2, 3), grad=False)


def test_scatter_add():
    index = torch.tensor([[0, 1, 0, 1], [2, 2, 2, 0]])
    check(lambda x, i, s: x.scatter_add(0, i, s), r(3, 4), index, r(2, 4))

    def inplace(x, i, s):
        y = x.clone()
        y.scatter_add_(1, i, s)
        return y

    check(inplace, r(2, 4), index.clamp(max=3), r(2, 4))


def test_one_hot():
    check(lambda i: F.one_hot(i, 5), idx(0, 3, 4, 3), grad=False)


def test_index_add():
    check(lambda x, i, s: x.index_add(0, i, s, alpha=2.0), r(4, 3), idx(1, 3, 1), r(3, 3))
    check(lambda x, i, s: x.index_add(1, i, s), r(2, 4), idx(0, 0), r(2, 2))
    check(lambda x, i, s: x.index_add(0, i, s), torch.zeros(3, dtype=torch.long), idx(2, 2), idx(5, 7), grad=False)


def test_index_copy_and_fill():
    check(lambda x, i, s: x.index_copy(0, i, s), r(4, 3), idx(3, 0), r(2, 3))
    check(lambda x, i: x.index_fill(1, i, -2.0), r(3, 4), idx(0, -1))
    check(lambda x, i: x.index_fill(0, i, x.new_tensor(5)), torch.zeros(3, 2, dtype=torch.long), idx(2), grad=False)


def test_masked_fill_with_a_cpu_scalar_value():
    """A 0-dim CPU tensor as the fill value (DeBERTa/SEW-D's XSoftmax: `torch.tensor(torch.finfo(dtype).min)`), which
    CUDA accepts: torch's masked_fill meta reference refused it beside a meta tensor."""
    mask = torch.tensor([[True, False, True], [False, False, True]])
    value = torch.tensor(torch.finfo(torch.float32).min)
    check(lambda x: x.masked_fill(mask.to(x.device), value), r(2, 3))
    check(lambda x: x.clone().masked_fill_(mask.to(x.device), torch.tensor(-2.5, dtype=torch.float64)), r(2, 3))
    with pytest.raises(RuntimeError, match="0-dimensional value tensor|same device"):  # a real error stays one
        r(2, 3).to("tpu").masked_fill(mask.to("tpu"), torch.tensor([1.0]))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    index = torch.tensor([[0, 1, 0], [2, 2, 0]])
    fn = lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self)  # noqa: E731
    check(fn, r(3, 3), index, r(2, 3), grad=reduce in ("sum", "mean"))
    check(fn, torch.tensor([[5, -7, 3]] * 3), index, torch.tensor([[-2, 4, 9], [1, 6, -5]]), grad=False)


# ---- embedding ----


def test_embedding():
    check(lambda w, i: F.embedding(i, w), r(10, 4), torch.tensor([[1, 3, 1], [9, 0, 3]]))


def test_embedding_padding_idx_backward():
    check(lambda w, i: F.embedding(i, w, padding_idx=1), r(6, 3), torch.tensor([[1, 2, 1], [5, 0, 2]]))
    check(lambda w, i: F.embedding(i, w, padding_idx=-1), r(6, 3), idx(5, 4, 5))


def test_embedding_scale_grad_by_freq():
    check(lambda w, i: F.embedding(i, w, scale_grad_by_freq=True), r(5, 2), idx(0, 4, 0, 0, 2))


# ---- advanced indexing ----


@pytest.mark.parametrize(
    "key",
    [
        lambda i: i,
        lambda i: (slice(None), i),
        lambda i: (slice(None), slice(None), i % 3),
        lambda i: (i, i),
        lambda i: (i.reshape(2, 2), slice(None), i[:2].reshape(2, 1) % 3),
        lambda i: (slice(1, 3), i % 3),
        lambda i: -i - 1,
        lambda i: (Ellipsis, i % 3),
    ],
)
def test_index_tensor(key):
    check(lambda x, i: x[key(i)], r(4, 4, 3), idx(3, 0, 2, 3))


def test_index_with_list_and_int_dtypes():
    check(lambda x: x[[0, 2, 2]], r(3, 2))
    check(lambda x, i: x[i], r(5), torch.tensor([4, 0, 1], dtype=torch.int32))
    check(lambda x, i: x[:, i], torch.arange(20).reshape(4, 5), idx(4, 1), grad=False)


def test_index_put_setitem():
    check(lambda x, i: put(x, i, 3.0), r(5, 3), idx(4, 0))
    check(lambda x, i, v: put(x, i, v), r(5, 3), idx(4, 0, 2), r(3, 3))
    check(lambda x, i, v: put(x, (slice(None), i), v), r(5, 3), idx(2, 0), r(5, 2))
    check(lambda x, i, v: put(x, (i, i % 3), v), r(5, 3), idx(4, 1, -1), r(3))
    check(lambda x, i: put(x, i, 7), torch.zeros(4, dtype=torch.long), idx(1, 3), grad=False)


def test_index_put_iadd():
    check(lambda x, i, v: add_at(x, i, v), r(5, 3), idx(4, 0, 2), r(3, 3))
    check(lambda x, i, v: add_at(x, (slice(None), i), v), r(2, 4), idx(3, 1), r(2, 2))


def test_index_put_accumulate_duplicates():
    check(lambda x, i, v: x.index_put((i,), v, accumulate=True), r(4, 2), idx(1, 1, 3, 1), r(4, 2))
    check(lambda x, i, v: torch.index_put(x, (i,), v), r(4), idx(2, 0), r(2))


def test_index_backward_duplicates():
    check(lambda x, i: x[i] * 2, r(4, 3), idx(1, 1, 0, 1))
    check(lambda x, i: x[:, i].sum(1), r(4, 3), idx(2, -1))


def test_cpu_index_tensors():
    # As on CUDA, index tensors may stay on the CPU (torch.arange defaults there).
    x = r(4, 3)
    t = x.to("tpu")
    labels = idx(2, 0, 1, 1)
    torch.testing.assert_close(t[torch.arange(4), labels.to("tpu")].cpu(), x[torch.arange(4), labels])
    torch.testing.assert_close(t[labels].cpu(), x[labels])
    t[idx(3)] = 1.0
    x[idx(3)] = 1.0
    torch.testing.assert_close(t.cpu(), x)


def test_bool_mask_getitem():
    check(lambda x: x[x > 0], r(4, 3))
    check(lambda x: x[:, torch.tensor([True, False, True], device=x.device)] * 2, r(2, 3))


def test_bool_mask_setitem():
    check(lambda x: put(x, x > 0, 0.0), r(4, 3))
    check(lambda x, v: put(x, torch.tensor([True, False, True, True], device=x.device), v), r(4, 2), r(3, 2))
    check(lambda x, v: put(x, (slice(None), torch.tensor([False, True, True], device=x.device)), v), r(2, 3), r(2))

    # an all-false mask with zero values (a model writing "the audio tokens" of a text-only batch): nothing to gather
    def none(x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(2, 4, dtype=torch.bool, device=x.device)

    check(lambda x, v: put(x, none(x), v), r(2, 4, 3), r(0, 3), grad=False)
    check(lambda x, v: x.clone().index_put_((none(x),), v, accumulate=True), r(2, 4, 3), r(0, 3), grad=False)


# ---- factories and shape ops ----


@pytest.mark.parametrize(
    "args",
    [(5,), (2, 11, 3), (0, 1, 0.1), (-1.5, 2.0, 0.25), (10, 0, -3)],
)
def test_arange(args):
    check(lambda x: torch.arange(*args, device=x.device), torch.zeros(1), grad=False)
    check(lambda x: torch.arange(*args, dtype=torch.float64, device=x.device), torch.zeros(1), grad=False)


@pytest.mark.parametrize("args", [(0.0, 1.0, 7), (-3, 5, 6), (2.0, 2.0, 1), (1.0, -1.0, 0)])
def test_linspace(args):
    check(lambda x: torch.linspace(*args, device=x.device), torch.zeros(1), grad=False)
    check(lambda x: torch.linspace(*args, dtype=torch.long, device=x.device), torch.zeros(1), grad=False)


def test_causal_mask():
    def attn_bias(scores):
        t = scores.shape[-1]
        causal = torch.tril(torch.ones(t, t, device=scores.device, dtype=torch.bool))
        return scores.masked_fill(~causal, float("-inf")).softmax(-1)

    check(attn_bias, r(2, 5, 5))


@pytest.mark.parametrize("diagonal", [0, 1, -2])
def test_tril_triu(diagonal):
    check(lambda x: torch.tril(x, diagonal), r(3, 4, 5))
    check(lambda x: torch.triu(x, diagonal), r(5, 4))

    def inplace(x):
        y = x.clone()
        y.tril_(diagonal)
        return y.triu_(diagonal - 1)

    check(inplace, r(4, 4))


def test_cumsum():
    check(lambda x: torch.cumsum(x, 0), r(6, 3))
    check(lambda x: x.cumsum(-1), r(2, 7))
    check(lambda x: torch.cumsum(x > 0, 1), r(3, 5), grad=False)
    check(lambda x: torch.cumsum(x, 0, dtype=torch.float64), r(4), grad=False)


@pytest.mark.parametrize("dims", [[0], [1, 2], [-1, 0]])
def test_flip(dims):
    check(lambda x: torch.flip(x, dims), r(3, 4, 2))


def test_roll():
    check(lambda x: torch.roll(x, 2, 0), r(5, 3))
    check(lambda x: torch.roll(x, (-1, 4), (1, 0)), r(5, 3))
    check(lambda x: torch.roll(x, 7), r(2, 3))


def test_repeat():
    check(lambda x: x.repeat(2, 3), r(2, 3))
    check(lambda x: x.repeat(2, 1, 2), r(3))


@pytest.mark.parametrize("descending", [False, True])
def test_sort(descending):
    x = torch.randperm(20, generator=g).float().reshape(4, 5)
    check(lambda t: torch.sort(t, 1, descending=descending), x)
    check(lambda t: torch.sort(t, dim=0, descending=descending, stable=True), x)
    check(lambda t: torch.argsort(t, -1, descending=descending), x, grad=False)


def test_sort_nan_and_ties():
    x = torch.tensor([3.0, float("nan"), 1.0, 3.0, -2.0, 1.0])
    check(lambda t: torch.sort(t, stable=True), x, grad=False)
    check(lambda t: torch.sort(t, descending=True, stable=True), x, grad=False)
    check(lambda t: torch.sort(t, stable=True), idx(4, -1, 4, 0), grad=False)
    check(lambda t: torch.sort(t > 0, dim=0, descending=True, stable=True), r(6, 2), grad=False)


def test_topk():
    x = torch.randperm(24, generator=g).float().reshape(4, 6)
    check(lambda t: torch.topk(t, 3), x)
    check(lambda t: torch.topk(t, 2, dim=0, largest=False), x)


def test_bincount():
    ints = torch.randint(0, 9, (40,), generator=g)
    check(lambda t: torch.bincount(t), ints)
    check(lambda t: torch.bincount(t, minlength=20), ints)
    check(lambda t: torch.bincount(t.int(), minlength=3), ints)
    check(lambda t, w: torch.bincount(t, w), ints, r(40), grad=False)
    check(lambda t, w: torch.bincount(t, w.double()), ints, r(40), grad=False)
    check(lambda t: torch.bincount(t, minlength=4), torch.zeros(0, dtype=torch.long), grad=False)


@pytest.mark.parametrize(
    "fn",
    [
        lambda: torch.bincount(idx(1, -2, 3)),
        lambda: torch.bincount(torch.zeros(2, 2, dtype=torch.long)),
        lambda: torch.bincount(idx(1, 2), torch.ones(3)),
        lambda: torch.bincount(idx(1, 2), minlength=-1),
    ],
)
def test_bincount_bad_input_raises_like_cpu(fn):
    with pytest.raises(RuntimeError):
        fn()
    with torch.device("tpu"), pytest.raises(RuntimeError):
        fn()


# ---- out-of-range indices raise as on the CPU ----


def _raises_like_cpu(fn, *args):
    with pytest.raises(Exception) as expected:
        fn(*args)
    with pytest.raises(expected.type):
        fn(*[a.to("tpu") for a in args])
        torch.tpu.synchronize()  # checks run on the device: fused mode reports them at the next sync


@pytest.mark.parametrize("bad", [5, -1])
def test_index_select_out_of_range(bad):
    with pytest.raises(IndexError):
        r(5, 2).index_select(0, idx(0, bad)).cpu()
    _raises_like_cpu(lambda x, i: x.index_select(0, i), r(5, 2), idx(0, bad))


def test_embedding_out_of_range():
    with pytest.raises(IndexError):
        F.embedding(idx(1, 7), r(5, 2)).cpu()
    _raises_like_cpu(lambda w, i: F.embedding(i, w), r(5, 2), idx(1, 7))


@pytest.mark.parametrize("bad", [4, -1])
def test_gather_scatter_out_of_range(bad):
    # The CPU raises RuntimeError here, not IndexError; the tpu raises the same type.
    index = torch.tensor([[0, bad]])
    _raises_like_cpu(lambda x, i: x.gather(0, i), r(4, 2), index)
    _raises_like_cpu(lambda x, i: x.scatter(0, i, 1.0), r(4, 2), index)
    _raises_like_cpu(lambda x, i, s: x.scatter_add(0, i, s), r(4, 2), index, r(1, 2))
    _raises_like_cpu(lambda x, i, s: x.index_add(0, i, s), r(4, 2), index[0], r(2, 2))


@pytest.mark.parametrize("bad", [5, -6])
def test_index_tensor_out_of_range(bad):
    with pytest.raises(IndexError):
        r(5)[idx(0, bad)].cpu()
    _raises_like_cpu(lambda x, i: x[i], r(5), idx(0, bad))
    _raises_like_cpu(lambda x, i: put(x, i, 1.0), r(5), idx(bad))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_embedding_max_norm_renormalises_the_named_rows(norm_type, dtype):
    # F.embedding(max_norm=...) calls embedding_renorm_, which rescales the weight rows it looks up, in place.
    g = torch.Generator().manual_seed(7)
    w = (torch.randn(10, 4, generator=g) * 2).to(dtype)
    idx = torch.tensor([[1, 3, 3], [0, 9, 1]])
    wt = w.to("tpu")
    torch_tpu.reset_op_counts()
    out = F.embedding(idx.to("tpu"), wt, max_norm=1.5, norm_type=norm_type)
    expected = F.embedding(idx, w, max_norm=1.5, norm_type=norm_type)
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(wt.cpu(), w)  # rows 0, 1, 3, 9 rescaled, the others untouched
    assert not torch_tpu.metrics()["fallback_ops"]


# ---- nn.EmbeddingBag ----

EMBEDDING_BAG_INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 9, 9])


@pytest.mark.parametrize("offsets", [[0, 2, 2, 5], [0, 3, 7, 10], [0]])
@pytest.mark.parametrize("padding_idx", [None, 4])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_forward_backward(mode, include_last_offset, padding_idx, offsets):
    # Empty bags, a last bag running to the end, padding positions; with include_last_offset the offsets are CSR
    # (the extra last offset is the number of indices).
    idx = EMBEDDING_BAG_INDICES
    off = torch.tensor(offsets + [len(idx)] if include_last_offset else offsets)
    w = torch.randn(10, 4, generator=torch.Generator().manual_seed(8))
    kw = {"mode": mode, "include_last_offset": include_last_offset, "padding_idx": padding_idx}
    check(lambda weight: F.embedding_bag(idx.to(weight.device), weight, off.to(weight.device), **kw), w)


def test_embedding_bag_per_sample_weights_and_2d_input():
    idx, off = EMBEDDING_BAG_INDICES, torch.tensor([0, 3, 3, 8])
    g = torch.Generator().manual_seed(9)
    w, psw = torch.randn(10, 4, generator=g), torch.rand(len(idx), generator=g)
    check(
        lambda weight, p: F.embedding_bag(idx.to(p.device), weight, off.to(p.device), mode="sum", per_sample_weights=p),
        w,
        psw,
    )
    x2 = torch.tensor([[1, 2, 4], [4, 3, 2]])
    for mode in ("sum", "mean", "max"):
        check(lambda weight, m=mode: F.embedding_bag(x2.to(weight.device), weight, mode=m), w)


def test_embedding_bag_sparse_gradient_is_refused_clearly():
    # sparse=True asks for a sparse weight gradient; tpu has no sparse tensors, so the backward (declined by the
    # lowering, run by the CPU fallback) fails with PyTorch's NotImplementedError instead of a wrong dense answer.
    w = torch.randn(10, 4, device="tpu", requires_grad=True)
    idx, off = EMBEDDING_BAG_INDICES.to("tpu"), torch.tensor([0, 4], device="tpu")
    y = F.embedding_bag(idx, w, off, mode="sum", sparse=True)
    torch.testing.assert_close(y.cpu(), F.embedding_bag(idx.cpu(), w.detach().cpu(), off.cpu(), mode="sum"))
    with pytest.raises(NotImplementedError, match="Sparse"):
        y.sum().backward()


# ---- segment_reduce ----

SEGMENT_BATCHED = {"lengths": torch.tensor([[2, 0, 4], [1, 3, 2]])}  # segments along dim 1 of each batch row
SEGMENT_CASES = [
    (torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), {"lengths": torch.tensor([0, 1, 2, 2])}, 0),
    (torch.tensor([1.0, 0.0, 3.0, 0.0, 5.0, 2.0]), {"lengths": torch.tensor([2, 0, 3, 1])}, 0),  # zeros: prod grads
    (torch.tensor([1.0, float("nan"), 3.0, 4.0, 0.0]), {"offsets": torch.tensor([0, 0, 1, 3, 5])}, 0),
    (
        torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(10)),
        {"lengths": torch.tensor([[2, 0, 4], [1, 3, 2]])},
        1,
    ),
    (torch.tensor([2.0, 2.0, 1.0, 3.0, 3.0, -1.0]), {"lengths": torch.tensor([3, 3])}, 0),  # ties: max/min grads split
]


@pytest.mark.parametrize("initial", [None, 2.0])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("case", range(len(SEGMENT_CASES)))
def test_segment_reduce_forward_backward(case, reduce, initial):
    data, bounds, axis = SEGMENT_CASES[case]

    def fn(x):
        moved = {k: v.to(x.device) for k, v in bounds.items()}
        return torch.segment_reduce(x, reduce, axis=axis, initial=initial, unsafe=True, **moved)

    check(fn, data)


def test_factories_that_fall_back_return_tpu_tensors():
    # triu_indices/tril_indices have no tensor argument: the CPU fallback must still honour device="tpu".
    for fn in (torch.triu_indices, torch.tril_indices):
        got = fn(4, 5, 1, device="tpu")
        assert got.device.type == "tpu"
        torch.testing.assert_close(got.cpu(), fn(4, 5, 1))


def test_clamp_bool_with_tensor_bounds():
    # CPU clamps bool tensors against tensor bounds (the number overloads raise for Bool, as on CPU).
    t, bound = torch.tensor([True, False, True]), torch.tensor([False, True, False])
    torch.testing.assert_close(torch.clamp_min(t.to("tpu"), bound.to("tpu")).cpu(), torch.clamp_min(t, bound))
    torch.testing.assert_close(torch.clamp_max(t.to("tpu"), bound.to("tpu")).cpu(), torch.clamp_max(t, bound))
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.clamp_min(t.to("tpu"), True)
