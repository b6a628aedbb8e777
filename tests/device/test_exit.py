"""The exit hook that lets the autograd engine's tpu threads drop their last graph task before finalization
(torch_tpu/_exit.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import torch

from torch_tpu import _exit

_SPY = textwrap.dedent(
    """
    import torch, torch_tpu
    from torch_tpu import _exit

    original = _exit._drain_device_threads

    def spy():
        original()
        print("drained", flush=True)

    _exit._drain_device_threads = spy
    """
)
_SCRIPT = _SPY + textwrap.dedent(
    """
    x = torch.randn(8, device="tpu", requires_grad=True)
    (x * x).sum().backward()
    print("grad ok", torch.allclose(x.grad.cpu(), 2 * x.detach().cpu()), flush=True)
    """
)


def test_drain_runs_a_backward_through_every_device_thread() -> None:
    x = torch.randn(5, device="tpu", requires_grad=True)
    (x * 3).sum().backward()
    _exit._drain_device_threads()  # raises if the engine's entry point or its arguments changed
    torch.testing.assert_close(x.grad.cpu(), torch.full((5,), 3.0))


def test_hook_runs_at_interpreter_exit() -> None:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["grad", "ok", "True", "drained"], proc.stdout + proc.stderr[-3000:]


def test_hook_skips_a_process_that_never_used_the_device() -> None:
    script = _SPY + "print('cpu only', torch.ones(2, requires_grad=True).sum().item())\n"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["cpu", "only", "2.0"], proc.stdout + proc.stderr[-3000:]
