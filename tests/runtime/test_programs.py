"""Programs built with the StableHLO builder, compiled through the cache and run, checked against numpy."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from torch_tpu import _C

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
rng = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def run(rt, text: str, *arrays: np.ndarray, device: int = 0, names=None) -> list[np.ndarray]:
    exe = rt.cache.get_or_compile(text)
    names = names or ["f32"] * len(arrays)
    bufs = [rt.client.buffer_from_host(a, n, device=device) for a, n in zip(arrays, names, strict=True)]
    outs = rt.client.execute(exe, bufs, device=device)
    return [np.frombuffer(o.to_bytes(), _np_dtype(o.dtype)).reshape(o.dims) for o in outs]


def _np_dtype(name: str):
    return {"f32": np.float32, "f64": np.float64, "s32": np.int32, "s64": np.int64, "pred": np.bool_}[name]


def test_elementwise(rt):
    b = _C.HloBuilder()
    x, y = b.arg("f32", [3, 4]), b.arg("f32", [3, 4])
    out = b.binary("stablehlo.subtract", b.unary("stablehlo.exponential", x), b.binary("stablehlo.multiply", x, y))
    a, c = f32(3, 4), f32(3, 4)
    (res,) = run(rt, b.build([out]), a, c)
    np.testing.assert_allclose(res, np.exp(a) - a * c, rtol=1e-6)


def test_dot_general_batched(rt):
    b = _C.HloBuilder()
    x, y = b.arg("f32", [2, 3, 4]), b.arg("f32", [2, 4, 5])
    out = b.dot_general(x, y, [0], [0], [2], [1], "f32", [2, 3, 5])
    a, c = f32(2, 3, 4), f32(2, 4, 5)
    (res,) = run(rt, b.build([out]), a, c)
    np.testing.assert_allclose(res, a @ c, rtol=1e-5, atol=1e-5)


def test_reduce_broadcast_convert(rt):
    b = _C.HloBuilder()
    x = b.arg("f32", [4, 6])
    row_max = b.reduce(x, b.constant(float("-inf"), "f32"), [1], "stablehlo.maximum")
    shifted = b.binary("stablehlo.subtract", x, b.broadcast_in_dim(row_max, [4, 6], [0]))
    as_int = b.convert(b.binary("stablehlo.multiply", shifted, b.constant(10.0, "f32", [4, 6])), "s32")
    a = f32(4, 6)
    res_max, res_int = run(rt, b.build([row_max, as_int]), a)
    np.testing.assert_allclose(res_max, a.max(axis=1))
    np.testing.assert_array_equal(res_int, ((a - a.max(axis=1, keepdims=True)) * 10).astype(np.int32))


def test_compare_select_iota_on_second_device(rt):
    b = _C.HloBuilder()
    x = b.arg("f32", [5])
    idx = b.convert(b.iota("s32", [5], 0), "f32")
    out = b.select(b.compare(_C.CompareDirection.GT, x, idx), x, idx)
    a = np.array([3, 0, 5, 1, 9], dtype=np.float32)
    (res,) = run(rt, b.build([out]), a, device=1)
    np.testing.assert_array_equal(res, np.maximum(a, np.arange(5, dtype=np.float32)))


def test_donated_in_place_update(rt):
    b = _C.HloBuilder()
    x = b.arg("f32", [6], alias_output=0)
    upd = b.arg("f32", [2])
    start = b.constant(3, "s64")
    out = b.dynamic_update_slice(x, upd, [start])
    exe = rt.cache.get_or_compile(b.build([out]))
    base = np.arange(6, dtype=np.float32)
    xb = rt.client.buffer_from_host(base, "f32")
    ub = rt.client.buffer_from_host(np.array([-1, -2], dtype=np.float32), "f32")
    (res,) = rt.client.execute(exe, [xb, ub])
    assert xb.is_deleted(), "the aliased argument is donated"
    np.testing.assert_array_equal(np.frombuffer(res.to_bytes(), np.float32), [0, 1, 2, -1, -2, 5])

    kept = rt.client.buffer_from_host(base, "f32")
    rt.client.execute(exe, [kept, ub], non_donatable=[0])
    assert not kept.is_deleted(), "non_donatable_input_indices keeps the argument"


def test_cache_hit_on_same_text(rt):
    b = _C.HloBuilder()
    x = b.arg("f32", [7])
    text = b.build([b.unary("stablehlo.negate", x)])
    before = _C.runtime_counters()
    e1 = rt.cache.get_or_compile(text)
    e2 = rt.cache.get_or_compile(text)
    after = _C.runtime_counters()
    assert e1 is e2
    assert after["cache_misses"] - before["cache_misses"] == 1
    assert after["cache_hits"] - before["cache_hits"] == 1


def test_cache_keeps_the_most_recently_used_programs(rt):
    """Each loaded executable maps code pages and a process has a bounded number of mappings, so the in-memory cache
    drops its least recently used programs beyond its capacity (a long run with many shapes would otherwise make
    XLA's JIT fail with 'Cannot allocate memory')."""
    cache = _C.CompileCache(rt.client)
    assert cache.capacity == 1024
    cache.capacity = 3

    def text(n: int) -> str:
        b = _C.HloBuilder()
        x = b.arg("f32", [n])
        return b.build([b.binary("stablehlo.add", x, x)])

    before = _C.runtime_counters()
    live0 = before["live_executables"]
    for n in range(1, 9):
        exe = cache.get_or_compile(text(n))
        buf = rt.client.buffer_from_host(np.ones(n, np.float32), "f32")
        (out,) = rt.client.execute(exe, [buf])
        np.testing.assert_array_equal(np.frombuffer(out.to_bytes(), np.float32), np.full(n, 2, np.float32))
        del exe, buf, out
    assert len(cache) == 3
    after = _C.runtime_counters()
    assert after["cache_evictions"] - before["cache_evictions"] == 5
    assert after["live_executables"] - live0 == 3
    cache.get_or_compile(text(8))  # most recent: still there
    cache.get_or_compile(text(6))
    assert _C.runtime_counters()["cache_hits"] - after["cache_hits"] == 2
    cache.get_or_compile(text(1))  # dropped long ago: compiled again, and 7 (least recently used) goes
    assert _C.runtime_counters()["cache_misses"] - after["cache_misses"] == 1
    assert _C.runtime_counters()["cache_evictions"] - after["cache_evictions"] == 1


def test_malformed_program(rt):
    with pytest.raises(_C.TpuError) as info:
        rt.cache.get_or_compile("module { func.func @main( garbage")
    assert info.value.call == "PJRT_Client_Compile"
    assert "Failed to parse" in info.value.pjrt_message


def test_wrong_argument_count_and_shape(rt):
    b = _C.HloBuilder()
    x, y = b.arg("f32", [4]), b.arg("f32", [4])
    exe = rt.cache.get_or_compile(b.build([b.binary("stablehlo.add", x, y)]))
    one = rt.client.buffer_from_host(np.zeros(4, np.float32), "f32")
    with pytest.raises(_C.TpuError, match="PJRT_LoadedExecutable_Execute"):
        rt.client.execute(exe, [one])
    wrong = rt.client.buffer_from_host(np.zeros(5, np.float32), "f32")
    with pytest.raises(_C.TpuError, match="PJRT_LoadedExecutable_Execute"):
        rt.client.execute(exe, [one, wrong])


def test_serialize_round_trip(rt):
    b = _C.HloBuilder()
    x = b.arg("f32", [3])
    # A cache without a directory compiles afresh: XLA-CPU cannot re-serialize a deserialized executable.
    exe = _C.CompileCache(rt.client).get_or_compile(b.build([b.binary("stablehlo.add", x, x)]))
    again = rt.client.deserialize(exe.serialize())
    buf = rt.client.buffer_from_host(np.array([1, 2, 3], np.float32), "f32")
    (res,) = rt.client.execute(again, [buf])
    np.testing.assert_array_equal(np.frombuffer(res.to_bytes(), np.float32), [2, 4, 6])


def test_no_leaks_after_program_loop(rt):
    b = _C.HloBuilder()
    x = b.arg("f32", [16])
    exe = rt.cache.get_or_compile(b.build([b.unary("stablehlo.sqrt", x)]))
    before = _C.runtime_counters()["live_buffers"]
    for _ in range(100):
        buf = rt.client.buffer_from_host(np.ones(16, np.float32), "f32")
        (out,) = rt.client.execute(exe, [buf])
        del buf, out
    assert _C.runtime_counters()["live_buffers"] == before


def test_disk_cache_second_process_compiles_nothing(tmp_path):
    code = (
        "from torch_tpu import _C, runtime\n"
        "rt = runtime.get()\n"
        "b = _C.HloBuilder(); x = b.arg('f32', [9])\n"
        "exe = rt.cache.get_or_compile(b.build([b.unary('stablehlo.cosine', x)]))\n"
        "import numpy as np; buf = rt.client.buffer_from_host(np.zeros(9, np.float32), 'f32')\n"
        "(out,) = rt.client.execute(exe, [buf]); assert np.frombuffer(out.to_bytes(), np.float32).sum() == 9\n"
        "c = _C.runtime_counters(); print(c['compiles'], c['disk_cache_hits'])\n"
    )
    env = {**os.environ, "PYTHONPATH": REPO, "TORCH_TPU_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.split() == ["1", "0"]
    assert second.stdout.split() == ["0", "1"]
    # XLA_FLAGS change the generated code: a process with other flags compiles its own program and keeps it apart.
    flagged = {**env, "XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    third = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=flagged, timeout=120)
    fourth = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=flagged, timeout=120)
    assert third.returncode == 0 and fourth.returncode == 0, third.stderr + fourth.stderr
    assert third.stdout.split() == ["1", "0"]
    assert fourth.stdout.split() == ["0", "1"]
