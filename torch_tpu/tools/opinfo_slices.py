"""Named subsets of op_db for `--slice` (full entry names: name or name.variant)."""

from __future__ import annotations

# The CI slice (tests/ops/test_opinfo_floor.py): unary, binary, reductions, nn, indexing, shape ops, linalg.
CI: tuple[str, ...] = ()

SLICES: dict[str, tuple[str, ...]] = {"ci": CI}
