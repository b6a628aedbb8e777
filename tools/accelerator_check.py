"""One script that proves a machine: on whatever PJRT plugin torch_tpu picks, run the test subsets that exercise the
device, the ops, the eager modes and torch.compile, the OpInfo CI slice, and the eager-modes benchmark, and write one
report naming the machine, plugin and versions with each step's result and time.

    tools/accelerator_check.sh          # all steps; report: benchmarks/results/accelerator_check_<kind>.md
    python -m tools.accelerator_check --steps info,device --out /tmp/report.md

Each step runs in its own process with a time limit (the whole check is sized for 10 minutes on one GPU); a failing
or timed-out step is reported, and the rest still run. The benchmark's baseline is stock PyTorch eager on the same
device family where torch has one (CUDA eager on an NVIDIA host with a CUDA build of torch), else on the CPU.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Step:
    name: str
    what: str
    argv: list[str]
    limit_s: int


def _pytest(*paths: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-x", "--no-header", "-p", "no:cacheprovider", *paths]


def _baseline() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


STEPS = (
    Step("info", "python -m torch_tpu.info", [sys.executable, "-m", "torch_tpu.info"], 120),
    Step("device", "tests/device", _pytest("tests/device"), 150),
    Step(
        "ops",
        "tests/ops/test_basic_ops.py, test_strided_views.py",
        _pytest("tests/ops/test_basic_ops.py", "tests/ops/test_strided_views.py"),
        90,
    ),  # fmt: skip
    Step("modes", "tests/modes", _pytest("tests/modes"), 90),
    Step("compile", "tests/compile", _pytest("tests/compile"), 90),
    Step("opinfo", "OpInfo CI slice (tests/ops/test_opinfo_floor.py)", _pytest("tests/ops/test_opinfo_floor.py"), 120),
    Step(
        "benchmark",
        "benchmarks/eager_modes.py --quick",
        [sys.executable, "benchmarks/eager_modes.py", "--quick", "--out", "{tmp}/eager_modes.md"],
        150,
    ),  # fmt: skip
)


def _machine() -> list[str]:
    import torch

    import torch_tpu

    lines = [
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; host {platform.node()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        f"- Python {platform.python_version()}, torch {torch.__version__}, torch_tpu {torch_tpu.__version__}",
    ]
    if shutil.which("nvidia-smi"):
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        lines.append(f"- nvidia-smi: {gpu.stdout.strip() or gpu.stderr.strip()}")
    if torch_tpu.is_available():
        rt = torch_tpu.runtime.get()
        lines.append(f"- plugin: {rt.plugin_kind} ({rt.client.plugin_path}), PJRT {rt.client.api_version}; "
                     f"{rt.chosen_because}")  # fmt: skip
        lines += [f"- passed over: {path}: {why}" for path, why in rt.rejected]
        lines.append(f"- devices: {len(rt.devices)} x {torch.tpu.get_device_name()}")
    else:
        lines.append(f"- plugin: unavailable: {torch_tpu.runtime.status()}")
    return lines


def run_step(step: Step, tmp: Path) -> tuple[str, float, str]:
    """(result, seconds, last lines of output) for one step."""
    argv = [a.replace("{tmp}", str(tmp)) for a in step.argv]
    if step.name == "benchmark":
        argv += ["--baseline", _baseline()]
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=step.limit_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return "timeout", time.monotonic() - start, out[-1500:]
    out = (proc.stdout + proc.stderr).strip()
    return ("pass" if proc.returncode == 0 else "fail"), time.monotonic() - start, out[-1500:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default=",".join(s.name for s in STEPS), help="comma-separated step names")
    parser.add_argument("--out", help="report path (default benchmarks/results/accelerator_check_<plugin>.md)")
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(wanted) - {s.name for s in STEPS})
    if unknown:
        parser.error(f"unknown steps {unknown}; known: {[s.name for s in STEPS]}")
    import torch_tpu

    kind = torch_tpu.runtime.get().plugin_kind if torch_tpu.is_available() else "none"
    out = Path(args.out) if args.out else REPO / "benchmarks" / "results" / f"accelerator_check_{kind}.md"
    tmp = out.parent / f".{out.stem}_work"
    tmp.mkdir(parents=True, exist_ok=True)
    lines = ["# Accelerator check", "", *_machine(), "", "| step | what | result | s |", "|---|---|---|---:|"]
    details, failed = [], 0
    for step in (s for s in STEPS if s.name in wanted):
        result, seconds, tail = run_step(step, tmp)
        failed += result != "pass"
        print(f"{step.name:10s} {result:8s} {seconds:6.1f} s", flush=True)
        lines.append(f"| {step.name} | {step.what} | {result} | {seconds:.0f} |")
        details += [f"### {step.name}: {result}", "", "```text", tail, "```", ""]
    bench = tmp / "eager_modes.md"
    if bench.is_file():
        details += ["## Benchmark report", "", bench.read_text()]
    out.write_text("\n".join(lines + ["", "## Step output (last lines)", "", *details]) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"report: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
