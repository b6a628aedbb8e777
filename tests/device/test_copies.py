"""Copies between devices, views and in-place aliasing, scalars, printing, serialization."""

from __future__ import annotations

import io

import pytest
import torch

import torch_tpu

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_every_dtype(dtype):
    x = (torch.randn(4, 5) * 10).to(dtype)
    assert torch.equal(x.to("tpu").cpu(), x)
    nc = x.t()[1:3]
    assert torch.equal(nc.to("tpu").cpu(), nc)


def test_non_blocking_and_pinned():
    x = torch.randn(64).pin_memory()
    y = x.to("tpu", non_blocking=True)
    z = y.to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(z, x)


def test_tpu_to_tpu_and_across_devices():
    x = torch.randn(3, 4)
    a = x.to("tpu:0")
    b = a.to("tpu:1")
    c = b.clone()
    assert b.device == torch.device("tpu:1") and c.device == b.device
    assert torch.equal(c.cpu(), x)
    dst = torch.empty(3, 4, device="tpu:0")
    dst.copy_(b)
    assert torch.equal(dst.cpu(), x)


def test_copy_into_views_with_conversion_and_broadcast():
    base = torch.zeros(4, 6)
    t = base.to("tpu")
    src = torch.arange(3, dtype=torch.int64)
    t[1:3, ::2].copy_(src)
    base[1:3, ::2].copy_(src)
    assert torch.equal(t.cpu(), base)
    t[:, 5] = 9
    base[:, 5] = 9
    assert torch.equal(t.cpu(), base)


def test_write_through_one_view_seen_by_all():
    t = torch.zeros(3, 4, device="tpu")
    row = t[1]
    col = t[:, 2]
    flat = t.view(-1)
    row.fill_(1)
    col.add_(5)
    assert flat[6].item() == 6.0
    assert t[0, 2].item() == 5.0
    expected = torch.zeros(3, 4)
    expected[1] = 1
    expected[:, 2] += 5
    assert torch.equal(flat.cpu().view(3, 4), expected)


def test_inplace_update_of_a_view_donates_the_storage():
    import torch_tpu

    base = torch.zeros(1000)
    t = base.to("tpu")
    before = torch_tpu.metrics()["donations"]
    t[10:20].add_(1)
    base[10:20].add_(1)
    assert torch.equal(t.cpu(), base)  # (fused mode runs the update here)
    assert torch_tpu.metrics()["donations"] == before + 1


def test_view_dtype_reinterprets_bytes():
    x = torch.tensor([1.0, -2.0, 3.5])
    t = x.to("tpu")
    assert torch.equal(t.view(torch.int32).cpu(), x.view(torch.int32))
    assert torch.equal(t.view(torch.uint8).cpu(), x.view(torch.uint8))


def test_item_and_printing():
    t = torch.tensor([[1.5, 2.0]], device="tpu")
    assert t[0, 0].item() == 1.5
    assert "device='tpu:0'" in repr(t)
    assert "1.5000" in str(t)


def test_resize_keeps_prefix():
    t = torch.arange(4.0, device="tpu")
    t.resize_(6)
    assert torch.equal(t[:4].cpu(), torch.arange(4.0))


def test_save_and_load():
    state = {"w": torch.randn(3, 3, device="tpu"), "step": torch.tensor(4, device="tpu:1")}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    back = torch.load(buf)
    assert back["w"].device == torch.device("tpu:0") and back["step"].device == torch.device("tpu:1")
    assert torch.equal(back["w"].cpu(), state["w"].cpu())
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["w"].device.type == "cpu" and torch.equal(on_cpu["w"], state["w"].cpu())
    buf.seek(0)
    moved = torch.load(buf, map_location="tpu:1")
    assert moved["w"].device == torch.device("tpu:1")


def test_module_state_dict_round_trip():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).to("tpu")
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).to("tpu")
    m2.load_state_dict(torch.load(buf))
    x = torch.randn(5, 4, device="tpu")
    assert torch.equal(m(x).cpu(), m2(x).cpu())


def test_contiguous_piece_of_a_storage_reads_without_a_program():
    # A prefix or a row range of a storage comes down whole and is cut on the host: no program per offset/length.
    x = torch.randn(100, 8)
    t = x.to("tpu")
    torch.tpu.synchronize()
    before = torch_tpu.metrics()["executions"]
    torch.testing.assert_close(t[3:40].cpu(), x[3:40])
    torch.testing.assert_close(t.narrow(0, 97, 3).cpu(), x.narrow(0, 97, 3))
    assert torch_tpu.metrics()["executions"] == before
    torch.testing.assert_close(t[:, 2].cpu(), x[:, 2])  # strided: gathered by a program
    torch.testing.assert_close(t.view(torch.int32)[5:9].cpu(), x.view(torch.int32)[5:9])
