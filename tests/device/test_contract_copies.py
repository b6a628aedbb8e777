"""Non-blocking copies (CUDA semantics): pinned host -> tpu and tpu -> host return before the transfer completes;
sync points (torch.tpu.synchronize(), events, stream.synchronize) order later host reads; pageable memory and views
still copy correctly."""

from __future__ import annotations

import gc
import time

import torch


def test_upload_from_pinned_memory_is_correct_and_keeps_its_source_alive():
    src = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    want = src.clone()
    dst = src.to("tpu", non_blocking=True)
    del src  # the plugin may still be reading it: the copy holds its own reference
    gc.collect()
    assert torch.equal((dst + 1).cpu(), want + 1)
    assert torch.equal(dst.cpu(), want)


def test_download_into_pinned_memory_is_ordered_by_sync_points():
    x = torch.randn(512, 256)
    y = (x.to("tpu") * 3).relu()
    out = y.to("cpu", non_blocking=True)
    assert out.is_pinned()  # as for CUDA: a non-blocking copy to the CPU lands in pinned memory
    torch.tpu.synchronize()
    assert torch.equal(out, (x * 3).relu())

    out2 = torch.empty(512, 256).pin_memory()
    out2.copy_(y, non_blocking=True)
    event = torch.Event(device="tpu")
    event.record()
    event.synchronize()
    assert torch.equal(out2, (x * 3).relu())

    out3 = torch.empty(512, 128).pin_memory()
    out3.copy_(y[:, ::2], non_blocking=True)  # a view: materialised on the device, then downloaded asynchronously
    torch.tpu.current_stream().synchronize()
    assert torch.equal(out3, (x * 3).relu()[:, ::2])
    assert torch.tpu.current_stream().query()


def test_non_blocking_with_pageable_memory_or_conversions_stays_correct():
    x = torch.randn(33, 7)
    assert torch.equal(x.to("tpu", non_blocking=True).cpu(), x)
    assert torch.equal(x.pin_memory().to("tpu", dtype=torch.float64, non_blocking=True).cpu(), x.double())
    t = x.to("tpu")
    host = torch.empty(33, 7)  # pageable destination: synchronous copy
    host.copy_(t, non_blocking=True)
    assert torch.equal(host, x)
    half = torch.empty(33, 7, dtype=torch.float16).pin_memory()
    half.copy_(t, non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(half, x.half())


def test_non_blocking_calls_return_before_the_transfer_completes():
    src = torch.randn(2048, 4096).pin_memory()  # 32 MiB
    src.to("tpu")  # warm up

    def timed(fn) -> float:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
            torch.tpu.synchronize()
        return best

    blocking = timed(lambda: src.to("tpu"))
    non_blocking = timed(lambda: src.to("tpu", non_blocking=True))
    assert non_blocking < blocking / 2, (non_blocking, blocking)
    dev = src.to("tpu")
    out = torch.empty_like(src).pin_memory()
    blocking = timed(lambda: out.copy_(dev))
    non_blocking = timed(lambda: out.copy_(dev, non_blocking=True))
    assert non_blocking < blocking / 2, (non_blocking, blocking)
    assert torch.equal(out, src)
