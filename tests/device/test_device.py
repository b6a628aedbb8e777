"""Registration: the tpu device, torch.tpu, torch.accelerator, generated methods, the names others call."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_backend_renamed_and_module_registered():
    assert torch._C._get_privateuse1_backend_name() == "tpu"
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == config.load().cpu_devices
    assert torch.get_device_module("tpu") is torch.tpu


def test_import_torch_alone_autoloads():
    code = "import torch; x = torch.ones(2, device='tpu'); print(x.device, (x + 1).sum().item())"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["tpu:0", "4.0"]


def test_autoload_can_be_disabled():
    code = "import sys, torch; print('torch_tpu' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": REPO, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.stdout.strip() == "False"


def test_current_and_set_device():
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
        assert torch.empty(2, device="tpu").device == torch.device("tpu:1")
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device("tpu:1")
    assert torch.accelerator.current_device_index() == 1
    torch.tpu.set_device(0)


def test_accelerator_api():
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
    torch.accelerator.synchronize()


def test_device_name_and_properties():
    assert torch.tpu.get_device_name() == "XLA CPU"
    props = torch.tpu.get_device_properties(0)
    assert props.total_memory > 0 and props.name == "XLA CPU"


def test_generated_methods():
    t = torch.arange(3.0)
    u = t.tpu()
    assert u.is_tpu and not t.is_tpu
    assert torch.equal(u.cpu(), t)
    m = torch.nn.Linear(2, 2).tpu()
    assert all(p.device.type == "tpu" for p in m.parameters())
    assert u.untyped_storage().is_tpu


def test_api_names_other_projects_call():
    from torch_tpu.api import tpu_device
    from torch_tpu.api._device_module import _DeviceModule

    assert tpu_device() == torch.device("tpu")
    assert _DeviceModule.current_device() == 0
    assert _DeviceModule.device_count() == torch.tpu.device_count()


def test_invalid_device_index():
    with pytest.raises(RuntimeError, match=r"The device index is out of range\. It must be in \[0, \d+\), but got 7"):
        torch.empty(2, device="tpu:7")
    with pytest.raises(RuntimeError, match="The device index is out of range"):
        torch.tpu.set_device(9)
    assert torch.ones(1, device="tpu").item() == 1.0


def test_metrics_shape():
    m = torch_tpu.metrics()
    for key in (
        "compiles",
        "cache_hits",
        "executions",
        "host_to_device",
        "live_buffers",
        "fallback_ops",
        "lowered_ops",
        "host_ops",
    ):
        assert key in m
