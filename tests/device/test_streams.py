"""torch.Stream / torch.Event / synchronize on tpu."""

from __future__ import annotations

import torch


def test_streams_and_context():
    s = torch.tpu.Stream()
    assert s.device == torch.device("tpu:0")
    assert torch.tpu.current_stream() == torch.tpu.default_stream()
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
        x = torch.ones(4, device="tpu") * 3
    assert torch.tpu.current_stream() == torch.tpu.default_stream()
    s.synchronize()
    assert s.query()
    assert x.sum().item() == 12


def test_events_time_and_sync():
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    start.record()
    y = torch.randn(64, 64, device="tpu") @ torch.randn(64, 64, device="tpu")
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    assert end.query()
    torch.tpu.synchronize()
    assert y.shape == (64, 64)


def test_accelerator_stream():
    s = torch.Stream(device="tpu")
    torch.accelerator.set_stream(s)
    assert torch.accelerator.current_stream() == s
    torch.accelerator.set_stream(torch.tpu.default_stream())
