"""TORCH_TRACE: the programs torch_tpu compiles land in PyTorch's structured trace as `torchtpu_eager_stablehlo`
artifacts, and fused eager graphs' ATen ops as `torchtpu_eager_aten_graph`, which tlparse (a pinned test dependency)
reads, next to torch.compile's own artifacts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent(
    """
    import torch, torch_tpu
    x = torch.arange(9.0, device="tpu")
    assert abs((x.sin() * 5).sum().item() - (torch.arange(9.0).sin() * 5).sum().item()) < 1e-4
    f = torch.compile(lambda a: a.tanh() + 1, backend="tpu")
    f(x); f(x)
    """
)


def _tlparse() -> str:
    path = Path(sys.executable).with_name("tlparse")
    assert path.exists(), "tlparse is a test dependency (requirements.txt): pip install tlparse"
    return str(path)


def test_eager_programs_reach_tlparse(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    env = dict(os.environ, TORCH_TRACE=str(trace))
    env.pop("TORCH_TPU_DUMP_DIR", None)
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, timeout=180)
    logs = list(trace.glob("*.log"))
    assert len(logs) == 1
    out = tmp_path / "parsed"
    done = subprocess.run(
        [_tlparse(), str(logs[0]), "-o", str(out), "--no-browser"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    programs = [p.read_text() for p in out.rglob("torchtpu_eager_stablehlo_*.txt")]
    assert any("stablehlo.sine" in p for p in programs), programs[:2]  # the eager graph
    assert any("stablehlo.tanh" in p for p in programs)  # the compiled graph's program
    assert all("func.func @main" in p for p in programs)
    assert list(out.rglob("dynamo_output_graph_*.txt"))  # torch.compile's own artifacts sit beside them
    # and the ATen ops each fused eager graph was lowered from
    graphs = [p.read_text() for p in out.rglob("torchtpu_eager_aten_graph_*.txt")]
    assert any("aten::sin" in g and "aten::mul" in g for g in graphs), graphs[:2]
