"""Symmetric eigendecomposition and SVD on tpu (Jacobi methods, csrc/lowering/linalg/jacobi.cpp) against CPU
PyTorch's LAPACK: eigenvalues and singular values, sign-invariant results built on the vectors (reconstructions,
projectors, pinv, matrix_rank, cond, norms), their gradients, errors of NaN inputs, and no CPU fallback. Singular and
eigen vectors themselves are unique only up to sign (phase), so they are compared through such functions."""

from __future__ import annotations

import pytest
import torch

import torch_tpu
from tests.ops.harness import check

g = torch.Generator().manual_seed(0)

# torch.testing.assert_close's defaults per dtype.
DEFAULT_TOL = {
    torch.float32: {"rtol": 1.3e-6, "atol": 1e-5},
    torch.float64: {"rtol": 1e-7, "atol": 1e-7},
    torch.complex64: {"rtol": 1.3e-6, "atol": 1e-5},
    torch.complex128: {"rtol": 1e-7, "atol": 1e-7},
}
DTYPES = [torch.float32, torch.float64]


def r(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=dtype)


def orthogonal(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.linalg.qr(r(*shape, dtype=dtype)).Q


def with_singular_values(m: int, n: int, s: list[float], batch: tuple[int, ...] = ()) -> torch.Tensor:
    """A [*batch, m, n] with the given singular values (len(s) = min(m, n)), in float64."""
    u = orthogonal(*batch, m, m)[..., : len(s)]
    v = orthogonal(*batch, n, n)[..., : len(s)]
    return (u * torch.tensor(s, dtype=torch.float64)) @ v.mT


def symmetric(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    a = r(*shape, dtype=dtype)
    return a + a.mH


def with_eigenvalues(w: list[float], batch: tuple[int, ...] = ()) -> torch.Tensor:
    q = orthogonal(*batch, len(w), len(w))
    return (q * torch.tensor(w, dtype=torch.float64)) @ q.mT


def matrices(kind: str, shape: tuple[int, ...]) -> torch.Tensor:
    *batch, m, n = shape
    k = min(m, n)
    if kind == "random":
        return r(*shape)
    if kind == "ill_conditioned":  # condition number 1e6
        return with_singular_values(m, n, torch.logspace(0, -6, k).tolist(), tuple(batch))
    if kind == "rank_deficient":
        return r(*batch, m, max(k // 2, 1)) @ r(*batch, max(k // 2, 1), n)
    if kind == "repeated":  # singular values 3, 3, 1, 1, ...
        return with_singular_values(m, n, [3.0 if i < k // 2 else 1.0 for i in range(k)], tuple(batch))
    raise AssertionError(kind)


def hermitian(kind: str, shape: tuple[int, ...]) -> torch.Tensor:
    *batch, n, _ = shape
    if kind == "random":
        return symmetric(*shape)
    if kind == "ill_conditioned":
        return with_eigenvalues(
            (torch.logspace(0, -6, n) * torch.tensor([(-1) ** i for i in range(n)])).tolist(), tuple(batch)
        )
    if kind == "rank_deficient":
        a = r(*batch, n, max(n // 2, 1))
        return a @ a.mT
    if kind == "repeated":  # eigenvalues -1, -1, 2, 2, 2, ...
        return with_eigenvalues([-1.0 if i < n // 3 else 2.0 for i in range(n)], tuple(batch))
    raise AssertionError(kind)


def eigh_reconstruction(a: torch.Tensor, uplo: str = "L") -> torch.Tensor:
    w, v = torch.linalg.eigh(a, UPLO=uplo)
    return (v * w.unsqueeze(-2).to(v.dtype)) @ v.mH


def svd_reconstruction(a: torch.Tensor) -> torch.Tensor:
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return (u * s.unsqueeze(-2).to(u.dtype)) @ vh


def full_svd_parts(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Sign-invariant pieces of the full SVD: U U^H, V V^H (both identities), U[:, :k] S Vh[:k]."""
    u, s, vh = torch.linalg.svd(a, full_matrices=True)
    k = s.shape[-1]
    rec = (u[..., :k] * s.unsqueeze(-2).to(u.dtype)) @ vh[..., :k, :]
    return u @ u.mH, vh.mH @ vh, rec


KINDS = ["random", "ill_conditioned", "rank_deficient", "repeated"]
SQUARE = [(5, 5), (3, 4, 4), (1, 1), (2, 2)]
RECT = [(5, 5), (6, 3), (3, 6), (2, 7, 4), (2, 3, 5), (1, 4), (4, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("kind", KINDS)
def test_eigh(kind, shape, dtype):
    a = hermitian(kind, shape).to(dtype)
    tol = DEFAULT_TOL[dtype]
    check(torch.linalg.eigvalsh, a, grad=False, **tol)
    check(lambda x: torch.linalg.eigh(x).eigenvalues, a, grad=False, **tol)
    check(eigh_reconstruction, a, grad=False, **tol)
    check(lambda x: (lambda v: v @ v.mH)(torch.linalg.eigh(x).eigenvectors), a, grad=False, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle(uplo, dtype):
    a = r(3, 5, 5).to(dtype)  # not symmetric: only the UPLO triangle counts
    tol = DEFAULT_TOL[dtype]
    check(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a, grad=False, **tol)
    check(lambda x: eigh_reconstruction(x, uplo), a, grad=False, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", RECT)
@pytest.mark.parametrize("kind", KINDS)
def test_svd(kind, shape, dtype):
    a = matrices(kind, shape).to(dtype)
    tol = DEFAULT_TOL[dtype]
    check(torch.linalg.svdvals, a, grad=False, **tol)
    check(lambda x: torch.linalg.svd(x).S, a, grad=False, **tol)
    check(svd_reconstruction, a, grad=False, **tol)
    check(full_svd_parts, a, grad=False, **tol)
    check(lambda x: torch.svd(x, some=True).S, a, grad=False, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", RECT)
@pytest.mark.parametrize("kind", ["random", "rank_deficient"])
def test_built_on_svd(kind, shape, dtype):
    a = matrices(kind, shape).to(dtype)
    tol = DEFAULT_TOL[dtype]
    if kind == "rank_deficient" and dtype == torch.float32:
        # CPU's float32 LAPACK leaves the zero singular values at ~1e-7 |A|, near pinv's cutoff: its pinv is then
        # off by orders of magnitude. Compared with CPU's float64 answer for the same values instead.
        cutoff = torch.finfo(torch.float32).eps * max(a.shape[-2:])  # pinv's default rtol for float32
        want = torch.linalg.pinv(a.double(), rtol=cutoff).float()
        torch.testing.assert_close(torch.linalg.pinv(a.to("tpu")).cpu(), want, **tol)
    else:
        check(torch.linalg.pinv, a, grad=False, **tol)
        check(torch.pinverse, a, grad=False, **tol)
    check(torch.linalg.matrix_rank, a, grad=False)
    check(lambda x: torch.linalg.matrix_norm(x, "nuc"), a, grad=False, **tol)
    check(lambda x: torch.linalg.matrix_norm(x, 2), a, grad=False, **tol)
    if kind == "random":
        check(torch.linalg.cond, a, grad=False, **tol)
        check(lambda x: torch.linalg.matrix_norm(x, -2), a, grad=False, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_built_on_eigh(kind, dtype):
    a = hermitian(kind, (2, 5, 5)).to(dtype)
    tol = DEFAULT_TOL[dtype]
    if kind != "ill_conditioned" or dtype == torch.float64:
        # (float32 pinv of a condition-1e6 matrix is rounding noise at the 1e-2 level in PyTorch's own formula)
        check(lambda x: torch.linalg.pinv(x, hermitian=True), a, grad=False, **tol)
    check(lambda x: torch.linalg.matrix_rank(x, hermitian=True), a, grad=False)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex(dtype):
    tol = DEFAULT_TOL[dtype]
    h = symmetric(2, 4, 4, dtype=dtype)
    check(torch.linalg.eigvalsh, h, grad=False, **tol)
    check(eigh_reconstruction, h, grad=False, **tol)
    check(lambda x: eigh_reconstruction(x, "U"), r(4, 4, dtype=dtype), grad=False, **tol)
    for shape in [(4, 4), (5, 3), (2, 3, 5)]:
        a = r(*shape, dtype=dtype)
        check(torch.linalg.svdvals, a, grad=False, **tol)
        check(svd_reconstruction, a, grad=False, **tol)
        check(full_svd_parts, a, grad=False, **tol)
        check(torch.linalg.pinv, a, grad=False, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients(dtype):
    # Gradients come from PyTorch's own formulas on the decompositions' results; compared through functions the
    # vectors' signs do not change.
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else DEFAULT_TOL[dtype]
    a = matrices("random", (2, 5, 3)).to(dtype)
    check(lambda x: torch.linalg.svdvals(x).sum(), a, **tol)
    check(torch.linalg.svdvals, a, **tol)
    check(torch.linalg.pinv, a, **tol)
    check(svd_reconstruction, a, **tol)
    check(lambda x: torch.linalg.matrix_norm(x, "nuc"), a.mT, **tol)
    s = hermitian("random", (2, 4, 4)).to(dtype)
    check(torch.linalg.eigvalsh, s, **tol)
    check(lambda x: (torch.linalg.eigh(x).eigenvectors ** 2 * torch.arange(4.0, device=x.device)).sum(), s, **tol)
    check(lambda x: torch.linalg.pinv(x, hermitian=True), s, **tol)


@pytest.mark.parametrize("shape", [(0, 0), (3, 0), (0, 4), (0, 3, 3), (2, 0, 2)])
def test_empty(shape):
    a = torch.zeros(shape)
    check(lambda x: torch.linalg.svd(x, full_matrices=False), a, grad=False)
    check(lambda x: torch.linalg.svd(x, full_matrices=True), a, grad=False)
    check(torch.linalg.svdvals, a, grad=False)
    if shape[-1] == shape[-2]:
        check(torch.linalg.eigh, a, grad=False)
        check(torch.linalg.eigvalsh, a, grad=False)


def test_values_only_outputs_are_empty():
    a = symmetric(4, 4)
    w, v = torch.ops.aten._linalg_eigh(a.to("tpu"), "L", False)
    assert v.numel() == 0 and w.shape == (4,)
    torch.testing.assert_close(w.cpu(), torch.linalg.eigvalsh(a))
    b = r(3, 5)
    u, s, vh = torch.ops.aten._linalg_svd(b.to("tpu"), False, False)
    assert u.numel() == 0 and vh.numel() == 0
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(b))


def _raises_like_cpu(fn, a):
    with pytest.raises(RuntimeError) as cpu:
        fn(a)
    with pytest.raises(RuntimeError) as tpu:
        out = fn(a.to("tpu"))
        (out[0] if isinstance(out, tuple) else out).cpu()  # the check is reported by the next sync at the latest
    assert str(tpu.value) == str(cpu.value)


@pytest.mark.parametrize("batched", [False, True])
def test_nan_input_raises_like_cpu(batched):
    a = r(4, 4)
    a[1, 0] = a[0, 1] = float("nan")
    if batched:
        a = torch.stack([symmetric(4, 4), a])
    _raises_like_cpu(torch.linalg.svd, a)
    _raises_like_cpu(torch.linalg.svdvals, a)
    _raises_like_cpu(torch.linalg.eigh, a)
    _raises_like_cpu(torch.linalg.eigvalsh, a)


def test_infinite_input_gives_nan_like_cpu():
    a = symmetric(4, 4)
    a[2, 1] = a[1, 2] = float("inf")
    check(torch.linalg.eigvalsh, a, grad=False)
    check(torch.linalg.svdvals, a, grad=False)


def test_nan_in_unread_triangle_is_ignored():
    a = symmetric(4, 4)
    a[0, 3] = float("nan")
    check(torch.linalg.eigvalsh, a, grad=False, **DEFAULT_TOL[torch.float64])


def test_no_fallback_under_error_mode(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "error")
    a = matrices("random", (3, 5, 4)).to("tpu").requires_grad_()
    s = hermitian("random", (2, 4, 4)).to("tpu").requires_grad_()
    out = torch.linalg.svdvals(a).sum() + torch.linalg.pinv(a).sum() + svd_reconstruction(a).sum()
    out = out + torch.linalg.eigvalsh(s).sum() + (torch.linalg.eigh(s).eigenvectors ** 2).sum()
    out = out + torch.linalg.matrix_rank(a).sum() + torch.linalg.cond(a[:, :4]).sum()
    out.backward()
    assert torch.isfinite(a.grad.cpu()).all() and torch.isfinite(s.grad.cpu()).all()
    assert not torch_tpu.metrics()["fallback_ops"]


def test_torch_compile():
    a = matrices("random", (3, 5, 4)).float()

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.svdvals(x).sum() + torch.linalg.eigvalsh(x.mT @ x).sum() + torch.linalg.pinv(x).sum()

    torch_tpu.reset_op_counts()
    out = torch.compile(f, backend="tpu", fullgraph=True)(a.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(a), rtol=1e-5, atol=1e-5)
    assert not torch_tpu.metrics()["fallback_ops"]


@pytest.mark.parametrize("name", ["linalg.eigh", "linalg.svd", "svd"])
def test_opinfo_samples_pass(name):
    # op_db's non-empty samples through the conformance runner's checks: eigen/singular vectors whose signs differ
    # from LAPACK's pass after the sample's output_process_fn_grad (as PyTorch's test_compare_cpu compares them);
    # values must match and nothing may fall back.
    pytest.importorskip("expecttest")
    from torch.testing._internal.common_methods_invocations import op_db

    from tools.opinfo import check as opinfo_check

    op = next(op for op in op_db if op.name == name and not op.variant_test_name)
    torch.manual_seed(0)
    samples = [s for s in op.sample_inputs("cpu", torch.float32, requires_grad=True) if s.input.numel() > 0][:4]
    assert samples
    for sample in samples:
        fallbacks: dict[str, int] = {}
        notes: list[str] = []
        assert opinfo_check._forward(op, sample, fallbacks, notes)
        assert opinfo_check._backward(op, sample, fallbacks, notes)
        assert not fallbacks, fallbacks
