"""Fork safety (CUDA semantics): a child forked after the tpu runtime started is poisoned — its first tpu use raises
"Cannot re-initialize tpu in forked subprocess", it exits cleanly, CPU-only DataLoader workers keep working, and
`spawn` children use the device normally. Every case runs in a subprocess with a hard timeout, so a hang fails fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BAD_FORK = "Cannot re-initialize tpu in forked subprocess"


def _run(code: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": REPO},
            cwd=REPO,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung (killed after {timeout}s); output so far: {exc.stdout!r} {exc.stderr!r}")


PARENT = """
import os, sys, torch
x = torch.ones(3, device="tpu")
assert x.sum().item() == 3.0
"""


def _fork_child(body: str) -> str:
    return (
        PARENT
        + "pid = os.fork()\nif pid == 0:\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
        + "\n_, status = os.waitpid(pid, 0)\n"
        + "print('CHILD_EXIT', os.waitstatus_to_exitcode(status))\n"
        + "print('PARENT_OK', (x * 2).sum().item())\n"
    )


def test_forked_child_that_only_exits_does_not_hang():
    r = _run(_fork_child("sys.exit(3)"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "CHILD_EXIT 3" in r.stdout and "PARENT_OK 6.0" in r.stdout


def test_forked_child_tpu_use_raises_cuda_wording():
    body = """
    import torch_tpu
    results = []
    assert torch.tpu._is_in_bad_fork() and not torch.tpu.is_initialized()
    assert torch.tpu.device_count() >= 1  # answered without the runtime, as torch.cuda.device_count() is
    for name, fn in [
        ("factory", lambda: torch.ones(2, device="tpu")),
        ("op_on_parent_tensor", lambda: x + 1),
        ("read_parent_tensor", lambda: x.cpu()),
        ("to_tpu", lambda: torch.zeros(2).to("tpu")),
        ("init", torch.tpu.init),
        ("synchronize", torch.tpu.synchronize),
    ]:
        try:
            fn()
            results.append(name + ":no-error")
        except RuntimeError as exc:
            ok = "Cannot re-initialize tpu in forked subprocess" in str(exc)
            results.append(name + (":ok" if ok else ":" + str(exc)))
    print("RESULTS", " ".join(results), flush=True)
    sys.exit(0)
    """
    r = _run(_fork_child(body), timeout=60)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS"))
    assert all(item.endswith(":ok") for item in line.split()[1:]), line
    assert "CHILD_EXIT 0" in r.stdout and "PARENT_OK 6.0" in r.stdout


def test_parent_is_not_poisoned():
    r = _run(PARENT + "import torch_tpu\nprint('BAD', torch.tpu._is_in_bad_fork(), torch.tpu.is_initialized())\n")
    assert "BAD False True" in r.stdout, r.stderr


def test_multiprocessing_fork_worker_using_tpu_raises():
    code = (
        PARENT
        + """
import multiprocessing as mp
def work(q):
    try:
        torch.ones(2, device="tpu").sum().item()
        q.put("no error")
    except RuntimeError as exc:
        q.put(str(exc))
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=work, args=(q,))
p.start()
print("MSG", q.get(timeout=60))
p.join(60)
print("EXIT", p.exitcode)
"""
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert BAD_FORK in r.stdout and "EXIT 0" in r.stdout, r.stdout


def test_dataloader_fork_workers_without_tpu_work_and_with_tpu_raise():
    code = (
        PARENT
        + """
from torch.utils.data import DataLoader, Dataset
class Cpu(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return torch.full((2,), float(i)) + torch.randn(2) * 0
class Tpu(Cpu):
    def __getitem__(self, i): return torch.ones(2, device="tpu").cpu()
total = 0.0
for batch in DataLoader(Cpu(), batch_size=4, num_workers=2, multiprocessing_context="fork"):
    total += batch.to("tpu").sum().item()
print("CPU_WORKERS", total)
try:
    list(DataLoader(Tpu(), batch_size=4, num_workers=1, multiprocessing_context="fork"))
    print("TPU_WORKER no error")
except RuntimeError as exc:
    print("TPU_WORKER", "Cannot re-initialize tpu in forked subprocess" in str(exc))
"""
    )
    r = _run(code, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "CPU_WORKERS 56.0" in r.stdout, r.stdout + r.stderr
    assert "TPU_WORKER True" in r.stdout, r.stdout + r.stderr


def test_spawn_worker_uses_tpu():
    code = """
import multiprocessing as mp
import torch

def work(q):
    q.put((torch.arange(4.0, device="tpu") * 2).sum().item())

if __name__ == "__main__":
    torch.ones(1, device="tpu").item()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=work, args=(q,))
    p.start()
    print("SPAWN", q.get(timeout=120))
    p.join(60)
    print("EXIT", p.exitcode)
"""
    path = os.path.join(REPO, "build", "_spawn_check.py")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(code))
    try:
        r = subprocess.run(
            [sys.executable, path],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PYTHONPATH": REPO},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"spawn hung: {exc.stdout!r} {exc.stderr!r}")
    assert "SPAWN 12.0" in r.stdout and "EXIT 0" in r.stdout, r.stdout + r.stderr
