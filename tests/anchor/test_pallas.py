"""torch.tpu.pallas.jax_op: JAX and Pallas functions as torch ops, against PyTorch references.

On tpu the function's StableHLO is one node of the recorded graph (fused: one execution with its neighbours), under
torch.compile part of the compiled program; CPU tensors run it through JAX's CPU backend; the default backward is
jax.vjp. Importing torch_tpu never imports JAX.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import eager

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pl = pytest.importorskip("jax.experimental.pallas")
pallas = torch.tpu.pallas


def _sin_mul(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sin(x) * y


def _scaled_pair(x: jax.Array, scale: float, axis: int = 0) -> tuple[jax.Array, jax.Array]:
    return x * scale, jnp.sum(x, axis=axis)


def _double_kernel(x_ref, o_ref):  # noqa: ANN001  (Pallas refs)
    o_ref[...] = x_ref[...] * 2.0 + 1.0


def _pallas_affine(x: jax.Array) -> jax.Array:
    return pl.pallas_call(_double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


sin_mul = pallas.jax_op("torch_tpu_test::sin_mul", _sin_mul)
scaled_pair = pallas.jax_op("torch_tpu_test::scaled_pair", _scaled_pair)
pallas_affine = pallas.jax_op("torch_tpu_test::pallas_affine")(_pallas_affine)


def executions() -> int:
    return int(torch_tpu.metrics()["executions"])


@pytest.mark.parametrize("mode", ["fused", "debug", "strict"])
def test_elementwise_kernel_between_torch_ops(mode: str) -> None:
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    want = (torch.sin(x + 1) * y).exp()
    with eager.eager_mode(mode):
        tx, ty = x.to("tpu"), y.to("tpu")
        torch.tpu.synchronize()
        before = executions()
        got = sin_mul(tx + 1, ty).exp()
        out = got.cpu()
        ran = executions() - before
    torch.testing.assert_close(out, want)
    assert got.device.type == "tpu" and got.dtype == torch.float32
    if mode == "fused":
        assert ran == 1, f"the JAX op and its neighbours should be one program, ran {ran}"
    else:
        assert ran >= 3


def test_multiple_results_and_static_arguments() -> None:
    x = torch.randn(3, 4)
    for axis in (0, 1):
        a, b = scaled_pair(x.to("tpu"), 2.5, axis=axis)
        torch.testing.assert_close(a.cpu(), x * 2.5)
        torch.testing.assert_close(b.cpu(), x.sum(axis))


def test_pallas_kernel_runs_in_interpret_mode_off_tpu() -> None:
    x = torch.randn(8, 16)
    torch.testing.assert_close(pallas_affine(x.to("tpu")).cpu(), x * 2 + 1)


def test_cpu_tensors_run_through_jax() -> None:
    x, y = torch.randn(6), torch.randn(6)
    out = sin_mul(x, y)
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, torch.sin(x) * y)


def test_bfloat16_and_integer_dtypes() -> None:
    def f(x: jax.Array, idx: jax.Array) -> tuple[jax.Array, jax.Array]:
        return x * 2, idx + 1

    op = pallas.jax_op("torch_tpu_test::dtypes", f)
    x, idx = torch.randn(5).bfloat16(), torch.arange(5, dtype=torch.int32)
    a, b = op(x.to("tpu"), idx.to("tpu"))
    assert a.dtype == torch.bfloat16 and b.dtype == torch.int32
    torch.testing.assert_close(a.cpu(), x * 2)
    torch.testing.assert_close(b.cpu(), idx + 1)


def test_default_backward_is_jax_vjp() -> None:
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    (torch.sin(x) * y).pow(2).sum().backward()
    tx, ty = x.detach().to("tpu").requires_grad_(), y.detach().to("tpu").requires_grad_()
    sin_mul(tx, ty).pow(2).sum().backward()
    torch.testing.assert_close(tx.grad.cpu(), x.grad)
    torch.testing.assert_close(ty.grad.cpu(), y.grad)


def test_backward_through_one_of_two_results() -> None:
    x = torch.randn(3, 4, requires_grad=True)
    (x * 2.5).sum().backward()
    tx = x.detach().to("tpu").requires_grad_()
    a, _ = scaled_pair(tx, 2.5)
    a.sum().backward()  # the second result gets no gradient: its cotangent is zeros
    torch.testing.assert_close(tx.grad.cpu(), x.grad)


def test_user_registered_backward_replaces_the_default() -> None:
    def mul(x: jax.Array, y: jax.Array) -> jax.Array:
        return x * y

    def mul_backward(g: jax.Array, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        return g * y * 10, g * x * 10  # deliberately not the true gradient: shows which backward ran

    op = pallas.jax_op("torch_tpu_test::mul_custom_grad", mul)
    back = pallas.jax_op("torch_tpu_test::mul_custom_grad_backward", mul_backward)

    def setup_context(ctx, inputs, output):  # noqa: ANN001, ANN202
        ctx.save_for_backward(*inputs)

    op.register_autograd(lambda ctx, g: back(g, *ctx.saved_tensors), setup_context=setup_context)
    x, y = torch.randn(4).to("tpu").requires_grad_(), torch.randn(4).to("tpu").requires_grad_()
    op(x, y).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), y.detach().cpu() * 10)


def test_compiled_graph_holds_the_kernel() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (sin_mul(x.cos(), y) + 1).relu()

    x, y = torch.randn(5, 3), torch.randn(5, 3)
    want = f(x, y)
    compiled = torch.compile(f, backend="tpu", fullgraph=True)  # fullgraph: a graph break would raise
    tx, ty = x.to("tpu"), y.to("tpu")
    for _ in range(3):  # the first call records, later ones replay the captured program
        torch.testing.assert_close(compiled(tx, ty).cpu(), want)


def test_compiled_training_step_matches_cpu() -> None:
    w = torch.randn(4, 4)

    def step(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return sin_mul(x @ weight, x).square().mean()

    x = torch.randn(3, 4)
    wc = w.clone().requires_grad_()
    step(x, wc).backward()
    wt = w.to("tpu").requires_grad_()
    torch.compile(step, backend="tpu", fullgraph=True)(x.to("tpu"), wt).backward()
    torch.testing.assert_close(wt.grad.cpu(), wc.grad, rtol=1e-5, atol=1e-6)


def test_custom_jax_kernel_keeps_the_result_structure() -> None:
    from torch_tpu._internal.pallas import custom_jax_kernel

    def f(x, n):  # noqa: ANN001, ANN202  (the deprecated form reads no annotations)
        return {"scaled": x * n, "shifted": x + n}

    with pytest.warns(DeprecationWarning, match="use torch.tpu.pallas.jax_op"):
        kernel = custom_jax_kernel(f, static_argnums=(1,))
    x = torch.randn(3)
    out = kernel(x.to("tpu"), 3)
    assert sorted(out) == ["scaled", "shifted"]
    torch.testing.assert_close(out["scaled"].cpu(), x * 3)
    torch.testing.assert_close(out["shifted"].cpu(), x + 3)


@pytest.mark.parametrize("device", ["tpu", "cpu"])
def test_custom_jax_kernel_writes_aliased_results_back(device: str) -> None:
    from torch_tpu._internal.pallas import custom_jax_kernel

    def put_row(cache, row, index):  # noqa: ANN001, ANN202
        return cache.at[index].set(row), jnp.sum(row)

    with pytest.warns(DeprecationWarning):
        kernel = custom_jax_kernel(put_row, static_argnums=(2,), input_output_aliases={0: 0}, warn_deprecated=False)
    cache, row = torch.zeros(4, 3), torch.randn(3)
    expected = cache.clone()
    expected[2] = row
    on = cache.to(device)
    updated, total = kernel(on, row.to(device), 2)
    torch.testing.assert_close(on.cpu(), expected)  # the argument holds the result, as TorchTPU leaves it
    torch.testing.assert_close(updated.cpu(), expected)
    torch.testing.assert_close(total.cpu(), row.sum())


def test_custom_jax_kernel_alias_errors_name_the_cause() -> None:
    from torch_tpu._internal.pallas import custom_jax_kernel

    def pair(x, y):  # noqa: ANN001, ANN202
        return x + y, jnp.sum(y)

    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="keys of input_output_aliases"):
        custom_jax_kernel(pair, donate_argnums=(1,), input_output_aliases={0: 0}, warn_deprecated=False)
    with pytest.warns(DeprecationWarning):
        scalar_into_x = custom_jax_kernel(pair, input_output_aliases={0: 1}, warn_deprecated=False)
        too_far = custom_jax_kernel(pair, input_output_aliases={1: 5}, warn_deprecated=False)
        both = custom_jax_kernel(pair, input_output_aliases={0: 0, 1: 1}, warn_deprecated=False)
    x = torch.randn(3).to("tpu")
    with pytest.raises(ValueError, match="same shape and dtype"):
        scalar_into_x(x, x)
    a, b = torch.randn(3), torch.randn(3)
    a_tpu, b_tpu = a.to("tpu"), b.to("tpu")
    with pytest.raises(ValueError, match="same shape and dtype"):
        both(a_tpu, b_tpu)  # result 1 (a scalar) cannot go into y: x is left as it was too
    torch.testing.assert_close(a_tpu.cpu(), a)
    torch.testing.assert_close(b_tpu.cpu(), b)
    with pytest.raises(ValueError, match="returns 2 result"):
        too_far(x, x)


def test_errors_name_the_cause() -> None:
    with pytest.raises(ValueError, match="namespace::name"):
        pallas.jax_op("no_namespace", _sin_mul)

    def unannotated(x: jax.Array):  # noqa: ANN202
        return x

    with pytest.raises(TypeError, match="no return annotation"):
        pallas.jax_op("torch_tpu_test::unannotated", unannotated)
    with pytest.raises(RuntimeError, match="every tensor on tpu or every tensor on cpu"):
        sin_mul(torch.randn(2).to("tpu"), torch.randn(2))
    if not jax.config.jax_enable_x64:
        with pytest.raises(TypeError, match="jax_enable_x64"):
            sin_mul(torch.randn(2, dtype=torch.float64).to("tpu"), torch.randn(2, dtype=torch.float64).to("tpu"))
    with pytest.raises(RuntimeError, match="torch_tpu_test::sin_mul: JAX could not"):
        sin_mul(torch.randn(2, 3).to("tpu"), torch.randn(4).to("tpu"))  # shapes JAX cannot broadcast
    with pytest.raises(NotImplementedError, match="sharded kernels"):
        pallas.jax_op("torch_tpu_test::sharded", _sin_mul, mesh=object())


def test_get_pallas_mesh_raises() -> None:
    with pytest.raises(NotImplementedError, match=r"get_pallas_mesh is not implemented"):
        torch.tpu.pallas.get_pallas_mesh(("x",))


def test_no_jax_import() -> None:
    code = (
        "import sys, torch, torch_tpu; torch.tpu.pallas.jax_op; torch.tpu.pallas.get_pallas_mesh; "
        "import torch_tpu._internal.pallas; print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_annotations_that_do_not_evaluate_are_read_one_by_one() -> None:
    # `if TYPE_CHECKING: import jax` with postponed annotations (this module's, which exec inherits): "jax.Array"
    # cannot be evaluated in the function's globals, "float" and "int | None" can
    scope: dict = {}
    exec("def scale(x: jax.Array, s: float, n: int | None = None) -> jax.Array:\n    return x * s", scope)
    op = pallas.jax_op("torch_tpu_test::unresolved_annotations", scope["scale"])
    x = torch.randn(3)
    torch.testing.assert_close(op(x.to("tpu"), 2.5).cpu(), x * 2.5)
