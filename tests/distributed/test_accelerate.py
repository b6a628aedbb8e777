"""Hugging Face Accelerate on tpu (torch_tpu/integrations/accelerate.py): `accelerate launch --num_processes 2` of a
`Trainer` script runs two processes on tpu_dist with DDP and trains exactly like one process over the whole batch,
which trains like the CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.distributed.launcher import REPO, free_port

SCRIPT = os.path.join(REPO, "tests", "distributed", "accelerate_trainer.py")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    env.setdefault("TORCH_TPU_FALLBACK", "silent")
    env.update(extra)
    return env


def _start(args: list[str], **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args], cwd=REPO, env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen[str], out: str) -> dict:
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stdout[-3000:] + stderr[-6000:]
    return torch.load(out)


def _assert_same_training(got: dict, want: dict, atol: float) -> None:
    assert got["losses"] == pytest.approx(want["losses"], abs=atol)
    assert got["weights"].keys() == want["weights"].keys()
    for name, value in want["weights"].items():
        torch.testing.assert_close(got["weights"][name], value, rtol=0, atol=atol, msg=name)


def test_accelerate_launch_two_processes_trains_like_one(tmp_path) -> None:
    single, cpu, two = (str(tmp_path / f"{name}.pt") for name in ("single", "cpu", "two"))
    runs = [_start([SCRIPT, single, "8"]), _start([SCRIPT, cpu, "8", "cpu"])]
    alone, on_cpu = (_finish(p, out) for p, out in zip(runs, (single, cpu), strict=True))
    launch = ["-m", "accelerate.commands.launch", "--num_processes", "2", "--main_process_port", str(free_port())]
    both = _finish(_start([*launch, SCRIPT, two, "4"]), two)

    assert alone["device"] == "tpu:0" and alone["num_processes"] == 1 and on_cpu["device"] == "cpu"
    _assert_same_training(alone, on_cpu, atol=1e-5)
    # Accelerate's own choice, no flag: one process per tpu device, tpu_dist, DDP, Trainer in distributed mode.
    assert both["backend"] == "tpu_dist" and both["num_processes"] == 2 and both["ddp"], both
    assert both["device"] == "tpu:0" and both["parallel_mode"] == "ParallelMode.DISTRIBUTED", both
    _assert_same_training(both, alone, atol=1e-5)


@pytest.mark.parametrize("first", ["accelerate", "torch"])
def test_tables_know_tpu_whichever_is_imported_first(first: str) -> None:
    probe = (
        f"import {first}, accelerate.state, torch\n"
        "from accelerate.utils import DistributedType\n"
        "from accelerate.utils.constants import TORCH_DISTRIBUTED_BACKENDS as b\n"
        "print(b.get('tpu'), DistributedType('MULTI_TPU').value)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["tpu_dist", "MULTI_GPU"]


def test_integrations_off_leaves_accelerate_untouched() -> None:
    probe = "import accelerate.state\nfrom accelerate.utils.constants import TORCH_DISTRIBUTED_BACKENDS as b\nprint(b)"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=_env(TORCH_TPU_INTEGRATIONS="0"), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "tpu" not in out.stdout and "nccl" in out.stdout, out.stdout + out.stderr[-3000:]
