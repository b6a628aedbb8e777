"""tools/accelerator_check: runs its steps in their own processes and writes one report naming the plugin (here the
XLA-CPU one) with each step's result; a failing step is reported and makes the exit status non-zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_report_names_plugin_and_steps(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    proc = subprocess.run(
        [str(REPO / "tools" / "accelerator_check.sh"), "--steps", "info", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = out.read_text()
    assert "- plugin: cpu (" in report and "xla-cpu-pjrt wheel" in report
    assert "| info | python -m torch_tpu.info | pass |" in report
    assert "platform:     cpu" in report  # the step's own output is kept


def test_unknown_step_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tools.accelerator_check", "--steps", "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "unknown steps ['nope']" in proc.stderr
