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
    with pytest.raises(TypeError, match="tpu does not support dtype"):
        torch.empty(2, dtype=torch.float8_e4m3fn, device="tpu")


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
