"""Which op_db entries and dtypes a conformance run covers, and which it skips (with the reason).

Shared by the parent (to plan the tasks) and the workers (to look an entry up by its full name).
"""

from __future__ import annotations

import unittest
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
DIRECTIONS = ("forward", "backward")

# Entries whose output is uninitialized memory or a draw PyTorch does not promise to reproduce across devices,
# in addition to the ones op_db itself skips in TestCommon.test_compare_cpu.
NONDETERMINISTIC = {
    "empty": "output is uninitialized memory",
    "empty_like": "output is uninitialized memory",
    "empty_strided": "output is uninitialized memory",
    "new_empty": "output is uninitialized memory",
    "new_empty_strided": "output is uninitialized memory",
    "resize_": "grown part is uninitialized memory",
    "resize_as_": "grown part is uninitialized memory",
}


def _op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def all_entries() -> dict[str, Any]:
    """op_db by full name (name.variant), in op_db order."""
    return {full_name(op): op for op in _op_db()}


def entry_dtypes(op: Any, wanted: list[str]) -> list[str]:
    supported = op.supported_dtypes("cpu")
    return [d for d in wanted if DTYPES[d] in supported]


def backward_supported(op: Any, dtype: str) -> bool:
    return bool(op.supports_autograd) and DTYPES[dtype] in op.supported_backward_dtypes("cpu")


def _skip_text(decorator: Any) -> str | None:
    """The reason of a unittest.skip(reason) decorator, None for anything else."""
    cells = getattr(decorator, "__closure__", None) or ()
    if getattr(decorator, "__qualname__", "").startswith("skip.") and cells:
        value = cells[0].cell_contents
        return str(value) if isinstance(value, str) else "skipped"
    return None


def upstream_marks(op: Any, dtype: str) -> tuple[str | None, bool]:
    """(skip reason, expected failure) from op_db's decorators for TestCommon.test_compare_cpu on a non-CPU device."""
    reason: str | None = None
    xfail = False
    for info in getattr(op, "decorators", ()):
        if not hasattr(info, "is_active"):
            continue
        if not info.is_active("TestCommon", "test_compare_cpu", "tpu", DTYPES[dtype], {}):
            continue
        for dec in info.decorators:
            if dec is unittest.expectedFailure:
                xfail = True
            text = _skip_text(dec)
            if text is not None and reason is None:
                reason = text
    return reason, xfail


# op_db skips of test_compare_cpu honoured here: the ones about outputs no device can reproduce. Its other skips
# ("Skipped!", mostly CUDA tolerance notes) are run anyway and only noted in the report.
_HONOURED = ("non-deterministic", "undefined", "overflow", "uninitialized", "triton")


def skip_reason(op: Any, dtype: str) -> str | None:
    name = full_name(op)
    if name in NONDETERMINISTIC:
        return NONDETERMINISTIC[name]
    reason, _ = upstream_marks(op, dtype)
    if reason and any(word in reason.lower() for word in _HONOURED):
        return f"op_db: {reason}"
    return None


def upstream_note(op: Any, dtype: str) -> str | None:
    """What op_db says about test_compare_cpu for an entry this runner does run (None when nothing)."""
    reason, xfail = upstream_marks(op, dtype)
    if reason:
        return f"op_db skips test_compare_cpu ({reason})"
    return "op_db expects test_compare_cpu to fail" if xfail else None
