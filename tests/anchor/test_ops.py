"""torch.tpu.ops on tpu tensors against CPU PyTorch or hand-computed results (single process; the collectives are in
test_anchor_distributed.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nested._internal.nested_tensor import nested_view_from_values_offsets

import torch_tpu  # noqa: F401

ops = torch.tpu.ops
TPU = "tpu"

POOLS = [
    (1, (2, 3, 11), ([3], [2], [1], [1], False)),
    (1, (3, 10), ([2], [1], [0], [2], True)),
    (2, (2, 3, 9, 8), ([3, 2], [2, 2], [1, 0], [1, 1], True)),
    (2, (3, 7, 7), ([2, 2], [1, 2], [1, 1], [2, 1], False)),
    (3, (1, 2, 5, 6, 7), ([2, 3, 2], [2, 1, 2], [1, 1, 0], [1, 1, 2], True)),
]


@pytest.mark.parametrize("dims,shape,args", POOLS)
def test_max_pool_and_backward_match_torch(dims: int, shape: tuple[int, ...], args: tuple) -> None:
    torch.manual_seed(dims)
    x = torch.randn(shape)
    x[..., 0] = x[..., 1]  # ties: the gradient must go where torch sends it
    ref_fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
    k, s, p, d, ceil = args
    leaf = x.clone().requires_grad_(True)
    want = ref_fn(leaf, k, s, p, d, ceil_mode=ceil)
    g = torch.randn_like(want)
    want.backward(g)

    fwd = getattr(ops, f"max_pool{dims}d")
    bwd = getattr(ops, f"max_pool{dims}d_backward")
    got = fwd(x.to(TPU), *args)
    assert got.device.type == TPU and not got.requires_grad
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=0, atol=0)
    grad = bwd(g.to(TPU), x.to(TPU), *args)
    torch.testing.assert_close(grad.cpu(), leaf.grad, rtol=0, atol=0)
    # CPU tensors take the same path
    torch.testing.assert_close(bwd(g, x, *args), leaf.grad, rtol=0, atol=0)


def test_max_pool_argument_checks() -> None:
    x = torch.randn(1, 1, 4, 4, device=TPU)
    with pytest.raises(ValueError, match="one per spatial dimension"):
        ops.max_pool2d(x, [2], [2, 2], [0, 0], [1, 1], False)
    with pytest.raises(ValueError, match="expected a 3D or 4D input"):
        ops.max_pool2d(torch.randn(4, 4, device=TPU), [2, 2], [2, 2], [0, 0], [1, 1], False)
    with pytest.raises(ValueError, match="grad_output has shape"):
        ops.max_pool2d_backward(torch.ones(1, 1, 3, 3, device=TPU), x, [2, 2], [2, 2], [0, 0], [1, 1], False)


def _ragged_reference(lhs: torch.Tensor, rhs: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    out = torch.zeros(lhs.shape[0], rhs.shape[2])
    start = 0
    for i, n in enumerate(sizes):
        out[start : start + n] = lhs[start : start + n] @ rhs[i]
        start += n
    return out


@pytest.mark.parametrize("sizes,m", [([3, 0, 4, 2], 9), ([5], 5), ([2, 2, 1], 7)])  # the last leaves 2 rows groupless
def test_ragged_dot_matches_per_group_matmuls(sizes: list[int], m: int) -> None:
    torch.manual_seed(len(sizes))
    g, k, n = len(sizes), 6, 5
    lhs, rhs = torch.randn(m, k), torch.randn(g, k, n)
    gs = torch.tensor(sizes, dtype=torch.int32)
    want = _ragged_reference(lhs, rhs, sizes)

    tl, tr = lhs.to(TPU).requires_grad_(True), rhs.to(TPU).requires_grad_(True)
    got = ops.ragged_dot(tl, tr, gs.to(TPU))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)

    # gradients against the per-group loop's autograd, and ragged_dot_weight_grad against the same
    cl, cr = lhs.clone().requires_grad_(True), rhs.clone().requires_grad_(True)
    grad_out = torch.randn(m, n)
    _ragged_reference(cl, cr, sizes).backward(grad_out)
    got.backward(grad_out.to(TPU))
    torch.testing.assert_close(tl.grad.cpu(), cl.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tr.grad.cpu(), cr.grad, rtol=1e-5, atol=1e-5)
    wg = ops.ragged_dot_weight_grad(lhs.to(TPU), grad_out.to(TPU), gs.to(TPU))
    assert wg.shape == (g, k, n)
    torch.testing.assert_close(wg.cpu(), cr.grad, rtol=1e-5, atol=1e-5)

    out = torch.full((m, n), 7.0, device=TPU)
    assert ops.ragged_dot(lhs.to(TPU), rhs.to(TPU), gs.to(TPU), out=out) is out
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)


def test_ragged_dot_shape_checks() -> None:
    with pytest.raises(ValueError, match="group_sizes must have shape"):
        ops.ragged_dot(torch.ones(4, 2), torch.ones(3, 2, 2), torch.tensor([4, 0]))
    with pytest.raises(ValueError, match="columns"):
        ops.ragged_dot(torch.ones(4, 3), torch.ones(1, 2, 2), torch.tensor([4]))


def _jagged(lengths: list[int], dim: int, device: str) -> torch.Tensor:
    values = torch.arange(sum(lengths) * dim, dtype=torch.float32).reshape(-1, dim).to(device)
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64, device=device)
    return nested_view_from_values_offsets(values, offsets)


@pytest.mark.parametrize("device", ["cpu", TPU])
def test_align_and_strip_jagged(device: str) -> None:
    nt = _jagged([3, 1, 4], 2, device)  # 8 tokens
    padded = ops.align_jagged_to_multiple(nt, multiple=5, padding_value=-1.0)
    assert padded.is_nested and padded.values().shape == (10, 2)
    assert padded.values().device.type == device
    want = torch.cat([torch.arange(16.0).reshape(8, 2), torch.full((2, 2), -1.0)])
    torch.testing.assert_close(padded.values().cpu(), want)
    assert padded.offsets().cpu().tolist() == [0, 3, 4, 8]
    assert ops.align_jagged_to_multiple(nt, multiple=4) is nt  # already aligned
    assert ops.align_jagged_to_multiple(nt).values().shape[0] == 128

    for stripped in (ops.strip_jagged_padding(padded), ops.strip_jagged_padding(padded, valid_tokens=8)):
        torch.testing.assert_close(stripped.values().cpu(), torch.arange(16.0).reshape(8, 2))
        assert stripped.offsets().cpu().tolist() == [0, 3, 4, 8]
    assert ops.strip_jagged_padding(nt) is nt
    with pytest.raises(TypeError, match="torch.jagged"):
        ops.align_jagged_to_multiple(torch.ones(3, device=device))
    with pytest.raises(ValueError, match="outside"):
        ops.strip_jagged_padding(padded, valid_tokens=11)


def _attention_reference(q, k, v, scale, allowed):  # noqa: ANN001, ANN202 - plain CPU math
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    logits = (q @ k.transpose(-1, -2)) * scale
    logits = logits.masked_fill(~allowed, float("-inf"))
    return logits.softmax(-1) @ v


@pytest.mark.parametrize(
    "kv_heads,kwargs",
    [
        (4, {}),
        (4, {"is_causal": False, "scale": 0.3}),
        (2, {"enable_gqa": True, "local_window_size": 2}),
        (1, {"enable_gqa": True, "block_q": 128, "q_layout": "SEQ_MINOR"}),
    ],
)
def test_splash_sdpa_matches_masked_softmax(kv_heads: int, kwargs: dict) -> None:
    torch.manual_seed(kv_heads)
    b, h, s, d = 2, 4, 6, 8
    q, k, v = torch.randn(b, h, s, d), torch.randn(b, kv_heads, s, d), torch.randn(b, kv_heads, s, d)
    i, j = torch.arange(s).unsqueeze(1), torch.arange(s).unsqueeze(0)
    if "local_window_size" in kwargs:
        allowed = (j <= i) & (j >= i - kwargs["local_window_size"])
    elif kwargs.get("is_causal", True):
        allowed = j <= i
    else:
        allowed = torch.ones(s, s, dtype=torch.bool)
    want = _attention_reference(q, k, v, kwargs.get("scale", d**-0.5), allowed)
    tq = q.to(TPU).requires_grad_(True)
    got = ops.splash_sdpa(tq, k.to(TPU), v.to(TPU), **kwargs)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
    cq = q.clone().requires_grad_(True)
    _attention_reference(cq, k, v, kwargs.get("scale", d**-0.5), allowed).sum().backward()
    got.sum().backward()
    torch.testing.assert_close(tq.grad.cpu(), cq.grad, rtol=1e-4, atol=1e-5)


def test_splash_sdpa_checks_gqa_flag_and_layouts() -> None:
    q, kv = torch.randn(1, 4, 4, 8), torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="enable_gqa=False does not match"):
        ops.splash_sdpa(q, kv, kv)
    with pytest.raises(ValueError, match="k_layout must be one of"):
        ops.splash_sdpa(q, q, q, k_layout="ROW")


def test_optimization_barrier_is_an_identity_list() -> None:
    a = torch.randn(3, 4, device=TPU)
    b = torch.randn(2, device=TPU, requires_grad=True)
    out = ops.optimization_barrier([a, b])
    assert isinstance(out, list) and len(out) == 2
    for got, src in zip(out, (a, b), strict=True):
        assert got.shape == src.shape and got.dtype == src.dtype and got.stride() == src.stride()
        torch.testing.assert_close(got.cpu(), src.detach().cpu(), rtol=0, atol=0)
    (out[1] * 3).sum().backward()
    torch.testing.assert_close(b.grad.cpu(), torch.full((2,), 3.0))
    with pytest.raises(TypeError, match="sequence of tensors"):
        ops.optimization_barrier(a)


def test_sparse_gather_and_backward_match_index_ops() -> None:
    torch.manual_seed(0)
    operand = torch.randn(6, 3)
    row_pointers = torch.tensor([0, 2, 3], dtype=torch.int32)
    indices = torch.tensor([5, 0, 2, 2, 1, 0], dtype=torch.int32)  # 3 rows x 2 slots
    got = ops.sparse_gather(row_pointers.to(TPU), indices.to(TPU), operand.to(TPU), 2)
    torch.testing.assert_close(got.cpu(), operand[indices.long()], rtol=0, atol=0)
    grad_out, base = torch.randn(6, 3), torch.randn(6, 3)
    want = base.clone()
    for r, idx in enumerate(indices.tolist()):
        want[idx] += grad_out[r]
    got_grad = ops.sparse_gather_backward(grad_out.to(TPU), indices.to(TPU), base.to(TPU))
    torch.testing.assert_close(got_grad.cpu(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="len\\(row_pointers\\) \\* max_non_zeroes_per_row = 9"):
        ops.sparse_gather(row_pointers, indices, operand, 3)


SPARSE_CORE = {
    "sparse_dense_matmul": 8,
    "sparse_dense_matmul_grad_with_sgd": 11,
    "sparse_dense_matmul_grad_with_adagrad": 13,
    "sparse_dense_matmul_grad_with_adam": 16,
    "sparse_dense_matmul_activation_unstack": 3,
    "sparse_dense_matmul_gradient_stack": 3,
    "sparse_iota": 3,
    "sparse_map_row": 10,
}


@pytest.mark.parametrize("name,nargs", sorted(SPARSE_CORE.items()))
def test_sparse_core_ops_say_they_need_a_sparse_core(name: str, nargs: int) -> None:
    fn = getattr(ops, name)
    platform = torch.tpu.get_device_properties(0).platform
    with pytest.raises(
        RuntimeError, match=rf"^{name} needs a TPU SparseCore, not available on this platform \({platform}\)"
    ):
        fn(*([None] * nargs))


def test_ops_exports_exactly_the_anchor_names() -> None:
    assert len(dir(ops)) == 27 and "ragged_dot" in dir(ops)
    with pytest.raises(AttributeError):
        ops.not_an_op  # noqa: B018
