"""The ending every benchmark shares: print its markdown report and write it to the results file."""

from __future__ import annotations

from pathlib import Path


def write_report(lines: list[str], out: str) -> None:
    text = "\n".join(lines) + "\n"
    print(text)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
