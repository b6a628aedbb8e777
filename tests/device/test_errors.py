"""Errors users can act on: PyTorch's messages and exception types, and the process keeps working."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_mixing_devices():
    a = torch.ones(3, device="tpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2, device="tpu"), torch.ones(2, 2))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3, device="tpu:1")
    # A CPU scalar tensor is allowed, as on CUDA.
    assert torch.equal((a * torch.tensor(2.0)).cpu(), torch.full((3,), 2.0))


def test_shape_errors_are_pytorchs():
    with pytest.raises(RuntimeError, match="must match the size|broadcast"):
        torch.ones(2, 3, device="tpu") + torch.ones(4, 3, device="tpu")
    with pytest.raises(RuntimeError, match="cannot be multiplied|same reduction dim"):
        torch.ones(2, 3, device="tpu") @ torch.ones(4, 3, device="tpu")


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="tpu does not support dtype ComplexHalf"):
        torch.empty(2, dtype=torch.complex32, device="tpu")
    with pytest.raises(TypeError, match="tpu does not support dtype Float8_e8m0fnu"):
        torch.zeros(2, dtype=torch.float8_e8m0fnu).to("tpu")


@pytest.mark.parametrize(
    "update",
    [
        lambda s, o: s.mul_(o),
        lambda s, o: s.mul_(1.5),
        lambda s, o: s.addcmul_(o, o),
        lambda s, o: s.addcdiv_(o, o),
        lambda s, o: s.add_(o),
        lambda s, o: torch.mul(o, o, out=s),
    ],
    ids=["mul_", "mul_scalar", "addcmul_", "addcdiv_", "add_", "mul_out"],
)
@pytest.mark.parametrize("target", [torch.long, torch.bool])
def test_unsafe_casts_into_written_tensors_raise_as_on_cpu(update, target):
    """Some of PyTorch's meta kernels (mul_, addcmul_, addcdiv_) skip TensorIterator's cast check: tpu makes it."""
    other = torch.randn(4) + 2
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type") as cpu_err:
        update(torch.ones(4, dtype=target), other)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type") as tpu_err:
        update(torch.ones(4, dtype=target, device="tpu"), other.to("tpu"))
    assert str(tpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
    ok = torch.ones(4, dtype=torch.float, device="tpu")
    assert torch.equal(update(ok, other.to("tpu")).cpu(), update(torch.ones(4), other))  # the safe direction works


@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: torch.fmod(a, b),
        lambda a, b: a % b,
        lambda a, b: a // b,
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        lambda a, b: a.fmod(b[1].item()),
        lambda a, b: a.clone().remainder_(b),
    ],
    ids=["fmod", "remainder", "floor_divide", "div_trunc", "fmod_scalar", "remainder_"],
)
def test_integer_division_by_zero_raises_as_on_cpu(op):
    a, b = torch.tensor([5, -7, 9]), torch.tensor([2, 0, 3])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # reported at the sync in strict/fused modes
        op(a.to("tpu"), b.to("tpu")).cpu()
    nonzero = b + 1  # no zero: the same ops answer as on the CPU, and the process keeps working
    assert torch.equal(op(a.to("tpu"), nonzero.to("tpu")).cpu(), op(a, nonzero))


def test_process_keeps_working_after_errors():
    for _ in range(3):
        with pytest.raises(RuntimeError):
            torch.ones(2, device="tpu") + torch.ones(3, device="tpu")
    assert (torch.ones(2, device="tpu") * 4).sum().item() == 8.0


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": REPO, **env},
    )


def test_fallback_policy_error():
    code = (
        "import torch\n"
        "try:\n"
        "    torch.ops.aten._foobar(torch.ones(4, device='tpu'))\n"
        "except NotImplementedError as e:\n"
        "    print('raised:', 'has no tpu lowering' in str(e))\n"
    )
    proc = _run(code, TORCH_TPU_FALLBACK="error")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "raised: True"


def test_missing_plugin_makes_device_unavailable():
    code = "import torch, torch_tpu; print(torch.tpu.is_available(), torch.tpu.device_count())"
    proc = _run(code, TORCH_TPU_PJRT_PLUGIN="/missing/plugin.so")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "0"]
    assert "Traceback" not in proc.stderr


def _ones(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    return torch.ones(*shape, dtype=dtype, device=device)


_F = torch.nn.functional
_LONG, _F64, _BF16, _F16 = torch.int64, torch.float64, torch.bfloat16, torch.float16
# Calls CPU refuses and the meta kernels accept: each must raise CPU's message on tpu too (every call, not only the
# first lowering: values that change between calls are checked before recording).
_REFUSED = {
    "mm_long": lambda d: torch.mm(_ones(2, 3, device=d), _ones(3, 2, dtype=_LONG, device=d)),
    "mm_bf16": lambda d: torch.mm(_ones(2, 3, device=d), _ones(3, 2, dtype=_BF16, device=d)),
    "addmm_mat2": lambda d: torch.addmm(
        _ones(2, 2, device=d), _ones(2, 3, device=d), _ones(3, 2, dtype=_F64, device=d)
    ),
    "addmm_mat1": lambda d: torch.addmm(
        _ones(2, 2, device=d), _ones(2, 3, dtype=_F64, device=d), _ones(3, 2, device=d)
    ),
    "addmm_bias": lambda d: torch.addmm(
        _ones(2, 2, dtype=_F64, device=d), _ones(2, 3, device=d), _ones(3, 2, device=d)
    ),
    "matmul_vector": lambda d: torch.matmul(_ones(2, 3, device=d), _ones(3, dtype=_LONG, device=d)),
    "matmul_batched": lambda d: torch.matmul(_ones(2, 2, 3, device=d), _ones(3, 2, dtype=_F64, device=d)),
    "mv": lambda d: torch.mv(_ones(2, 3, device=d), _ones(3, dtype=_F64, device=d)),
    "linear": lambda d: _F.linear(_ones(2, 3, device=d), _ones(4, 3, dtype=_F64, device=d)),
    "linear_bias": lambda d: _F.linear(_ones(2, 3, device=d), _ones(4, 3, device=d), _ones(4, dtype=_F64, device=d)),
    "conv2d": lambda d: _F.conv2d(_ones(1, 1, 4, 4, device=d), _ones(1, 1, 2, 2, dtype=_F64, device=d)),
    "conv2d_bias": lambda d: _F.conv2d(
        _ones(1, 1, 4, 4, device=d), _ones(1, 1, 2, 2, device=d), _ones(1, dtype=_F64, device=d)
    ),
    "conv1d_bf16": lambda d: _F.conv1d(_ones(1, 1, 4, device=d), _ones(1, 1, 2, dtype=_BF16, device=d)),
    "full_overflow": lambda d: torch.full((5,), 1e40, device=d),
    "fill_overflow": lambda d: _ones(3, device=d).fill_(1e40),
    "full_int32_overflow": lambda d: torch.full((2,), 2**40, dtype=torch.int32, device=d),
    "new_full_overflow": lambda d: _ones(3, device=d).new_full((2,), 1e40),
    "fill_half_overflow": lambda d: _ones(3, dtype=_F16, device=d).fill_(1e6),
    "index_fill_overflow": lambda d: _ones(3, device=d).index_fill_(0, torch.tensor([0], device=d), 1e40),
}


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_calls_cpu_refuses_are_refused_with_its_message(case: str) -> None:
    with pytest.raises(RuntimeError) as cpu:
        _REFUSED[case]("cpu")
    with pytest.raises(RuntimeError) as tpu:
        _REFUSED[case]("tpu")
    assert str(tpu.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def test_fill_checks_each_value_not_only_the_first() -> None:
    x = _ones(3, device="tpu")
    x.fill_(2.0)  # the structure is lowered once; the next value reaches the device without a new lowering
    with pytest.raises(RuntimeError, match="without overflow"):
        x.fill_(1e40)
    torch.testing.assert_close(x.cpu(), torch.full((3,), 2.0))


def test_one_element_half_fill_is_not_checked_as_on_cpu() -> None:
    for dtype in (_F16, _BF16):
        expected = _ones(1, dtype=dtype).fill_(1e40)
        torch.testing.assert_close(_ones(1, dtype=dtype, device="tpu").fill_(1e40).cpu(), expected)


def test_layer_norm_with_overflowing_variance_is_nan_as_on_cpu() -> None:
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.tensor([[1e30, 3e38], [1.0, 2.0]], dtype=dtype)
        expected = _F.layer_norm(x, (2,))
        torch.testing.assert_close(_F.layer_norm(x.to("tpu"), (2,)).cpu(), expected, equal_nan=True)
