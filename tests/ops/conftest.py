"""Each op test draws its inputs from its module's generator `g`; reseeding it per test (from the test's id) makes a
test's inputs the same whichever tests ran before it on the same xdist worker, so a failure reproduces alone."""

from __future__ import annotations

import zlib

import pytest
import torch


@pytest.fixture(autouse=True)
def _reseed_module_generator(request: pytest.FixtureRequest) -> None:
    gen = getattr(request.module, "g", None)
    if isinstance(gen, torch.Generator):
        gen.manual_seed(zlib.crc32(request.node.nodeid.encode()))
