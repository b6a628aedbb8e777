"""Shared fixtures (the process's runtime: PJRT client on the default plugin) and the mode-sensitive marker.

`make test` runs the whole suite once in the default eager mode (fused), then only the tests marked
`mode_sensitive` again under debug and strict. Marked: the files below, whose subject is how ops become programs
(storage semantics, copies, errors raised at the op or at a sync, memory accounting, training steps). Not marked:
tests that pick or parametrize their modes themselves (tests/modes, test_write_rule, test_threads, test_overlaps,
test_error_state), tests of one op's numerics against CPU (the same lowering rule serves every mode; a
representative slice, test_basic_ops and test_strided_views, is marked), subprocess contract tests, compile/ and
distributed/ (which pick their own modes), and the integration model families.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_tpu import runtime


@pytest.fixture(scope="session")
def rt():
    return runtime.get()


@pytest.fixture(scope="session")
def client(rt):
    return rt.client


MODE_SENSITIVE = {
    "device/test_autocast.py",
    "device/test_copies.py",
    "device/test_device.py",
    "device/test_errors.py",
    "device/test_fallback.py",
    "device/test_memory.py",
    "device/test_rng.py",
    "device/test_streams.py",
    "device/test_wrong_answers.py",
    "device/test_contract_copies.py",
    "device/test_contract_sdpa.py",
    "device/test_contract_quantized.py",
    "ops/test_basic_ops.py",
    "ops/test_strided_views.py",
    "ops/test_common_dtype.py",
    "ops/test_optimizers.py",
    "integration/test_training.py",
}
_TESTS = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "mode_sensitive: run again under the debug and strict eager modes")
    missing = sorted(p for p in MODE_SENSITIVE if not (_TESTS / p).is_file())
    if missing:  # a renamed file would silently lose its debug/strict runs
        raise pytest.UsageError(f"MODE_SENSITIVE names files that do not exist: {missing}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().relative_to(_TESTS).as_posix() in MODE_SENSITIVE:
            item.add_marker(pytest.mark.mode_sensitive)
