"""The ending every benchmark shares: print its markdown report and write it to the results file."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def host() -> str:
    """The CPU's model name and core count (figures from different hosts are not comparable: XLA-CPU's code
    generation follows the instruction set, AVX-512 or not)."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            name = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def write_report(lines: list[str], out: str) -> None:
    text = "\n".join(lines) + "\n"
    print(text)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
