"""Plugin discovery without TORCH_TPU_PJRT_PLUGIN (libtpu, then XLA-CUDA, then XLA-CPU, each where its hardware is),
short names, the reasons a plugin is passed over, and the per-kind defaults, with fake plugin files and a fake /dev.
A found plugin that fails to load falls through to the next one with the reason recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_tpu import config, plugins, runtime

REPO = Path(__file__).resolve().parents[2]


def _site(tmp_path: Path, *kinds: str) -> Path:
    """A fake site-packages holding the plugin files the wheels of `kinds` install (empty files: not loadable)."""
    rel = {
        "tpu": "libtpu/libtpu.so",
        "cuda12": "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
        "cuda13": "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
        "cpu": "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
    }
    site = tmp_path / "site"
    for k in kinds:
        f = site / rel[k]
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")
    return site


def _dev(tmp_path: Path, *nodes: str) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for n in nodes:
        (dev / n).parent.mkdir(parents=True, exist_ok=True)
        (dev / n).write_text("")
    return dev


def test_order_and_hardware_checks(tmp_path: Path) -> None:
    site = _site(tmp_path, "tpu", "cuda12", "cuda13", "cpu")
    assert [p.source for p in plugins.installed([str(site)])] == [
        "libtpu wheel", "jax-cuda13-pjrt wheel", "jax-cuda12-pjrt wheel", "xla-cpu-pjrt wheel"
    ]  # fmt: skip

    bare = plugins.choose(None, [str(site)], str(_dev(tmp_path)))
    assert [p.kind for p in bare.candidates] == ["cpu"]
    assert [(p.kind, why.split(" (")[0]) for p, why in bare.passed_over] == [
        ("tpu", "no tpu device"), ("cuda", "no cuda device"), ("cuda", "no cuda device")
    ]  # fmt: skip

    gpu_host = plugins.choose(None, [str(site)], str(_dev(tmp_path, "nvidiactl", "nvidia0")))
    assert [p.source for p in gpu_host.candidates] == [
        "jax-cuda13-pjrt wheel",
        "jax-cuda12-pjrt wheel",
        "xla-cpu-pjrt wheel",
    ]

    tpu_host = plugins.choose(None, [str(site)], str(_dev(tmp_path, "vfio/0")))
    assert tpu_host.candidates[0].kind == "tpu" and tpu_host.candidates[-1].kind == "cpu"


def test_short_names_and_paths(tmp_path: Path) -> None:
    site = _site(tmp_path, "cuda12", "cpu")
    forced = plugins.choose("cuda", [str(site)], str(_dev(tmp_path)))  # no GPU visible: forced anyway
    assert [p.path for p in forced.candidates] == [str(site / "jax_plugins/xla_cuda12/xla_cuda_plugin.so")]
    assert plugins.choose("CPU", [str(site)]).candidates[0].kind == "cpu"
    with pytest.raises(LookupError, match=r"no tpu PJRT plugin is installed.*pip install torch_tpu\[tpu\]"):
        plugins.choose("tpu", [str(site)])
    given = plugins.choose("/opt/x/libtpu.so", [str(site)])
    assert [(p.kind, p.path) for p in given.candidates] == [("tpu", "/opt/x/libtpu.so")]


def test_platform_table_drives_client_options() -> None:
    cfg = config.load({"TORCH_TPU_CPU_DEVICES": "3", "TORCH_TPU_GPU_MEMORY_FRACTION": "0.5"})
    assert config.client_options("cpu", cfg) == {"cpu_device_count": 3}
    assert config.client_options("cuda", cfg) == {"preallocate": False, "memory_fraction": 0.5}
    assert config.client_options("cuda", config.load({})) == {"preallocate": False}
    assert config.client_options("tpu", cfg)["ml_framework_name"] == "PyTorch"
    assert [p.kind for p in config.PLATFORMS if p.host_memory] == ["cpu"]
    assert not config.platform("path").host_memory
    with pytest.raises(ValueError, match="TORCH_TPU_GPU_MEMORY_FRACTION='1.5' must be in"):
        config.load({"TORCH_TPU_GPU_MEMORY_FRACTION": "1.5"})


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), env.pop("EXTRA_PATH", "")]), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


def test_a_found_plugin_that_fails_to_load_falls_through(tmp_path: Path) -> None:
    # An (unloadable) libtpu wheel on a host that looks like a TPU host: the XLA-CPU plugin still starts, the
    # failure is recorded and warned about, and the report shows it.
    site = _site(tmp_path, "tpu")
    probe = (
        "import glob, warnings\n"
        "real = glob.glob\n"
        "glob.glob = lambda pattern, *a, **k: ['/dev/vfio/0'] if 'vfio' in pattern else real(pattern, *a, **k)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    from torch_tpu import runtime\n"
        "    rt = runtime.get()\n"
        "print(rt.plugin_kind, len(rt.rejected), rt.rejected[0][1][:40])\n"
        "print(any('running on the cpu plugin' in str(x.message) for x in w))\n"
    )
    proc = _python(probe, EXTRA_PATH=str(site))
    assert proc.returncode == 0, proc.stderr
    kind, count, *why = proc.stdout.splitlines()[0].split(" ", 2)
    assert (kind, count) == ("cpu", "1") and why[0].startswith("load error:")
    assert proc.stdout.splitlines()[1] == "True"


def test_short_name_without_its_wheel_is_a_clear_unavailable(tmp_path: Path) -> None:
    proc = _python("import torch_tpu; print(torch_tpu.is_available()); print(torch_tpu.runtime.status())",
                   TORCH_TPU_PJRT_PLUGIN="tpu")  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.splitlines()[0] == "False"
    assert "pip install torch_tpu[tpu]" in proc.stdout


def test_runtime_records_the_choice(rt) -> None:
    assert rt.plugin_kind == "cpu" and "xla-cpu-pjrt wheel" in rt.chosen_because
    assert runtime.default_plugin_path() == rt.client.plugin_path
