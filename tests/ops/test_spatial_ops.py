"""Padding, upsampling, adaptive max pooling, unpooling, unfold/fold and group norm on tpu against CPU PyTorch.

Forward and backward, float32 and bfloat16, odd sizes, channels_last and non-contiguous inputs, and PyTorch's own
OpInfo samples; every case asserts that nothing fell back to the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)

# assert_close's own defaults per dtype (the harness allows 10x on gradients).
TOL = {torch.float32: {"rtol": 1.3e-6, "atol": 1e-5}, torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-5}}
DTYPES = [torch.float32, torch.bfloat16]


def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=g).to(dtype)


def channels_last(x: torch.Tensor) -> torch.Tensor:
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    return x.contiguous(memory_format=fmt)


def strided(x: torch.Tensor) -> torch.Tensor:
    """A non-contiguous tensor with x's values (every other element of a wider last dim)."""
    wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


# ---- padding ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize(
    ("shape", "pad"),
    [
        ((2, 3, 7), (2, 3)),
        ((3, 5), (4, 1)),
        ((2, 3, 5, 6), (1, 2, 3, 4)),
        ((1, 2, 4, 5, 3), (1, 2, 0, 3, 2, 1)),
        ((2, 4, 5, 3), (0, 0, 4, 2)),
    ],
)
def test_pad(mode, shape, pad, dtype):
    check(lambda x: F.pad(x, pad, mode=mode), r(*shape, dtype=dtype), **TOL[dtype])


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_layouts(mode):
    x = r(2, 3, 6, 5)
    check(lambda t: F.pad(t, (2, 1, 1, 3), mode=mode), channels_last(x))
    check(lambda t: F.pad(t, (2, 1, 1, 3), mode=mode), strided(x))
    check(lambda t: F.pad(t, (2, 2, 1, 1, 1, 2), mode=mode), channels_last(r(1, 2, 3, 4, 5)))


def test_replicate_negative_padding():
    check(lambda x: F.pad(x, (-1, 2, 3, -2), mode="replicate"), r(2, 3, 6, 7))


def test_pad_integer_and_special_values():
    x = torch.arange(24, dtype=torch.int64).reshape(2, 3, 4)
    check(lambda t: F.pad(t, (3, 2), mode="reflect"), x, grad=False)
    check(lambda t: F.pad(t, (3, 2), mode="replicate"), x, grad=False)
    y = torch.tensor([[[1.0, float("inf"), float("nan"), -float("inf"), 2.0]]])
    check(lambda t: F.pad(t, (2, 3), mode="reflect"), y, grad=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [0.0, -1.5])
@pytest.mark.parametrize(
    ("shape", "pad"),
    [
        ((2, 3, 7), (2, 3)),
        ((2, 3, 7), (1, -2, 0, 3)),  # a negative entry crops
        ((2, 3, 4, 5), (-1, -1, 2, 0, 0, 1)),
        ((5,), (0, 0)),
        ((2, 3), (-1, -2)),
    ],
)
def test_constant_pad(shape, pad, value, dtype):
    check(lambda x: F.pad(x, pad, value=value), r(*shape, dtype=dtype), **TOL[dtype])
    # check() counts from its start: the forward and the backward (a pad with the negated widths) are one op each,
    # not PyTorch's composite fill + copy.
    assert torch_tpu.metrics()["lowered_ops"].get("aten::constant_pad_nd", 0) == 2


def test_constant_pad_integer_bool_empty_and_layouts():
    check(lambda t: F.pad(t, (2, -1, 1, 0), value=7), torch.arange(12, dtype=torch.int64).reshape(3, 4), grad=False)
    check(lambda t: F.pad(t, (1, 1), value=True), torch.tensor([[True, False]]), grad=False)
    check(lambda t: F.pad(t, (1, 2), value=3.0), r(2, 0, 3), grad=False)  # empty in, non-empty out
    check(lambda t: F.pad(t, (2, 1, 1, 3), value=0.5), channels_last(r(2, 3, 6, 5)))
    check(lambda t: F.pad(t, (2, 1, 1, 3)), strided(r(2, 3, 6, 5)))


@pytest.mark.parametrize(("pad", "message"), [((1,), "divisible by 2"), ((-5, 0), "narrow")])
def test_constant_pad_errors_like_cpu(pad, message):
    with pytest.raises(RuntimeError, match=message):
        F.pad(r(2, 3), pad)
    with pytest.raises(RuntimeError, match=message):
        F.pad(r(2, 3).to("tpu"), pad)


def test_reflect_pad_too_large_raises_like_cpu():
    x = r(1, 2, 3)
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x.to("tpu"), (3, 0), mode="reflect")


# ---- upsampling ----

INTERP_CASES = [
    ("nearest", (2, 3, 5), {"size": 11}),
    ("nearest", (2, 3, 5, 4), {"scale_factor": 2}),
    ("nearest", (2, 3, 6, 7), {"size": (4, 3)}),
    ("nearest", (1, 2, 3, 4, 5), {"scale_factor": (1.7, 2.0, 0.6)}),
    ("nearest-exact", (2, 3, 7), {"size": 4}),
    ("nearest-exact", (2, 3, 5, 4), {"scale_factor": 1.5}),
    ("nearest-exact", (1, 2, 3, 4, 5), {"size": (5, 3, 7)}),
    ("linear", (2, 3, 5), {"size": 12}),
    ("linear", (2, 3, 9), {"scale_factor": 0.5}),
    ("bilinear", (2, 3, 5, 7), {"size": (9, 4)}),
    ("bilinear", (1, 2, 4, 4), {"scale_factor": 2.5}),
    ("bilinear", (2, 3, 5, 7), {"size": (5, 7)}),
    ("bicubic", (2, 3, 5, 6), {"size": (8, 11)}),
    ("bicubic", (1, 2, 7, 5), {"scale_factor": 0.7}),
    ("trilinear", (1, 2, 3, 4, 5), {"size": (6, 3, 9)}),
    ("trilinear", (1, 2, 3, 4, 5), {"scale_factor": 1.5}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize(("mode", "shape", "kw"), INTERP_CASES)
def test_interpolate(mode, shape, kw, align, dtype):
    extra: dict[str, Any] = {}
    if mode in ("linear", "bilinear", "bicubic", "trilinear"):
        extra["align_corners"] = align
    elif align:
        pytest.skip("align_corners applies to the linear and cubic modes only")
    tol = TOL[dtype] if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 2e-2}
    check(lambda x: F.interpolate(x, mode=mode, **kw, **extra), r(*shape, dtype=dtype), **tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    ("mode", "shape"), [("linear", (2, 3, 4)), ("bicubic", (2, 3, 4, 5)), ("trilinear", (1, 2, 3, 4, 5))]
)
def test_interpolate_half_backward_keeps_float_weights(mode, shape, dtype):
    """CPU's upsample backward kernels keep the weights in float32 (the forward ones round them to the input dtype)
    and accumulate in float32: the gradients match at the dtype's default tolerance."""
    x = r(*shape, dtype=dtype)
    seed = r(*F.interpolate(x, scale_factor=1.7, mode=mode, align_corners=True).shape, dtype=dtype)

    def grad(v: torch.Tensor) -> torch.Tensor:
        v = v.detach().requires_grad_()
        out = F.interpolate(v, scale_factor=1.7, mode=mode, align_corners=True)
        return torch.autograd.grad(out, v, seed.to(v.device))[0]

    torch_tpu.reset_op_counts()
    torch.testing.assert_close(grad(x.to("tpu")).cpu(), grad(x))
    assert not torch_tpu.metrics()["fallback_ops"]


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_layouts(mode):
    x = r(2, 3, 5, 6)
    check(lambda t: F.interpolate(t, size=(7, 9), mode=mode), channels_last(x), rtol=1e-5, atol=1e-5)
    check(lambda t: F.interpolate(t, size=(3, 4), mode=mode), strided(x), rtol=1e-5, atol=1e-5)


def test_interpolate_scale_factor_without_recompute():
    x = r(1, 2, 5, 7)
    for mode in ["nearest", "bilinear", "bicubic"]:
        check(lambda t, m=mode: F.interpolate(t, scale_factor=1.3, mode=m, recompute_scale_factor=False), x)


def test_upsample_nearest_uint8():
    x = torch.randint(0, 255, (1, 2, 3, 5), generator=g, dtype=torch.uint8)
    check(lambda t: F.interpolate(t, scale_factor=3, mode="nearest"), x, grad=False)


# ---- adaptive max pooling, unpooling ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("fn", "shape", "size"),
    [
        (F.adaptive_max_pool1d, (2, 3, 11), 4),
        (F.adaptive_max_pool2d, (2, 3, 7, 9), (3, 4)),
        (F.adaptive_max_pool2d, (3, 5, 6), (5, 2)),
        (F.adaptive_max_pool2d, (1, 2, 4, 4), (6, 7)),
        (F.adaptive_max_pool3d, (1, 2, 5, 6, 7), (2, 3, 4)),
    ],
)
def test_adaptive_max_pool(fn, shape, size, dtype):
    check(lambda x: fn(x, size, return_indices=True), r(*shape, dtype=dtype), **TOL[dtype])


def test_adaptive_max_pool_ties_nan_and_layouts():
    x = torch.tensor([[[[1.0, 1.0, 2.0, 2.0], [float("nan"), 0.0, 2.0, float("nan")], [3.0, 3.0, -1.0, -1.0]]]])
    check(lambda t: F.adaptive_max_pool2d(t, (2, 3), return_indices=True), x, grad=False)
    check(lambda t: F.adaptive_max_pool2d(t, (3, 2), return_indices=True), channels_last(r(2, 3, 7, 5)))
    check(lambda t: F.adaptive_max_pool2d(t, 2, return_indices=True), strided(r(2, 3, 4, 6)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool(nd, dtype):
    shape = {1: (2, 3, 9), 2: (2, 3, 7, 6), 3: (1, 2, 5, 4, 6)}[nd]
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
    unpool = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[nd]

    def fn(x: torch.Tensor) -> torch.Tensor:
        y, i = pool(x, 2, stride=2, return_indices=True)
        return unpool(y, i, 2, stride=2, output_size=x.shape[-nd:])

    check(fn, r(*shape, dtype=dtype), **TOL[dtype])


def test_max_unpool_invalid_index_raises():
    x = torch.randn(1, 1, 2, 2).to("tpu")
    idx = torch.tensor([[[[0, 1], [2, 99]]]]).to("tpu")
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: 99 \(output volumes are of size 4x4\)"):
        torch.ops.aten.max_unpool2d(x, idx, [4, 4]).cpu()
    neg = torch.tensor([[[[0, -3], [2, 3]]]]).to("tpu")
    with pytest.raises(RuntimeError, match="Found an invalid max index: -3"):
        torch.ops.aten.max_unpool2d(x, neg, [4, 4]).cpu()


# ---- unfold / fold ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "kw"),
    [
        ((2, 3, 7, 6), {"kernel_size": 3}),
        ((2, 3, 7, 6), {"kernel_size": (2, 3), "dilation": (2, 1), "padding": (1, 2), "stride": (2, 3)}),
        ((3, 5, 4), {"kernel_size": 2, "stride": 2}),
    ],
)
def test_unfold_fold(shape, kw, dtype):
    check(lambda x: F.unfold(x, **kw), r(*shape, dtype=dtype), **TOL[dtype])
    cols = F.unfold(r(*shape), **kw)
    check(lambda c: F.fold(c, shape[-2:], **kw), cols.to(dtype), **TOL[dtype])


def test_unfold_layouts():
    check(lambda x: F.unfold(x, 3, padding=1), channels_last(r(2, 3, 5, 6)))
    check(lambda x: F.unfold(x, 2), strided(r(2, 3, 5, 6)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "dim", "size", "step"),
    [((9,), 0, 4, 3), ((3, 10, 2), 1, 3, 2), ((3, 10, 2), 1, 4, 4), ((5, 7), -1, 7, 1), ((5, 7), 0, 2, 5)],
)
def test_tensor_unfold_backward(shape, dim, size, step, dtype):
    # Tensor.unfold is a view; its backward is aten::unfold_backward (overlapping windows add up).
    check(lambda x: x.unfold(dim, size, step) * 1, r(*shape, dtype=dtype), **TOL[dtype])


# ---- group norm ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "groups"), [((2, 6, 5), 3), ((3, 4, 3, 5), 2), ((2, 6, 2, 3, 3), 6), ((4, 6), 3)])
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm(shape, groups, affine, dtype):
    c = shape[1]
    w, b = (r(c), r(c)) if affine else (None, None)
    tol = TOL[dtype] if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 1e-2}
    args = [r(*shape, dtype=dtype)] + ([w.to(dtype), b.to(dtype)] if affine else [])
    check(lambda x, *p: F.group_norm(x, groups, *p, eps=1e-5), *args, **tol)


def test_group_norm_statistics_dtypes():
    x = r(2, 6, 5, dtype=torch.bfloat16)
    out_cpu = torch.native_group_norm(x, None, None, 2, 6, 5, 3, 1e-5)
    out_tpu = torch.native_group_norm(x.to("tpu"), None, None, 2, 6, 5, 3, 1e-5)
    for e, a in zip(out_cpu, out_tpu, strict=True):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e)


def test_group_norm_layouts():
    check(lambda x: F.group_norm(x, 2), channels_last(r(2, 4, 3, 5)))
    check(lambda x: F.group_norm(x, 3), strided(r(2, 6, 3, 4)))


# ---- PyTorch's OpInfo samples ----

OPINFO_OPS = [
    "nn.functional.pad.constant",
    "nn.functional.pad.reflect",
    "nn.functional.pad.replicate",
    "nn.functional.pad.replicate_negative",
    "nn.functional.interpolate.nearest",
    "nn.functional.interpolate.nearest-exact",
    "nn.functional.interpolate.linear",
    "nn.functional.interpolate.bilinear",
    "nn.functional.interpolate.bicubic",
    "nn.functional.interpolate.trilinear",
    "nn.functional.upsample_bilinear",
    "nn.functional.upsample_nearest",
    "nn.functional.adaptive_max_pool1d",
    "nn.functional.adaptive_max_pool2d",
    "nn.functional.adaptive_max_pool3d",
    "nn.functional.max_unpool1d",
    "nn.functional.max_unpool2d",
    "nn.functional.max_unpool3d",
    "nn.functional.unfold",
    "nn.functional.group_norm",
    "cdist",
    "nn.functional.pdist",
    "index_reduce.prod",
    "index_reduce.mean",
    "index_reduce.amax",
    "index_reduce.amin",
]


def _opinfo(name: str) -> Any:
    common = pytest.importorskip("torch.testing._internal.common_methods_invocations")
    for op in common.op_db:
        if op.name + ("." + op.variant_test_name if op.variant_test_name else "") == name:
            return op
    pytest.skip(f"{name} is not in this PyTorch's op_db")


def _to(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().to(device).requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


def _flat(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return []


def _compare_sample(op: Callable[..., Any], s: Any, tol: dict[str, float]) -> None:
    expected = op(s.input, *s.args, **s.kwargs)
    ts = s.transform(lambda x: _to(x, "tpu"))
    actual = op(ts.input, *ts.args, **ts.kwargs)
    pairs = list(zip(_flat(expected), _flat(actual), strict=True))
    for e, a in pairs:
        assert a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e.detach(), equal_nan=True, **tol)
    outs = [(e, a) for e, a in pairs if e.requires_grad]
    leaves_c = [t for t in _flat([s.input, list(s.args)]) if t.requires_grad]
    leaves_t = [t for t in _flat([ts.input, list(ts.args)]) if t.requires_grad]
    if not outs or not leaves_c:
        return
    seeds = [torch.randn(e.shape, generator=torch.Generator().manual_seed(1), dtype=e.dtype) for e, _ in outs]
    gc = torch.autograd.grad([e for e, _ in outs], leaves_c, seeds, allow_unused=True)
    gt = torch.autograd.grad([a for _, a in outs], leaves_t, [x.to("tpu") for x in seeds], allow_unused=True)
    for x, y in zip(gc, gt, strict=True):
        assert (x is None) == (y is None)
        if x is not None:
            torch.testing.assert_close(y.cpu(), x, equal_nan=True, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", OPINFO_OPS)
def test_opinfo_samples(name, dtype):
    op = _opinfo(name)
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{name} has no {dtype} CPU kernel")
    torch.manual_seed(0)
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=op.supports_autograd))[:12]
    # Interpolation weights are themselves rounded to bfloat16 on the CPU; a tap product can differ by one unit.
    tol = TOL[dtype] if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 2e-2}
    torch_tpu.reset_op_counts()
    for s in samples:
        _compare_sample(op, s, tol)
    assert not torch_tpu.metrics()["fallback_ops"], torch_tpu.metrics()["fallback_ops"]


# ---- grid_sample ----

GRID_CASES = [
    (mode, pad, align)
    for mode in ("bilinear", "nearest", "bicubic")
    for pad in ("zeros", "border", "reflection")
    for align in (False, True)
]


@pytest.mark.parametrize(("mode", "pad", "align"), GRID_CASES)
@pytest.mark.parametrize("nd", [2, 3])
def test_grid_sample_forward_backward(nd, mode, pad, align):
    if nd == 3 and mode == "bicubic":
        pytest.skip("PyTorch has no 3-D bicubic grid_sample")
    g = torch.Generator().manual_seed(11)
    x = torch.randn((2, 3, 5, 7) if nd == 2 else (2, 3, 4, 5, 6), generator=g)
    grid = torch.rand((2, 4, 6, 2) if nd == 2 else (2, 3, 4, 2, 3), generator=g) * 2.6 - 1.3  # some points outside
    grid[0, 0, 0] = 1.0  # exactly on the border
    allow = ["aten::grid_sampler_2d_backward"] if mode == "bicubic" else []  # the bicubic backward stays on the CPU
    check(
        lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=pad, align_corners=align),
        x,
        grid,
        rtol=1e-5,
        atol=1e-5,
        allow_fallback=allow,
    )


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_bfloat16_computes_in_float(mode):
    # Coordinates and weights in float32, the sum rounded once: the float32 answer on the same bf16 inputs, rounded.
    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, 3, 5, 7, generator=g).bfloat16()
    grid = (torch.rand(2, 4, 6, 2, generator=g) * 2.4 - 1.2).bfloat16()
    expected = F.grid_sample(x.float(), grid.float(), mode=mode, align_corners=False).bfloat16()
    actual = F.grid_sample(x.to("tpu"), grid.to("tpu"), mode=mode, align_corners=False).cpu()
    torch.testing.assert_close(actual, expected, rtol=1.6e-2, atol=1e-2)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_uint8_images_interpolate_like_cpu(mode):
    # CPU interpolates uint8 in fixed point with its own rounding: linear/cubic uint8 calls run on the CPU fallback
    # (exact); nearest only copies and stays lowered.
    x = torch.randint(0, 256, (1, 3, 9, 7), dtype=torch.uint8, generator=torch.Generator().manual_seed(13))
    expected = F.interpolate(x, size=(13, 5), mode=mode)
    torch.testing.assert_close(F.interpolate(x.to("tpu"), size=(13, 5), mode=mode).cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize(
    ("shape", "kw"),
    [
        ((2, 3, 17, 13), {"size": (5, 7)}),  # downscaling: windows wider than the plain taps
        ((1, 2, 8, 8), {"size": (16, 3), "align_corners": True}),
        ((1, 1, 9, 12), {"scale_factor": (0.5, 0.3)}),
        ((2, 2, 10, 10), {"size": (10, 10)}),
    ],
)
def test_antialiased_resize(mode: str, shape: tuple, kw: dict) -> None:
    """F.interpolate(antialias=True), as torchvision's resize(antialias=True) calls it, forward and backward."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(7))
    check(lambda t: F.interpolate(t, mode=mode, antialias=True, **kw), x)


def test_antialiased_resize_bfloat16() -> None:
    """CPU has no bfloat16 kernel for it (CUDA has): compare with CPU's float32 answer rounded once."""
    x = torch.randn(2, 3, 20, 16, generator=torch.Generator().manual_seed(8)).bfloat16()
    torch_tpu.reset_op_counts()
    got = F.interpolate(x.to("tpu"), size=(7, 5), mode="bilinear", antialias=True).cpu()
    want = F.interpolate(x.float(), size=(7, 5), mode="bilinear", antialias=True).bfloat16()
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=0, atol=0.02)
    assert not torch_tpu.metrics()["fallback_ops"]
