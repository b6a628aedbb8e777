"""Plugin discovery and loading: the default plugin works, bad ones fail with messages that say what to do."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from torch_tpu import _C, config, runtime

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_default_plugin_is_the_cpu_wheel(client):
    assert runtime.default_plugin_path() == client.plugin_path
    assert client.platform_name == "cpu"
    assert client.api_version.split(".")[0] == _C.pjrt_header_version().split(".")[0]


def test_devices_listed(rt, client):
    devices = client.devices()
    assert len(devices) == config.load().cpu_devices
    assert [d["index"] for d in devices] == list(range(len(devices)))
    assert all(d["kind"] == "cpu" and "CpuDevice" in d["description"] for d in devices)
    assert rt.devices == devices


def test_memory_stats_reports_unavailable_on_cpu(client):
    assert client.memory_stats(0)["available"] is False


def test_invalid_device_index(client):
    with pytest.raises(_C.TpuError, match="device index 7 is out of range"):
        client.memory_stats(7)


def test_nonexistent_plugin_path():
    with pytest.raises(_C.TpuError) as info:
        _C.Client.create("/nonexistent/libtpu.so")
    assert info.value.code == "NOT_FOUND"
    assert "/nonexistent/libtpu.so" in str(info.value)


def test_file_that_is_not_a_library(tmp_path):
    bogus = tmp_path / "plugin.so"
    bogus.write_text("not a shared library")
    with pytest.raises(_C.TpuError, match="could not be loaded as a shared library"):
        _C.Client.create(str(bogus))


def test_library_without_pjrt_entry():
    with pytest.raises(_C.TpuError, match="exports no GetPjrtApi"):
        _C.Client.create(_C.__file__)


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": REPO, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)


def test_bad_plugin_env_does_not_break_import():
    proc = _run(
        "import torch_tpu; print(torch_tpu.is_available()); print(torch_tpu.runtime.status())",
        TORCH_TPU_PJRT_PLUGIN="/no/such/plugin.so",
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "False"
    assert "/no/such/plugin.so" in proc.stdout and "TORCH_TPU_PJRT_PLUGIN" in proc.stdout


def test_info_report_names_platform_and_devices():
    proc = _run("import torch_tpu.info as i; print(i.report())")
    assert proc.returncode == 0, proc.stderr
    assert "platform:     cpu" in proc.stdout
    assert "tpu:1" in proc.stdout


_HEAP_PROBE = """
import ctypes, torch, torch_tpu

class MallInfo2(ctypes.Structure):  # glibc >= 2.33
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
before = mallinfo2()
t = torch.ones(16 << 20, device="tpu") * 2  # a 64 MiB XLA-CPU buffer: over glibc's largest mmap threshold
torch.tpu.synchronize()
alive = mallinfo2()
del t
torch.tpu.synchronize()
freed = mallinfo2()
print(torch_tpu.runtime.get().host_heap)
print((alive.hblkhd - before.hblkhd) >> 20, (freed.fordblks - alive.fordblks) >> 20)
"""


@pytest.mark.parametrize("keep", ["1", "0"])
def test_kept_host_heap_keeps_freed_buffers(keep):
    # Kept (the default for fused eager on XLA-CPU): a 64 MiB device buffer comes from the heap, not from its own
    # mmap(), and once freed it stays in the heap for the next buffer; glibc's defaults mmap() it and unmap it on
    # free, so the next one faults all of its pages in again.
    proc = _run(_HEAP_PROBE, TORCH_TPU_KEEP_HOST_HEAP=keep)
    assert proc.returncode == 0, proc.stderr
    policy, sizes = proc.stdout.splitlines()[-2:]
    mmapped_mib, kept_free_mib = (int(v) for v in sizes.split())
    if keep == "1":
        assert policy.startswith("kept (arena_max=1, mmap_max=0"), policy
        assert mmapped_mib <= 0 and kept_free_mib >= 64, sizes  # no new mmap (an older block may be unmapped)
    else:
        assert policy == "unchanged", policy
        assert mmapped_mib >= 64 and kept_free_mib < 64, sizes
    assert config.load({"TORCH_TPU_KEEP_HOST_HEAP": keep}).keep_host_heap is (keep == "1")


def test_host_heap_is_kept_for_fused_eager_only():
    # One shared arena doubles strict/debug dispatch (host thread and XLA's workers contend for its lock).
    assert config.load({}).keep_host_heap
    assert not config.load({"TORCH_TPU_EAGER_MODE": "strict"}).keep_host_heap
    assert not config.load({"TORCH_TPU_EAGER_MODE": "debug", "TORCH_TPU_KEEP_HOST_HEAP": "auto"}).keep_host_heap
    assert config.load({"TORCH_TPU_EAGER_MODE": "strict", "TORCH_TPU_KEEP_HOST_HEAP": "1"}).keep_host_heap
    proc = _run("import torch_tpu; print(torch_tpu.runtime.get().host_heap)", TORCH_TPU_EAGER_MODE="strict")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "unchanged"


def test_visible_chips_filters_devices():
    proc = _run("import torch_tpu.runtime as r; print([d['index'] for d in r.get().devices])", TPU_VISIBLE_CHIPS="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[1]"


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="TORCH_TPU_EAGER_MODE"):
        config.load({"TORCH_TPU_EAGER_MODE": "lazy"})
    with pytest.raises(ValueError, match="TPU_VISIBLE_CHIPS"):
        config.load({"TPU_VISIBLE_CHIPS": "a,b"})
    assert config.load({"TORCH_TPU_CACHE_DIR": "off"}).cache_dir is None
    assert config.load({}).program_cache == 256
    assert config.load({"TORCH_TPU_PROGRAM_CACHE": "0"}).program_cache == 0
    with pytest.raises(ValueError, match="TORCH_TPU_PROGRAM_CACHE"):
        config.load({"TORCH_TPU_PROGRAM_CACHE": "-5"})
