"""torch's precompile on the "tpu" backend: ``aot_compile`` → ``save_compiled_function`` →
``torch.compiler.load_compiled_function`` (what vLLM's compile cache and TorchTPU's ``serializable`` option rely on).
The loaded function is compared with the same function run eagerly on the CPU, forward and backward; a fresh process
loads what this one saved."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch._dynamo

from torch_tpu._internal.compile import TpuBackend
from torch_tpu.compile import counters


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch.manual_seed(0)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sin().sum(0)


def _save_and_load(fn, args: tuple, path: Path, backend) -> object:  # noqa: ANN001
    compiled = torch.compile(fn, backend=backend, fullgraph=True).aot_compile((args, {}))
    compiled.save_compiled_function(str(path))
    torch._dynamo.reset()
    with path.open("rb") as file:
        return torch.compiler.load_compiled_function(file)


@pytest.mark.parametrize("backend", ["tpu", "object", "default"])
def test_saved_function_loads_and_matches_cpu(tmp_path: Path, backend: str) -> None:
    # "default": torch.compile without a backend, which hands tpu graphs to ours
    chosen = {"tpu": "tpu", "object": TpuBackend(), "default": "inductor"}[backend]
    x, w = torch.randn(5, 4), torch.randn(4, 3)
    start = counters.snapshot()["compiled_graphs"]
    loaded = _save_and_load(f, (x.to("tpu"), w.to("tpu")), tmp_path / "f.bin", chosen)
    before = counters.snapshot()["compiled_graphs"]
    assert before - start == 2  # by the tpu backend: once to save, once at load
    torch.testing.assert_close(loaded(x.to("tpu"), w.to("tpu")).cpu(), f(x, w))
    x2 = torch.randn(5, 4)
    torch.testing.assert_close(loaded(x2.to("tpu"), w.to("tpu")).cpu(), f(x2, w))
    assert counters.snapshot()["compiled_graphs"] == before  # compiled once, at load


def mlp_loss(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return (torch.tanh(x @ w1.T + b1) @ w2.T).square().mean()


def test_loaded_training_step_matches_cpu(tmp_path: Path) -> None:
    cpu = [torch.randn(6, 4), torch.randn(8, 4), torch.randn(8), torch.randn(1, 8)]
    for t in cpu[1:]:
        t.requires_grad_(True)
    tpu = [t.detach().to("tpu").requires_grad_(t.requires_grad) for t in cpu]
    loaded = _save_and_load(mlp_loss, tuple(tpu), tmp_path / "loss.bin", "tpu")
    loss = loaded(*tpu)
    loss.backward()
    expected = mlp_loss(*cpu)
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected.detach())
    for t, c in zip(tpu[1:], cpu[1:], strict=True):
        # float32 sums in another order: tanh'(.) times a 4-term dot product rounds differently by a few ulps
        torch.testing.assert_close(t.grad.cpu(), c.grad, rtol=1e-4, atol=1e-5)


def test_a_fresh_process_loads_it(tmp_path: Path) -> None:
    x, w = torch.randn(5, 4), torch.randn(4, 3)
    _save_and_load(f, (x.to("tpu"), w.to("tpu")), tmp_path / "f.bin", "tpu")
    torch.save({"x": x, "w": w, "out": f(x, w)}, tmp_path / "data.pt")
    script = textwrap.dedent(
        f"""
        import torch
        data = torch.load({str(tmp_path / "data.pt")!r})
        with open({str(tmp_path / "f.bin")!r}, "rb") as file:
            loaded = torch.compiler.load_compiled_function(file)
        out = loaded(data["x"].to("tpu"), data["w"].to("tpu"))
        torch.testing.assert_close(out.cpu(), data["out"])
        print("loaded ok")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "loaded ok" in run.stdout, run.stderr[-3000:]


def test_dynamic_graphs_refuse_to_serialize(tmp_path: Path) -> None:
    x, w = torch.randn(5, 4).to("tpu"), torch.randn(4, 3).to("tpu")
    torch._dynamo.mark_dynamic(x, 0)
    compiled = torch.compile(f, backend="tpu", fullgraph=True, dynamic=True).aot_compile(((x, w), {}))
    with pytest.raises(Exception, match="only static graphs serialize"):
        compiled.save_compiled_function(str(tmp_path / "f.bin"))
