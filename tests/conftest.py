"""Shared fixtures: the process's runtime (PJRT client on the default plugin)."""

from __future__ import annotations

import pytest

from torch_tpu import runtime


@pytest.fixture(scope="session")
def rt():
    return runtime.get()


@pytest.fixture(scope="session")
def client(rt):
    return rt.client
