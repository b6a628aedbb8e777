"""Checks the layering rules the dispatcher could break: nothing under csrc/lowering/ calls the dispatcher, reads a
device value or registers kernels (the rules are pure; preparation that needs the host lives in csrc/backend/), and
nothing under csrc/exec/ re-enters the dispatcher or reaches backend/ (it allocates through the installed allocator).

Exits 1 and prints each offending line. Run by `make lint` and `make test`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOWERING = ROOT / "csrc" / "lowering"
EXEC = ROOT / "csrc" / "exec"

# What a pure rule never does, each with the reason printed for a hit.
FORBIDDEN: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\.item\s*[<(]"), ".item() reads a value through the dispatcher (use cpu_scalar_value)"),
    (re.compile(r"\.(to|cpu|contiguous|nonzero|clone|copy_)\s*\("), "a tensor method call dispatches an op"),
    (
        re.compile(
            r"\bat::(?!native::(update_result_type_state|result_type|ResultTypeState)\b)(?!ScalarType\b)"
            r"(?!Tensor\b)(?!k[A-Z])(?!is[A-Z]|toString\b)[a-z_]\w*\s*\("
        ),
        "an ATen function call dispatches",
    ),
    (re.compile(r"TORCH_LIBRARY|callBoxed|c10::Dispatcher"), "kernel registration or dispatch belongs to backend/"),
    (re.compile(r"#include\s+[<\"]ATen/ATen\.h[>\"]"), "ATen/ATen.h brings the dispatching API (include ATen/core)"),
]


# What exec/ never does (it sits below backend/ and must not come back up through the dispatcher).
EXEC_FORBIDDEN: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\.item\s*[<(]|\.(to|cpu|zero_|copy_|clone)\s*\("), "a tensor method call dispatches an op"),
    (re.compile(r"\bat::(empty|zeros|ones|full|tensor|eye|arange|cat|stack)\w*\s*\("), "an ATen factory dispatches"),
    (
        re.compile(r"c10::GetAllocator|c10::DeviceGuard|TORCH_LIBRARY"),
        "allocation and guards come from the installed allocator",
    ),
    (re.compile(r"#include\s+[<\"](ATen/ATen\.h|backend/)"), "exec/ includes neither the dispatching API nor backend/"),
]


def scan(folder: Path, forbidden: list[tuple[re.Pattern[str], str]]) -> list[str]:
    hits = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".cpp", ".h"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line).split("//", 1)[0]  # code only: no strings, no comments
            for pattern, why in forbidden:
                if pattern.search(code):
                    hits.append(f"{path.relative_to(ROOT)}:{number}: {why}\n    {line.strip()}")
    return hits


def offending_lines() -> list[str]:
    return scan(LOWERING, FORBIDDEN) + scan(EXEC, EXEC_FORBIDDEN)


def main() -> int:
    hits = offending_lines()
    for hit in hits:
        print(hit)
    if hits:
        print(f"{len(hits)} line(s) break the layering rules")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
