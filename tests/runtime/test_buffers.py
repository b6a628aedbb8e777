"""Host <-> device round trips for every dtype PyTorch uses, including non-contiguous host strides."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torch_tpu import _C

# (PJRT name, torch dtype): bytes come from torch so bf16 is covered too.
DTYPES = [
    ("f32", torch.float32),
    ("f64", torch.float64),
    ("f16", torch.float16),
    ("bf16", torch.bfloat16),
    ("s8", torch.int8),
    ("s16", torch.int16),
    ("s32", torch.int32),
    ("s64", torch.int64),
    ("u8", torch.uint8),
    ("pred", torch.bool),
    ("c64", torch.complex64),
]


def _sample(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


def _host_array(t: torch.Tensor) -> np.ndarray:
    # numpy has no bf16: move its bits as int16, which has the same size and strides.
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy()
    return t.numpy()


def _from_bytes(data: bytes, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape) if data else torch.empty(shape, dtype=dtype)


@pytest.mark.parametrize("name,dtype", DTYPES, ids=[d[0] for d in DTYPES])
def test_round_trip_dense(client, name, dtype):
    t = _sample(dtype, (3, 5))
    buf = client.buffer_from_host(_host_array(t), name)
    assert buf.dtype == name and buf.dims == [3, 5]
    assert buf.byte_size == t.numel() * t.element_size()
    assert torch.equal(_from_bytes(buf.to_bytes(), dtype, (3, 5)), t)


@pytest.mark.parametrize("name,dtype", DTYPES, ids=[d[0] for d in DTYPES])
def test_round_trip_strided_host(client, name, dtype):
    base = _sample(dtype, (6, 8))
    view = base.t()[::2]  # transposed and strided: not row-major
    assert not view.is_contiguous()
    buf = client.buffer_from_host(_host_array(view), name)
    assert buf.dims == list(view.shape)
    assert torch.equal(_from_bytes(buf.to_bytes(), dtype, tuple(view.shape)), view.contiguous())


def test_zero_size_and_scalar(client):
    empty = client.buffer_from_host(np.zeros((0, 4), dtype=np.float32), "f32")
    assert empty.dims == [0, 4] and empty.to_bytes() == b""
    scalar = client.buffer_from_host(np.array(3.5, dtype=np.float64), "f64")
    assert scalar.dims == [] and np.frombuffer(scalar.to_bytes(), np.float64)[0] == 3.5


def test_second_device(client):
    buf = client.buffer_from_host(np.arange(4, dtype=np.int32), "s32", device=1)
    assert np.array_equal(np.frombuffer(buf.to_bytes(), np.int32), np.arange(4))


def test_itemsize_mismatch_is_rejected(client):
    with pytest.raises(_C.TpuError, match="host items are 4 bytes but f64 needs 8"):
        client.buffer_from_host(np.zeros(3, dtype=np.float32), "f64")


def test_unknown_dtype_name(client):
    with pytest.raises(_C.TpuError, match="unknown element type name 'f128'"):
        client.buffer_from_host(np.zeros(3, dtype=np.float32), "f128")


def test_delete_releases_device_memory(client):
    buf = client.buffer_from_host(np.zeros(8, dtype=np.float32), "f32")
    assert not buf.is_deleted()
    buf.delete()
    assert buf.is_deleted()
    with pytest.raises(_C.TpuError):
        buf.to_bytes()


def test_no_leaked_buffers_after_stress(client):
    before = _C.runtime_counters()["live_buffers"]
    data = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    for _ in range(200):
        buf = client.buffer_from_host(data, "f32")
        assert len(buf.to_bytes()) == data.nbytes
        del buf
    assert _C.runtime_counters()["live_buffers"] == before
