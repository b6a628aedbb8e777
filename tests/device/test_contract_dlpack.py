"""DLPack round trips of tpu tensors share storage, as CPU/CUDA round trips do."""

from __future__ import annotations

import pytest
import torch
from torch.utils.dlpack import DLDeviceType, from_dlpack, to_dlpack


def _both(fn):
    """fn applied to a CPU tensor and to the same tensor on tpu."""
    base = torch.arange(12.0).view(3, 4)
    return fn(base.clone()), fn(base.to("tpu"))


def test_capsule_round_trip_shares_storage_both_ways():
    for src in (torch.arange(12.0).view(3, 4), torch.arange(12.0, device="tpu").view(3, 4)):
        dst = from_dlpack(to_dlpack(src))
        assert dst.device == src.device and dst.data_ptr() == src.data_ptr()
        assert torch.equal(dst.cpu(), src.cpu())
        dst.add_(1)  # writes through the import are seen by the exporter ...
        src[0, 0] = -5.0  # ... and the other way round
        assert torch.equal(src.cpu(), dst.cpu())
        assert src.sum().item() == dst.sum().item() == 12 * 13 / 2 - 1 - 5


@pytest.mark.parametrize(
    "view",
    [lambda t: t, lambda t: t.t(), lambda t: t[0], lambda t: t[:2], lambda t: t[:, ::2], lambda t: t.int()],
    ids=["whole", "transpose", "first_row", "prefix", "strided", "int32"],
)
def test_protocol_round_trip_matches_cpu(view):
    want, got = _both(lambda t: torch.from_dlpack(view(t)))
    assert got.device.type == "tpu"
    assert got.shape == want.shape and got.stride() == want.stride() and got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)
    assert torch.equal((got * 2 + 1).cpu(), want * 2 + 1)


def test_dlpack_device_of_tpu_tensors():
    assert torch.ones(1, device="tpu").__dlpack_device__() == (DLDeviceType.kDLExtDev, 0)
    assert torch.ones(1, device="tpu:1").__dlpack_device__() == (DLDeviceType.kDLExtDev, 1)
    assert torch.ones(1).__dlpack_device__() == (DLDeviceType.kDLCPU, 0)  # other devices unchanged


def test_import_to_cpu_copies():
    t = torch.arange(4.0, device="tpu")
    c = torch.from_dlpack(t, device="cpu")
    assert c.device.type == "cpu" and torch.equal(c, torch.arange(4.0))


def test_view_that_starts_inside_its_storage_is_refused_clearly():
    t = torch.arange(12.0, device="tpu").view(3, 4)
    imported = torch.from_dlpack(t[1])
    with pytest.raises(RuntimeError, match="starts 16 bytes into its storage"):
        imported.cpu()
    ok = torch.from_dlpack(t[1].clone())
    assert torch.equal(ok.cpu(), torch.arange(4.0, 8.0))


def test_imported_tensor_keeps_exporter_storage_alive():
    t = torch.arange(5.0, device="tpu")
    capsule = to_dlpack(t)
    del t
    imported = from_dlpack(capsule)
    assert torch.equal(imported.cpu(), torch.arange(5.0))
