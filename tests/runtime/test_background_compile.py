"""The compile cache's background compiler (what torch.compile's async_compile hands its programs to): a program
submitted is compiled once, a request for it waits for that compilation instead of compiling again, tickets say
when the submitted work is done, and a program that fails to compile fails where it is used, not in the background.
Counted with the runtime's counters on a cache of its own (no disk tier), results checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from torch_tpu import _C


def _negate(n: int) -> str:
    b = _C.HloBuilder()
    x = b.arg("f32", [n])
    return b.build([b.unary("stablehlo.negate", x)])


def test_submitted_program_compiles_once_and_is_waited_for(rt):
    cache = _C.CompileCache(rt.client)
    before = _C.runtime_counters()
    first = cache.compile_in_background(_negate(11))
    second = cache.compile_in_background(_negate(12))
    assert 0 < first < second == cache.last_ticket
    assert cache.compile_in_background(_negate(11)) == 0  # already submitted: not compiled twice
    exe = cache.get_or_compile(_negate(11))  # waits for the background compilation when it is still running
    cache.wait_background(second)
    assert cache.background_done(second) and cache.background_done(0) and cache.background_pending == 0
    after = _C.runtime_counters()
    assert after["compiles"] - before["compiles"] == 2 and after["cache_misses"] - before["cache_misses"] == 2
    assert cache.compile_in_background(_negate(12)) == 0  # cached now
    buf = rt.client.buffer_from_host(np.arange(11, dtype=np.float32), "f32")
    (out,) = rt.client.execute(exe, [buf])
    np.testing.assert_array_equal(np.frombuffer(out.to_bytes(), np.float32), -np.arange(11, dtype=np.float32))
    assert len(cache) == 2


def test_a_failed_background_compilation_fails_where_the_program_is_used(rt):
    cache = _C.CompileCache(rt.client)
    bad = "module { this is not StableHLO }"
    ticket = cache.compile_in_background(bad)
    assert ticket > 0
    cache.wait_background(ticket)
    assert cache.background_done(ticket) and len(cache) == 0
    with pytest.raises(_C.TpuError):
        cache.get_or_compile(bad)
    # nothing was poisoned: the cache still compiles
    cache.get_or_compile(_negate(3))
    assert len(cache) == 1
