"""Accelerator-contract details checked against CPU/CUDA semantics: set_ without strides, device-index wording,
memory accounting (OOM at the allocation that does not fit, num_ooms), device properties and capabilities."""

from __future__ import annotations

import gc

import pytest
import torch

# ----------------------------------------------------------------------------------------------------------------
# set_ (issue item 6)


@pytest.mark.parametrize(
    ("offset", "size", "stride"),
    [(0, (2, 3), None), (2, (2, 2), None), (1, (2, 2), (1, 2)), (0, (), None), (0, (3, 0), None)],
)
def test_set_storage_matches_cpu(offset, size, stride):
    base_cpu = torch.arange(6.0)
    base_tpu = base_cpu.to("tpu")
    args = (offset, size) if stride is None else (offset, size, stride)
    want = torch.empty(0).set_(base_cpu.untyped_storage(), *args)
    got = torch.empty(0, device="tpu").set_(base_tpu.untyped_storage(), *args)
    assert got.shape == want.shape and got.stride() == want.stride() and got.storage_offset() == offset
    assert torch.equal(got.cpu(), want)
    assert got.untyped_storage().data_ptr() == base_tpu.untyped_storage().data_ptr()


def test_set_storage_past_the_end_grows_the_storage_as_on_cpu():
    base_cpu, base_tpu = torch.arange(6.0), torch.arange(6.0, device="tpu")
    want = torch.empty(0).set_(base_cpu.untyped_storage(), 0, (4, 3))
    got = torch.empty(0, device="tpu").set_(base_tpu.untyped_storage(), 0, (4, 3))
    assert base_tpu.untyped_storage().nbytes() == base_cpu.untyped_storage().nbytes() == 48
    assert torch.equal(got.cpu()[:2], want[:2])
    assert torch.equal(base_tpu.cpu(), torch.arange(6.0))


def test_set_storage_errors_are_cpus():
    s = torch.arange(6.0, device="tpu").untyped_storage()
    with pytest.raises(RuntimeError, match="invalid storage offset -1"):
        torch.empty(0, device="tpu").set_(s, -1, (2, 3))
    with pytest.raises(RuntimeError, match=r"unequal size length \(2\) and stride length \(1\)"):
        torch.empty(0, device="tpu").set_(s, 0, (2, 3), (1,))


def test_set_source_tensor_and_storage():
    src = torch.arange(6.0, device="tpu").view(2, 3)
    y = torch.empty(0, device="tpu").set_(src)
    assert y.shape == (2, 3) and torch.equal(y.cpu(), src.cpu())
    z = torch.empty(0, device="tpu").set_(src.untyped_storage())
    assert z.shape == (6,) and torch.equal(z.cpu(), torch.arange(6.0))


# ----------------------------------------------------------------------------------------------------------------
# Device-index wording (item 10)


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.ones(2, device="tpu:9"),
        lambda: torch.tpu.set_device(9),
        lambda: torch.accelerator.set_device_index(9),
        lambda: torch.tpu.memory_allocated(9),
        lambda: torch.ones(2).to("tpu:9"),
    ],
)
def test_invalid_device_index_has_pytorchs_wording(call):
    with pytest.raises(RuntimeError) as info:
        call()
    msg = str(info.value)
    assert "The device index is out of range" in msg and "invalid device ordinal" in msg, msg


# ----------------------------------------------------------------------------------------------------------------
# Memory accounting (item 9)


def test_allocations_beyond_capacity_raise_at_the_one_that_does_not_fit():
    gc.collect()
    total = torch.tpu.get_device_properties(0).total_memory
    ooms = torch.tpu.memory_stats()["num_ooms"]
    n = int(total * 0.45) // 4
    a = torch.empty(n, device="tpu")
    b = torch.empty(n, device="tpu")
    with pytest.raises(torch.OutOfMemoryError, match="TPU out of memory. Tried to allocate"):
        torch.empty(n, device="tpu")
    assert torch.tpu.memory_allocated() <= total
    free, reported_total = torch.tpu.mem_get_info()
    assert reported_total == total and free == total - torch.tpu.memory_allocated() > 0
    assert torch.tpu.memory_stats()["num_ooms"] == ooms + 1
    del a, b
    gc.collect()
    c = torch.empty(n, device="tpu")  # fits again once the others are gone
    del c


def test_num_ooms_counts_every_oom():
    total = torch.tpu.get_device_properties(0).total_memory
    before = torch.tpu.memory_stats()["num_ooms"]
    for _ in range(7):
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(total // 2 + 1, dtype=torch.int16, device="tpu")
    assert torch.tpu.memory_stats()["num_ooms"] == before + 7
    assert torch.accelerator.memory_stats()["num_ooms"] == before + 7
    assert (torch.ones(2, device="tpu") + 1).sum().item() == 4.0


# ----------------------------------------------------------------------------------------------------------------
# Capabilities and properties (item 4)


def test_accelerator_capability_lists_exactly_the_dtypes_tpu_tensors_hold():
    cap = torch.accelerator.get_device_capability()
    assert set(cap) == {"supported_dtypes"}
    dtypes = cap["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.complex64} <= dtypes
    assert {torch.float8_e4m3fn, torch.float8_e5m2} <= dtypes  # XLA's f8 types (tests/ops/test_float8.py)
    assert torch.complex32 not in dtypes and torch.float8_e8m0fnu not in dtypes  # no XLA element type
    assert {torch.qint8, torch.quint8, torch.qint32} <= dtypes  # quantized storage (torch.quantize_per_*)
    for dt in dtypes - {torch.qint8, torch.quint8, torch.qint32}:  # each one allocates and round-trips
        t = torch.zeros(2, dtype=dt).to("tpu")
        assert t.dtype == dt and torch.equal(t.cpu(), torch.zeros(2, dtype=dt))
    assert torch.accelerator.get_device_capability("tpu:1") == cap
    with pytest.raises(RuntimeError, match="device index is out of range"):
        torch.accelerator.get_device_capability(torch.tpu.device_count())


def test_device_properties_report_what_the_plugin_knows():
    p = torch.tpu.get_device_properties(0)
    assert p.name == torch.tpu.get_device_name(0) and p.name
    assert p.total_memory == torch.tpu.mem_get_info()[1] > 0
    assert p.multi_processor_count >= 1
    assert set(p.supported_dtypes) == torch.accelerator.get_device_capability()["supported_dtypes"]
    assert p.platform and p.device_kind and isinstance(p.attributes, dict)
    assert torch.tpu.get_device_capability() == (p.major, p.minor)
    assert "total_memory" in repr(p)
    with pytest.raises(AssertionError, match="Invalid device id"):  # torch.cuda's exception for this call
        torch.tpu.get_device_properties(99)
