"""Convolutions and pooling on tpu against CPU PyTorch, forward and backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.ops.harness import check

g = torch.Generator().manual_seed(0)

TOL = {"rtol": 1e-4, "atol": 1e-4}


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


@pytest.mark.parametrize(
    ("kwargs", "weight_shape"),
    [
        ({}, (6, 4, 3, 3)),
        ({"stride": 2}, (6, 4, 3, 3)),
        ({"padding": 1}, (6, 4, 3, 3)),
        ({"dilation": 2}, (6, 4, 3, 3)),
        ({"groups": 2}, (6, 2, 3, 3)),
        ({"stride": 2, "padding": 1, "dilation": 2, "groups": 2}, (6, 2, 3, 3)),
        ({"stride": (2, 1), "padding": (0, 2)}, (6, 4, 2, 3)),
        ({"padding": 1}, (6, 4, 1, 1)),  # padding wider than the kernel
        ({"groups": 4}, (8, 1, 3, 3)),  # depthwise
        ({"padding": "same", "dilation": 2}, (6, 4, 3, 3)),
    ],
)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d(kwargs, weight_shape, bias):
    args = [r(2, 4, 9, 10), r(*weight_shape)]
    if bias:
        args.append(r(weight_shape[0]))
    check(lambda x, w, *b: F.conv2d(x, w, *b, **kwargs), *args, **TOL)


def test_conv2d_input_without_grad():
    # Only the weight and bias gradients are requested from convolution_backward.
    x = r(2, 3, 8, 8)
    check(lambda w, b: F.conv2d(x.to(w.device), w, b, padding=1), r(5, 3, 3, 3), r(5), **TOL)


@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1}, {"dilation": 3}, {"groups": 3, "padding": 2}])
def test_conv1d(kwargs):
    groups = kwargs.get("groups", 1)
    check(lambda x, w, b: F.conv1d(x, w, b, **kwargs), r(2, 6, 17), r(6, 6 // groups, 3), r(6), **TOL)


def test_conv3d():
    check(lambda x, w: F.conv3d(x, w, stride=(1, 2, 2), padding=1), r(1, 2, 5, 6, 7), r(4, 2, 3, 3, 3), **TOL)


def test_conv2d_unbatched():
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1), r(3, 7, 7), r(4, 3, 3, 3), r(4), **TOL)


def test_conv2d_float64():
    check(lambda x, w: F.conv2d(x, w, stride=2), r(2, 3, 8, 8).double(), r(4, 3, 3, 3).double())


def test_conv2d_module_backward():
    torch.manual_seed(0)
    cpu = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    tpu = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    x = r(4, 3, 11, 11)
    expected = cpu(x).square().sum()
    actual = tpu(x.to("tpu")).square().sum()
    expected.backward()
    actual.backward()
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-3)
    for (name, pc), pt in zip(cpu.named_parameters(), tpu.parameters(), strict=True):
        torch.testing.assert_close(pt.grad.cpu(), pc.grad, rtol=1e-4, atol=1e-3, msg=name)


@pytest.mark.parametrize(
    ("kwargs", "weight_shape"),
    [
        ({}, (4, 3, 3, 3)),
        ({"stride": 2}, (4, 3, 3, 3)),
        ({"stride": 2, "padding": 1, "output_padding": 1}, (4, 3, 3, 3)),
        ({"stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "dilation": 2}, (4, 3, 3, 3)),
        ({"stride": (1, 3), "padding": (2, 0)}, (4, 2, 2, 4)),
    ],
)
def test_conv_transpose2d(kwargs, weight_shape):
    check(
        lambda x, w, b: F.conv_transpose2d(x, w, b, **kwargs),
        r(2, 4, 5, 6),
        r(*weight_shape),
        r(weight_shape[1] * kwargs.get("groups", 1)),
        **TOL,
    )


def test_conv_transpose1d():
    check(lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=1), r(2, 3, 7), r(3, 5, 4), **TOL)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {"kernel_size": 3},
        {"kernel_size": 3, "stride": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 0)},
        {"kernel_size": 3, "stride": 2, "ceil_mode": True},
        {"kernel_size": 2, "dilation": 2, "padding": 1},
    ],
)
def test_max_pool2d(kwargs):
    check(lambda x: F.max_pool2d(x, **kwargs), r(2, 3, 9, 10))
    check(lambda x: F.max_pool2d(x, return_indices=True, **kwargs), r(2, 3, 9, 10))


def test_max_pool2d_ties_and_unbatched():
    # Many equal values: indices (and so gradients) must name the first maximum, as on the CPU.
    x = torch.randint(0, 3, (2, 3, 8, 8), generator=g).float()
    check(lambda t: F.max_pool2d(t, 3, stride=1, padding=1, return_indices=True), x)
    check(lambda t: F.max_pool2d(t, 2, return_indices=True), r(3, 6, 6))


def test_max_pool_1d_3d():
    check(lambda x: F.max_pool1d(x, 3, stride=2, padding=1, return_indices=True), r(2, 3, 11))
    check(lambda x: F.max_pool3d(x, 2, stride=(1, 2, 2), return_indices=True), r(1, 2, 4, 6, 6))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        {"kernel_size": (2, 4), "stride": (2, 3), "padding": (1, 2)},
        {"kernel_size": 3, "divisor_override": 2},
    ],
)
def test_avg_pool2d(kwargs):
    check(lambda x: F.avg_pool2d(x, **kwargs), r(2, 3, 9, 10), **TOL)


def test_avg_pool_1d_3d():
    check(lambda x: F.avg_pool1d(x, 3, stride=2, padding=1), r(2, 3, 11), **TOL)
    check(lambda x: F.avg_pool3d(x, 2, stride=(1, 2, 2), ceil_mode=True), r(1, 2, 4, 7, 7), **TOL)


@pytest.mark.parametrize("size", [(1, 1), (2, 2), (3, 5), (4, 3), (8, 10)])
def test_adaptive_avg_pool2d(size):
    check(lambda x: F.adaptive_avg_pool2d(x, size), r(2, 3, 8, 10), **TOL)


def test_adaptive_avg_pool_1d_3d():
    check(lambda x: F.adaptive_avg_pool1d(x, 4), r(2, 3, 10), **TOL)
    check(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 3)), r(1, 2, 4, 6, 7), **TOL)


def test_small_cnn():
    # conv -> relu -> max pool -> conv -> adaptive avg pool -> linear, forward and backward.
    def net(x, w1, b1, w2, fc):
        y = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
        y = F.adaptive_avg_pool2d(F.conv2d(y, w2, stride=2), 1).flatten(1)
        return y @ fc

    check(net, r(2, 3, 16, 16), r(8, 3, 3, 3), r(8), r(4, 8, 3, 3), r(4, 5), **TOL)


def test_direct_underscore_convolution():
    check(
        lambda x, w, b: torch._convolution(x, w, b, [2, 2], [1, 1], [1, 1], False, [0, 0], 1, False, False, True, True),
        r(2, 4, 9, 9),
        r(6, 4, 3, 3),
        r(6),
        **TOL,
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision(dtype):
    x = r(2, 4, 9, 10).to(dtype)
    check(lambda t: F.avg_pool2d(t, 3, stride=2, padding=1), x, rtol=1e-2, atol=1e-2)
    check(lambda t: F.adaptive_avg_pool2d(t, (3, 4)), x, rtol=1e-2, atol=1e-2)
    check(lambda t: F.max_pool2d(t, 3, stride=2, return_indices=True), x)
    check(lambda t, w: F.conv2d(t, w, padding=1), x, r(3, 4, 3, 3).to(dtype), rtol=2e-2, atol=5e-2)


def test_max_pool2d_nan():
    x = r(1, 2, 6, 6)
    x[0, 0, 1, 1] = float("nan")
    check(lambda t: F.max_pool2d(t, 2, return_indices=True), x, grad=False)
