"""torch_tpu._internal.batch_transfer (TorchTPU's batched host<->tpu copies): round trips keep values, dtypes and
devices, for pinned and pageable, contiguous and strided tensors, whole tensors and major-dimension windows."""

from __future__ import annotations

import pytest
import torch

import torch_tpu  # noqa: F401  (registers the tpu device)
from torch_tpu._internal import batch_transfer as bt


def _host_tensors() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [
        torch.randn(3, 5, generator=gen),
        torch.randn(7, generator=gen).to(torch.bfloat16),
        torch.randint(-1000, 1000, (2, 3, 2), generator=gen),
        torch.randint(0, 2, (6,), generator=gen).bool(),
        torch.arange(12, dtype=torch.int32).reshape(3, 4),
    ]


def test_package_names() -> None:
    assert set(bt.__all__) == {
        "TransferFuture",
        "batch_transfer_d2h",
        "batch_transfer_h2d",
        "batch_transfer_d2h_sync",
        "batch_transfer_h2d_sync",
        "await_all",
    }
    from torch_tpu._internal.batch_transfer import batch_transfer_impl

    assert batch_transfer_impl.TransferFuture is bt.TransferFuture
    bt.TransferFuture().wait()  # an empty batch is complete


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
def test_h2d_then_d2h_round_trip(pinned: bool) -> None:
    hosts = [t.pin_memory() if pinned else t for t in _host_tensors()]
    devs = [torch.empty(t.shape, dtype=t.dtype, device="tpu") for t in hosts]
    future = bt.batch_transfer_h2d(hosts, devs)
    assert isinstance(future, bt.TransferFuture)
    assert future.wait() is None
    for h, d in zip(hosts, devs, strict=True):
        assert d.device.type == "tpu" and d.dtype == h.dtype
        assert torch.equal(d.cpu(), h)
    backs = [torch.full(t.shape, 0, dtype=t.dtype, pin_memory=pinned) for t in hosts]
    bt.batch_transfer_d2h(devs, backs).wait()
    for h, b in zip(hosts, backs, strict=True):
        assert b.device.type == "cpu" and b.dtype == h.dtype and torch.equal(b, h)


def test_allocating_forms_return_destinations() -> None:
    hosts = _host_tensors()
    devs = bt.batch_transfer_h2d(hosts).result()
    assert [d.device.type for d in devs] == ["tpu"] * len(hosts)
    backs = bt.batch_transfer_d2h(devs).result()
    for h, b in zip(hosts, backs, strict=True):
        assert b.device.type == "cpu" and b.is_pinned() and b.dtype == h.dtype and torch.equal(b, h)


def test_non_contiguous_sources_and_destinations() -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    host_views = [base.T, base[:, ::2], base[1:3]]
    assert not host_views[0].is_contiguous() and not host_views[1].is_contiguous()
    devs = [torch.empty(v.shape, device="tpu") for v in host_views]
    bt.batch_transfer_h2d_sync(host_views, devs)
    for v, d in zip(host_views, devs, strict=True):
        assert torch.equal(d.cpu(), v)
    whole = base.to("tpu")
    dev_views = [whole.T, whole[:, 1::2], whole[::2, 2:5]]
    host_base = torch.zeros(4, 6)
    host_dst = [torch.zeros(6, 4), host_base[:, ::2], torch.zeros(3, 2).T]  # a strided and a transposed one
    bt.batch_transfer_d2h_sync(dev_views, host_dst)
    for v, h in zip(dev_views, host_dst, strict=True):
        assert torch.equal(h, v.cpu())
    assert torch.equal(host_base[:, 1::2], torch.zeros(4, 3))  # nothing written beside the strided destination


def test_major_dimension_windows() -> None:
    full = torch.arange(8 * 3 * 2, dtype=torch.float32).reshape(8, 3, 2)
    on_tpu = full.to("tpu")
    staged = torch.zeros(4, 3, 2, pin_memory=True)
    bt.batch_transfer_d2h(
        [on_tpu], [staged], src_offsets_major_dim=[2], dst_offsets_major_dim=[1], copy_sizes_major_dim=[2]
    ).wait()
    assert torch.equal(staged[1:3], full[2:4])
    assert torch.equal(staged[0], torch.zeros(3, 2)) and torch.equal(staged[3], torch.zeros(3, 2))
    target = torch.full((5, 3, 2), -1.0, device="tpu")
    bt.batch_transfer_h2d_sync([staged], [target], [1], [3], [2])
    expected = torch.full((5, 3, 2), -1.0)
    expected[3:5] = full[2:4]
    assert torch.equal(target.cpu(), expected)


def test_host_staging_buffer_larger_than_device_tensor() -> None:
    # TorchTPU's host buffers are sized for padded device buffers; the leading elements are the tensor's.
    staging = torch.zeros(64, pin_memory=True)
    staging[:10] = torch.arange(10, dtype=torch.float32)
    dev = torch.empty(2, 5, device="tpu")
    bt.batch_transfer_h2d([staging], [dev]).wait()
    assert torch.equal(dev.cpu(), torch.arange(10, dtype=torch.float32).reshape(2, 5))
    out = torch.full((64,), 7.0, pin_memory=True)
    bt.batch_transfer_d2h([dev * 2], [out]).wait()
    assert torch.equal(out[:10], torch.arange(10, dtype=torch.float32) * 2)
    assert torch.equal(out[10:], torch.full((54,), 7.0))


def test_await_all_and_source_reuse_after_wait() -> None:
    hosts = [torch.full((4, 4), float(i), pin_memory=True) for i in range(3)]
    devs = [torch.empty(4, 4, device="tpu") for _ in hosts]
    futures = [bt.batch_transfer_h2d([h], [d]) for h, d in zip(hosts, devs, strict=True)]
    bt.await_all(futures)
    for h in hosts:
        h.fill_(-1.0)  # the uploads finished: overwriting the sources must not reach the tpu copies
    for i, d in enumerate(devs):
        assert torch.equal(d.cpu(), torch.full((4, 4), float(i)))
    backs = [torch.empty(4, 4, pin_memory=True) for _ in devs]
    d2h = [bt.batch_transfer_d2h([d + 1], [b]) for d, b in zip(devs, backs, strict=True)]
    bt.await_all(d2h)
    assert [b[0, 0].item() for b in backs] == [1.0, 2.0, 3.0]
    d2h[0].wait()  # waiting again is harmless


def test_device_side_pending_results_are_transferred() -> None:
    x = torch.arange(6, dtype=torch.float32, device="tpu")
    y = (x * 3 - 1).reshape(2, 3)  # in fused mode still pending when the batch is issued
    out = torch.empty(2, 3, pin_memory=True)
    bt.batch_transfer_d2h_sync([y], [out])
    assert torch.equal(out, (torch.arange(6, dtype=torch.float32) * 3 - 1).reshape(2, 3))


def test_invalid_batches_are_refused() -> None:
    h, d = torch.zeros(3), torch.zeros(3, device="tpu")
    with pytest.raises(ValueError, match="dtype"):
        bt.batch_transfer_h2d([h.double()], [d])
    with pytest.raises(ValueError, match="sources"):
        bt.batch_transfer_h2d([h, h], [d])
    with pytest.raises(ValueError, match="cpu -> tpu"):
        bt.batch_transfer_h2d([d], [h])
    with pytest.raises(ValueError, match="one entry per tensor"):
        bt.batch_transfer_d2h([d], [h], [0], [0], [])
    with pytest.raises(ValueError, match="out of range"):
        bt.batch_transfer_d2h([d], [h], [2], [0], [2])
    with pytest.raises(ValueError, match="shape"):
        bt.batch_transfer_h2d([torch.zeros(2)], [d])  # a host source smaller than its destination


def test_pinned_batches_are_issued_without_waiting() -> None:
    from torch_tpu import _C

    srcs = [torch.randn(64, 64, device="tpu") for _ in range(3)]
    torch.tpu.synchronize()
    _C._reset_host_sync_counts()
    pinned = [torch.empty(64, 64, pin_memory=True) for _ in srcs]
    future = bt.batch_transfer_d2h(srcs, pinned)
    assert sum(_C._host_sync_counts().values()) == 0  # downloads started, none waited for yet
    future.wait()
    assert all(torch.equal(p, s.cpu()) for p, s in zip(pinned, srcs, strict=True))
    _C._reset_host_sync_counts()
    bt.batch_transfer_d2h(srcs[:1], [torch.empty(64, 64)]).wait()  # pageable memory: the copy blocks
    assert sum(_C._host_sync_counts().values()) == 1
