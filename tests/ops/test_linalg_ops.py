"""Linear algebra on tpu against CPU PyTorch: LU/Cholesky/QR/triangular solves and what is built on them, forward and
backward, errors of singular and non positive-definite inputs, and no CPU fallback."""

from __future__ import annotations

import pytest
import torch

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)


def r(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=dtype)


def well_conditioned(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    n = shape[-1]
    return r(*shape, dtype=dtype) + n * torch.eye(n, dtype=dtype)


def spd(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    a = r(*shape, dtype=dtype)
    return a @ a.mH + torch.eye(shape[-1], dtype=dtype)


def tol(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 1e-4, "atol": 1e-4} if dtype in (torch.float32, torch.complex64) else {"rtol": 1e-8, "atol": 1e-8}


DTYPES = [torch.float32, torch.float64]
SHAPES = [(4, 4), (3, 5, 5), (2, 1, 3, 3), (1, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "fn",
    [
        torch.linalg.inv,
        torch.linalg.det,
        torch.linalg.slogdet,
        torch.logdet,
        torch.linalg.lu_factor,
        torch.linalg.lu,
        lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)),
        lambda a: torch.linalg.inv_ex(a).inverse,
        lambda a: torch.linalg.qr(a),
        lambda a: torch.linalg.qr(a, mode="complete"),
    ],
)
def test_square(fn, shape, dtype):
    a = well_conditioned(*shape, dtype=dtype)
    if fn is torch.logdet:
        a = spd(*shape, dtype=dtype)
    check(fn, a, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize(("a_shape", "b_shape"), [((4, 4), (4, 2)), ((3, 4, 4), (3, 4, 1)), ((4, 4), (2, 4, 3))])
def test_solve(a_shape, b_shape, left, dtype):
    a = well_conditioned(*a_shape, dtype=dtype)
    b = r(*b_shape, dtype=dtype)
    if not left:
        b = b.mT
    check(lambda x, y: torch.linalg.solve(x, y, left=left), a, b, **tol(dtype))
    check(lambda x, y: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), y, left=left), a, b, **tol(dtype))
    check(
        lambda x, y: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), y, left=left, adjoint=True), a, b, **tol(dtype)
    )


def test_solve_vector_and_non_contiguous():
    a = well_conditioned(3, 5, 5)
    check(lambda x, y: torch.linalg.solve(x, y), a, r(3, 5))
    check(lambda x, y: torch.linalg.solve(x.mT, y), a, r(5, 2))
    check(lambda x: torch.ops.aten._linalg_solve_ex(x, torch.ones(3, 5, 2, dtype=x.dtype, device=x.device)), a)
    check(torch.ops.aten._linalg_det, a)  # its LU is of A^T when A is contiguous, as on the CPU
    check(lambda x: torch.ops.aten._linalg_slogdet(x.mT), a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 6, 4), (2, 4, 6)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_rectangular(shape, mode):
    grad = mode != "r" and (mode == "reduced" or shape[-2] <= shape[-1])  # PyTorch's own backward limits
    check(lambda a: torch.linalg.qr(a, mode=mode), r(*shape), grad=grad)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 6)])
def test_lu_rectangular(shape):
    check(torch.linalg.lu, r(*shape))
    check(torch.linalg.lu_factor_ex, r(*shape), grad=False)


def test_lu_pivots_exact_on_ties():
    # Equal magnitudes: LAPACK takes the first largest; a zero column leaves info set and the rest goes on.
    a = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 5.0, 1.0], [1.0, 0.0, 4.0]])
    check(torch.linalg.lu_factor_ex, a, grad=False)
    s = torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]])
    check(torch.linalg.lu_factor_ex, s, grad=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_cholesky_family(shape, upper, dtype):
    s = spd(*shape, dtype=dtype)
    check(lambda x: torch.linalg.cholesky(x, upper=upper), s, **tol(dtype))
    check(lambda x: torch.linalg.cholesky_ex(x, upper=upper).L, s, **tol(dtype))
    fac = torch.linalg.cholesky(s, upper=upper)
    b = r(*shape[:-1], 2, dtype=dtype)
    check(lambda f, y: torch.cholesky_solve(y, f, upper=upper), fac, b, **tol(dtype))
    check(lambda f: torch.cholesky_inverse(f, upper=upper), fac[0] if fac.dim() == 3 else fac, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit, dtype):
    a = well_conditioned(2, 4, 4, dtype=dtype)
    b = r(2, 4, 3, dtype=dtype) if left else r(2, 3, 4, dtype=dtype)
    fn = lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit)  # noqa: E731
    check(fn, a, b, **tol(dtype))
    if left:
        check(lambda y, x: torch.triangular_solve(y, x, upper=upper, transpose=unit), b, a, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [0.1, 1.0, 5.0])
def test_matrix_exp(scale, dtype):
    # Norms below and above the scaling threshold: a batch whose matrices need different numbers of squarings.
    a = r(3, 4, 4, dtype=dtype) * torch.tensor([scale, 1.0, 0.01], dtype=dtype)[:, None, None]
    check(
        torch.linalg.matrix_exp,
        a,
        rtol=1e-3 if dtype == torch.float32 else 1e-9,
        atol=1e-3 if dtype == torch.float32 else 1e-9,
    )


@pytest.mark.parametrize(("shape", "k"), [((5, 5), 5), ((6, 4), 3), ((2, 5, 3), 2), ((4, 2), 0)])
def test_householder_product(shape, k):
    check(torch.linalg.householder_product, r(*shape), r(*shape[:-2], k))


def test_cross_broadcast():
    check(torch.linalg.cross, r(1, 4, 3), r(2, 1, 3))
    check(lambda x, y: torch.linalg.cross(x, y, dim=0), r(3, 5), r(3, 5))


def test_complex():
    a = well_conditioned(3, 4, 4, dtype=torch.complex128)
    b = r(3, 4, 2, dtype=torch.complex128)
    for fn in (torch.linalg.inv, torch.linalg.det, torch.linalg.slogdet, torch.linalg.qr, torch.linalg.lu_factor):
        check(fn, a, grad=False)
    check(torch.linalg.solve, a, b, grad=False)
    check(torch.linalg.cholesky, a @ a.mH, grad=False)


def test_ill_conditioned_but_solvable():
    # Hilbert matrix: cond ~ 1e7 at n = 6, still solvable in float64 (pivoting matters).
    n = 6
    i = torch.arange(n, dtype=torch.float64)
    h = 1.0 / (i[:, None] + i[None, :] + 1)
    check(torch.linalg.inv, h, rtol=1e-5, atol=1e-3)
    check(torch.linalg.det, h, rtol=1e-6, atol=1e-20)
    x = torch.randn(n, 1, generator=g, dtype=torch.float64)
    got = torch.linalg.solve(h.to("tpu"), (h @ x).to("tpu")).cpu()
    torch.testing.assert_close(got, torch.linalg.solve(h, h @ x), rtol=1e-6, atol=1e-6)


def test_info_without_raising():
    sing = torch.zeros(2, 3, 3)
    sing[0] = torch.eye(3)
    check(lambda a: torch.linalg.lu_factor_ex(a).info, sing, grad=False)
    check(lambda a: torch.linalg.inv_ex(a).info, sing, grad=False)
    check(lambda a: torch.linalg.solve_ex(a, torch.ones(2, 3, 1, device=a.device)).info, sing, grad=False)
    neg = torch.stack([torch.eye(3), torch.diag(torch.tensor([1.0, -1.0, 1.0]))])
    check(lambda a: torch.linalg.cholesky_ex(a).info, neg, grad=False)


def _raises_like_cpu(fn, a):
    with pytest.raises(RuntimeError) as cpu:
        fn(a)
    with pytest.raises(RuntimeError) as tpu:
        out = fn(a.to("tpu"))
        (out[0] if isinstance(out, tuple) else out).cpu()  # the check is reported by the next sync at the latest
    assert str(tpu.value) == str(cpu.value)


@pytest.mark.parametrize("batched", [False, True])
def test_errors_match_pytorch(batched):
    sing = torch.zeros(3, 3)
    neg = -torch.eye(3)
    if batched:
        sing = torch.stack([torch.eye(3), sing])
        neg = torch.stack([torch.eye(3), neg])
    _raises_like_cpu(torch.linalg.inv, sing)
    _raises_like_cpu(torch.inverse, sing)
    _raises_like_cpu(lambda a: torch.linalg.solve(a, torch.ones(a.shape[:-1], device=a.device)), sing)
    _raises_like_cpu(torch.linalg.lu_factor, sing)
    _raises_like_cpu(torch.linalg.cholesky, neg)
    _raises_like_cpu(lambda a: torch.cholesky_inverse(a), sing)
    _raises_like_cpu(lambda a: torch.linalg.cholesky_ex(a, check_errors=True), neg)


def test_no_fallback_under_error_mode(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "error")
    a = well_conditioned(3, 4, 4).to("tpu").requires_grad_()
    out = torch.linalg.solve(a, torch.ones(3, 4, 1, dtype=a.dtype, device="tpu")).sum()
    out = out + torch.linalg.det(a).sum() + torch.linalg.qr(a).R.sum() + torch.linalg.inv(a).sum()
    out.backward()
    assert a.grad is not None and torch.isfinite(a.grad.cpu()).all()
    assert not torch_tpu.metrics()["fallback_ops"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_products_round_once(dtype):
    # The CPU kernels compute these in float32 and round once; so must the device.
    def lp(*shape: int) -> torch.Tensor:
        return r(*shape, dtype=torch.float32).to(dtype)

    check(lambda s, x, y: torch.addr(s, x, y, beta=0.5, alpha=2), lp(5, 6), lp(5), lp(6), rtol=1.6e-2, atol=1e-2)
    check(lambda s, x, y: torch.addbmm(s, x, y), lp(5, 6), lp(3, 5, 4), lp(3, 4, 6), rtol=3e-2, atol=3e-2)
    check(
        lambda s, x, y: torch.baddbmm(s, x, y, alpha=0.5), lp(3, 5, 6), lp(3, 5, 4), lp(3, 4, 6), rtol=1.6e-2, atol=1e-2
    )
    check(torch.vdot, lp(7), lp(7), rtol=1.6e-2, atol=1e-2)


def test_addr_bool_and_vdot_complex():
    x = torch.tensor([True, False, True])
    y = torch.tensor([False, True])
    check(lambda s, a, b: torch.addr(s, a, b), torch.tensor([[True, False]] * 3), x, y, grad=False)
    check(torch.vdot, r(5, dtype=torch.complex64), r(5, dtype=torch.complex64), rtol=1e-5, atol=1e-5)
