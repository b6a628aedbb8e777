"""TorchTPU's compiler options and the compile cache as its users live with it: custom_compiler_options reach the
plugin and the cache key; _get_cache_stats/_clear_cache act on both tiers; the disk tier is bounded (least recently
used go first), private, and refuses entries another user could have written. Disk-tier tests run in a child process
with a cache directory of their own, so the suite's shared cache is never touched."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_tpu
from torch_tpu import _C
from torch_tpu._internal import compiler_options
from torch_tpu.runtime import default_plugin_path

options = torch.tpu.compiler.custom_compiler_options


def test_options_reach_the_plugin_when_the_block_materializes() -> None:
    x = torch.arange(5.0, device="tpu")
    with options({"xla_this_option_does_not_exist": True}):
        with pytest.raises(RuntimeError, match="xla_this_option_does_not_exist"):
            (x * 7 + 2).cpu()
    torch.testing.assert_close((x * 7 + 2).cpu(), torch.arange(5.0) * 7 + 2)  # gone with the block


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_valid_options_compile_and_match_cpu(mode: str) -> None:
    a = torch.randn(7, 9)
    with torch_tpu.eager_mode(mode):
        with options({"xla_optimization_level": "O1", "xla_memory_fitting_level": "O0"}):
            with options({"xla_cpu_enable_fast_math": False, "xla_optimization_level": "O2"}):
                assert compiler_options.current() == {
                    "xla_optimization_level": "O2",
                    "xla_memory_fitting_level": "O0",
                    "xla_cpu_enable_fast_math": False,
                }
                out = (a.to("tpu").exp() * 3).sum(0)
            assert compiler_options.current() == {"xla_optimization_level": "O1", "xla_memory_fitting_level": "O0"}
        assert compiler_options.current() == {}
    torch.testing.assert_close(out.cpu(), (a.exp() * 3).sum(0))


def test_options_are_part_of_the_cache_key() -> None:
    x = torch.full((11, 3), 2.0, device="tpu")
    for _ in range(3):
        (x.sin() + 1).cpu()
    misses = _C.runtime_counters()["cache_misses"]
    (x.sin() + 1).cpu()
    assert _C.runtime_counters()["cache_misses"] == misses
    with options({"xla_optimization_level": "O1"}):
        (x.sin() + 1).cpu()
    assert _C.runtime_counters()["cache_misses"] > misses


def test_fused_ops_recorded_before_the_block_compile_without_it() -> None:
    with torch_tpu.eager_mode("fused"):
        x = torch.ones(4, device="tpu") * 3
        with options({"xla_this_option_does_not_exist": 1}):
            pass  # entering ran the pending graph without the bad option; leaving ran nothing new
        torch.testing.assert_close(x.cpu(), torch.full((4,), 3.0))


def test_bad_options_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match="O0, O1, O2, O3"), options({"xla_optimization_level": "fast"}):
        pass
    with pytest.raises(TypeError, match="must be a str, bool, int or float"), options({"xla_foo": [1]}):
        pass
    with pytest.raises(TypeError, match="dict of option names"), options(["xla_foo"]):  # type: ignore[arg-type]
        pass
    assert compiler_options.current() == {}


def test_not_allowed_inside_a_compiled_region() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        with options({"xla_optimization_level": "O1"}):
            return x + 1

    with pytest.raises(Exception, match="custom_compiler_options cannot be used inside a torch.compile"):
        torch.compile(f, backend="tpu", fullgraph=True)(torch.ones(2, device="tpu"))


def test_cache_stats_count_requests_and_entries() -> None:
    before = torch.tpu._get_cache_stats()
    x = torch.full((13, 5), 1.5, device="tpu")
    (x.cos() * 2).cpu()
    (x.cos() * 2).cpu()
    after = torch.tpu._get_cache_stats()
    assert after.num_cache_reqs > before.num_cache_reqs
    assert after.num_cache_hits >= before.num_cache_hits
    assert after.per_entry_stats and all(e.label.startswith("tpu:") for e in after.per_entry_stats)
    assert any("cosine" in e.label for e in after.per_entry_stats)
    assert all(e.read_count >= 0 and e.compilation_duration >= 0 for e in after.per_entry_stats)


CHILD = textwrap.dedent(
    """
    import json, os, sys, torch, torch_tpu
    from torch_tpu import _C
    def programs(k, first=0):
        for n in range(first, first + k):
            (torch.full((n + 3, 2), 1.0, device="tpu") * (n + 1)).sin().cpu()
    action = sys.argv[1]
    cache = torch_tpu.runtime.get().cache
    if action == "fill":
        programs(int(sys.argv[2]))
    elif action == "clear":
        programs(3)
        torch.tpu._clear_cache()
        programs(3)
    s = torch.tpu._get_cache_stats()
    print(json.dumps({"counters": _C.runtime_counters(), "entries": len(s.per_entry_stats),
                      "disk_bytes": s.disk_bytes, "disk_directory": s.disk_directory}))
    """
)


def _child(cache_dir: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    e = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir), TORCH_TPU_EAGER_MODE="strict", **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args], env=e, capture_output=True, text=True, timeout=180, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*/*.pjrt"))


def test_disk_tier_is_private_and_reused(tmp_path: Path) -> None:
    first, _ = _child(tmp_path / "c", "fill", "3")
    platform_dir = Path(first["disk_directory"])
    assert stat.S_IMODE(platform_dir.stat().st_mode) == 0o700
    assert first["counters"]["compiles"] >= 3 and len(_entries(tmp_path / "c")) >= 3
    second, _ = _child(tmp_path / "c", "fill", "3")
    assert second["counters"]["compiles"] == 0 and second["counters"]["disk_cache_hits"] >= 3
    # The same plugin wheel in another virtual environment (a fresh clone's, CI's): another path and mtime, the same
    # bytes. Its executables are the same, so they are loaded, not compiled again (once keyed by path: every fresh
    # clone recompiled the whole suite).
    original = Path(default_plugin_path())
    copy = tmp_path / "other-venv" / original.name
    copy.parent.mkdir()
    shutil.copyfile(original, copy)
    third, _ = _child(tmp_path / "c", "fill", "3", env={"TORCH_TPU_PJRT_PLUGIN": str(copy)})
    assert third["counters"]["compiles"] == 0 and third["counters"]["disk_cache_hits"] >= 3


def test_disk_tier_is_bounded_least_recently_used_first(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    _child(cache, "fill", "4")  # programs for 3x2, 4x2, 5x2, 6x2 operands, stored in that order
    _child(cache, "fill", "1")  # a later process loads the 3x2 ones from disk: a use
    files = _entries(cache)
    sizes = sorted(f.stat().st_size for f in files)
    limit = sum(sizes[-5:])  # room for about five entries; trimming goes down to 80% of it
    out, _ = _child(cache, "fill", "0", env={"TORCH_TPU_CACHE_MAX_BYTES": str(limit)})
    survivors = [f.read_bytes() for f in _entries(cache)]  # an entry starts with its key, which holds the text
    assert out["counters"]["disk_cache_evictions"] > 0
    assert sum(len(b) for b in survivors) <= limit
    sines = [b for b in survivors if b"stablehlo.sine" in b]
    assert any(b"tensor<3x2xf32>" in b for b in sines)  # stored first, used last: kept
    assert not any(b"tensor<4x2xf32>" in b for b in sines)  # stored second, never used again: gone first


def test_clear_cache_empties_both_tiers(tmp_path: Path) -> None:
    out, _ = _child(tmp_path / "c", "clear")
    # after the clear, the same three programs were compiled again (not loaded from disk)
    assert out["counters"]["disk_cache_hits"] == 0 and out["counters"]["compiles"] >= 6
    assert out["entries"] >= 3


def test_entries_others_could_write_are_never_loaded(tmp_path: Path) -> None:
    _child(tmp_path / "c", "fill", "2")
    for f in _entries(tmp_path / "c"):
        f.chmod(0o666)  # writable by anyone: it could hold someone else's code
    out, err = _child(tmp_path / "c", "fill", "2")
    assert out["counters"]["disk_cache_refused"] >= 2 and out["counters"]["disk_cache_hits"] == 0
    assert "not loading the compile cache entry" in err and "others may write it" in err


def test_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    _child(tmp_path / "c", "fill", "1")
    platform_dir = next((tmp_path / "c").iterdir())
    platform_dir.chmod(0o777)
    before = len(_entries(tmp_path / "c"))
    out, err = _child(tmp_path / "c", "fill", "2")
    assert "compile cache on disk disabled" in err and "not private" in err
    assert out["disk_directory"] == "" and out["counters"]["disk_cache_hits"] == 0
    assert len(_entries(tmp_path / "c")) == before  # nothing written there either


@pytest.mark.parametrize(
    "raw,value", [("1G", 1 << 30), ("512M", 512 << 20), ("12345", 12345), ("0", 0), ("2GiB", 2 << 30)]
)
def test_cache_size_setting(raw: str, value: int) -> None:
    assert torch_tpu.config.load({"TORCH_TPU_CACHE_MAX_BYTES": raw}).cache_max_bytes == value


def test_cache_size_setting_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="TORCH_TPU_CACHE_MAX_BYTES"):
        torch_tpu.config.load({"TORCH_TPU_CACHE_MAX_BYTES": "lots"})
