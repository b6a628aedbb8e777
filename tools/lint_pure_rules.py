"""Checks that the lowering rules are pure (docs/design.md, "Rules are pure"): nothing under csrc/lowering/ calls
the dispatcher, reads a device value or registers kernels. Preparation that needs the host lives in csrc/backend/.

Exits 1 and prints each offending line. Run by `make lint` and `make test`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOWERING = ROOT / "csrc" / "lowering"

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


def offending_lines() -> list[str]:
    hits = []
    for path in sorted(LOWERING.rglob("*")):
        if path.suffix not in (".cpp", ".h"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            for pattern, why in FORBIDDEN:
                if pattern.search(code):
                    hits.append(f"{path.relative_to(ROOT)}:{number}: {why}\n    {line.strip()}")
    return hits


def main() -> int:
    hits = offending_lines()
    for hit in hits:
        print(hit)
    if hits:
        print(f"{len(hits)} impure line(s) under csrc/lowering/")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
