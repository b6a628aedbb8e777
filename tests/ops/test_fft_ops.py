"""torch.fft on tpu against CPU PyTorch: _fft_r2c/_fft_c2r/_fft_c2c lowered to stablehlo.fft, forward and backward."""

from __future__ import annotations

import pytest
import torch

from tests.ops.harness import check

g = torch.Generator().manual_seed(0)


def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=dtype)


def tol(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 1e-4, "atol": 1e-4} if dtype in (torch.float32, torch.complex64) else {"rtol": 1e-9, "atol": 1e-9}


NORMS = [None, "ortho", "forward", "backward"]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    ("fn", "kwargs"),
    [
        (torch.fft.fft, {}),
        (torch.fft.ifft, {}),
        (torch.fft.fft, {"n": 5, "dim": 0}),  # trimmed, not the last dim
        (torch.fft.ifft, {"n": 11}),  # zero-padded, odd length
        (torch.fft.fft2, {}),
        (torch.fft.ifftn, {"dim": (0, 2)}),
        (torch.fft.irfft, {}),
        (torch.fft.irfft, {"n": 9}),
        (torch.fft.irfftn, {}),
        (torch.fft.hfft, {}),
    ],
)
def test_complex_input(fn, kwargs, norm, dtype):
    check(lambda x: fn(x, norm=norm, **kwargs), r(3, 6, 8, dtype=dtype), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    ("fn", "kwargs"),
    [
        (torch.fft.rfft, {}),
        (torch.fft.rfft, {"n": 7, "dim": 1}),
        (torch.fft.rfft2, {}),
        (torch.fft.rfftn, {}),
        (torch.fft.fft, {}),  # real input: a two-sided r2c
        (torch.fft.fftn, {"dim": (1, 0)}),
        (torch.fft.ihfft, {}),
        (torch.fft.ihfft2, {}),
    ],
)
def test_real_input(fn, kwargs, norm, dtype):
    check(lambda x: fn(x, norm=norm, **kwargs), r(3, 6, 8, dtype=dtype), **tol(dtype))


def test_four_dims_at_once():
    # stablehlo.fft takes at most three dims: the rest go in a second transform.
    x = r(2, 3, 4, 5, 6)
    check(lambda t: torch.fft.rfftn(t, dim=(0, 1, 2, 3, 4)), x, **tol(torch.float32))
    check(lambda t: torch.fft.fftn(t.to(torch.complex64), norm="ortho"), x, **tol(torch.float32))
    check(
        lambda t: torch.fft.irfftn(t, dim=(0, 1, 2, 4)), r(2, 3, 4, 5, 6, dtype=torch.complex64), **tol(torch.float32)
    )


def test_non_contiguous_and_conjugated():
    x = r(6, 8, dtype=torch.complex64)
    check(lambda t: torch.fft.fft(t.mT), x, **tol(torch.complex64))
    check(lambda t: torch.fft.ifft(t.conj()), x, grad=False, **tol(torch.complex64))
    check(lambda t: torch.fft.rfft(t[:, ::2]), r(6, 16), **tol(torch.float32))


def test_fftshift_roundtrip():
    x = r(4, 10)
    check(lambda t: torch.fft.fftshift(torch.fft.fft(t)), x, **tol(torch.float32))
    check(lambda t: torch.fft.irfft(torch.fft.rfft(t), n=10), x, **tol(torch.float32))
