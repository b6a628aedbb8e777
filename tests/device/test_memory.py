"""Allocator statistics (CUDA-style), out-of-memory errors, no leaked device buffers."""

from __future__ import annotations

import gc

import pytest
import torch

import torch_tpu


def test_memory_allocated_tracks_storages():
    gc.collect()
    before = torch.tpu.memory_allocated()
    x = torch.empty(1024, device="tpu")
    assert torch.tpu.memory_allocated() == before + 4096
    assert torch.tpu.max_memory_allocated() >= before + 4096
    del x
    gc.collect()
    assert torch.tpu.memory_allocated() == before


def test_peak_reset_and_stats_keys():
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    y = torch.ones(256, 256, device="tpu")
    del y
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.peak"] >= base + 256 * 256 * 4
    assert stats["active_bytes.all.peak"] >= base + 256 * 256 * 4
    assert stats["allocated_bytes.all.current"] == base
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated()
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated()


def test_mem_get_info():
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total == torch.tpu.get_device_properties(0).total_memory


def test_per_device_accounting():
    before = torch.tpu.memory_allocated(1)
    z = torch.empty(100, device="tpu:1")
    assert torch.tpu.memory_allocated(1) == before + 400
    del z


def test_out_of_memory_is_torch_oom_and_recoverable():
    total = torch.tpu.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError, match="TPU out of memory"):
        torch.empty(total // 4 + 1024, dtype=torch.float32, device="tpu")
    assert (torch.ones(3, device="tpu") * 2).sum().item() == 6.0


def test_data_ptrs_are_unique_and_offset_by_views():
    a = torch.empty(16, device="tpu")
    b = torch.empty(16, device="tpu")
    assert a.data_ptr() != b.data_ptr()
    assert a[4:].data_ptr() == a.data_ptr() + 16


def test_accelerator_host_cache_calls():
    # vLLM's workers call these between steps; the host allocator used to be missing and empty_host_cache crashed.
    pinned = torch.arange(6.0).pin_memory()
    assert pinned.is_pinned()
    torch.accelerator.empty_host_cache()
    torch.accelerator.empty_cache()
    torch.accelerator.synchronize()
    assert torch.equal(pinned.to("tpu", non_blocking=True).cpu(), torch.arange(6.0))


def _device_buffers() -> int:
    """Live buffers, less the device copies of numbers kept for reuse (a bounded cache, not a leak)."""
    m = torch_tpu.metrics()
    return m["live_buffers"] - m["cached_scalars"]


def test_no_leaked_buffers_after_work():
    gc.collect()
    live = _device_buffers()
    for _ in range(20):
        x = torch.randn(32, 32, device="tpu")
        y = (x @ x).relu().sum()
        y.item()
    del x, y
    gc.collect()
    assert _device_buffers() == live
