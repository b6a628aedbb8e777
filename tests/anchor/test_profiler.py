"""TorchTPU's profiler names over torch.profiler: the trace file they write loads as JSON and holds the tpu programs'
rows; TpuProfilerConfig builds TorchTPU's option string and works as an experimental_config."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity as TorchActivity

import torch_tpu
from torch_tpu._internal import profiler

TpuProfilerConfig = torch.tpu.profiler.TpuProfilerConfig


def _work() -> torch.Tensor:
    x = torch.randn(16, 16, device="tpu")
    y = (x @ x + 1.0).relu()
    torch.tpu.synchronize()
    return y


def _events(path: str) -> list[dict]:
    return json.loads(Path(path).read_text())["traceEvents"]


def _tpu_kernels(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("tpu:")]


@pytest.fixture(autouse=True)
def _strict_in_fused() -> object:
    """Fused mode would merge the ops into one program; one program per op keeps the row count predictable."""
    mode = torch_tpu.get_eager_mode()
    with torch_tpu.eager_mode("strict" if mode == "fused" else mode):
        yield


def test_profile_writes_a_chrome_trace_with_tpu_rows(tmp_path: Path) -> None:
    _work()
    handler = profiler.xprof_trace_handler(dir_name=tmp_path, worker_rank="3")
    with profiler.profile(
        activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.TPU], on_trace_ready=handler
    ) as prof:
        _work()
    path = prof.trace_path
    assert Path(path).parent.parent == tmp_path / "plugins" / "profile"
    assert os.path.basename(path).endswith("_3.trace.json")
    events = _events(path)
    kernels = _tpu_kernels(events)
    assert kernels and all(e["dur"] > 0 for e in kernels)
    assert any(e.get("name") == "aten::relu" for e in events)  # the CPU side is traced too
    again = profiler.profile(on_trace_ready=handler)
    with again as second:
        pass
    assert second.trace_path != path  # a second profile within the same second does not overwrite the first


def test_tpu_only_activity_has_no_cpu_op_rows(tmp_path: Path) -> None:
    with profiler.profile([profiler.ProfilerActivity.TPU], profiler.xprof_trace_handler(tmp_path)) as prof:
        _work()
    events = _events(prof.trace_path)
    assert _tpu_kernels(events)
    assert not [e for e in events if e.get("cat") == "cpu_op"]


def test_output_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(profiler._api.OUTPUT_DIR_ENV, str(tmp_path / "env"))
    handler = profiler.xprof_trace_handler()
    assert handler(None) == str(tmp_path / "env")
    with profiler.profile(on_trace_ready=handler) as prof:
        _work()
    assert prof.trace_path.startswith(str(tmp_path / "env")) and _tpu_kernels(_events(prof.trace_path))
    monkeypatch.delenv(profiler._api.OUTPUT_DIR_ENV)
    with pytest.raises(ValueError, match="TORCH_TPU_PROFILER_OUTPUT_DIR"):
        profiler.xprof_trace_handler()


def test_profile_refusals(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="on_trace_ready must be given"):
        with profiler.profile():
            pass
    with pytest.raises(ValueError, match="GPU profiling is not supported"):
        with profiler.profile([profiler.ProfilerActivity.GPU], profiler.xprof_trace_handler(tmp_path)):
            pass
    with pytest.raises(ValueError, match="path separators"):
        with profiler.profile(on_trace_ready=profiler.xprof_trace_handler(tmp_path, worker_rank="a/b")):
            pass


def test_trace_is_written_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        with profiler.profile(on_trace_ready=profiler.xprof_trace_handler(tmp_path)) as prof:
            _work()
            raise KeyError("boom")
    assert _tpu_kernels(_events(prof.trace_path))


def test_server_is_not_available() -> None:
    with pytest.raises(RuntimeError, match=r"not available on this platform \(cpu\)"):
        profiler.start_server(9012)
    with pytest.raises(RuntimeError, match="not available on this platform"):
        profiler.stop_server()
    profiler.register_kineto_backend()


def test_tpu_profiler_config_string_and_use(tmp_path: Path) -> None:
    assert TpuProfilerConfig().config_string == "host_tracer_level:2,device_tracer_level:1,python_tracer_level:0"
    config = TpuProfilerConfig(
        host_tracer_level=3,
        run_dir=tmp_path,
        worker_rank="1",
        experimental_options={"flag": True, "n": 4, "s": 'a"b\\c'},
        check_experimental_options=False,
    )
    assert config.config_string == (
        f"host_tracer_level:3,device_tracer_level:1,python_tracer_level:0,run_dir:{tmp_path},"
        'worker_rank:"1",flag:true,n:4,s:"a\\"b\\\\c",check_experimental_options:false'
    )
    assert isinstance(config, torch.profiler._ExperimentalConfig)
    _work()
    with torch.profiler.profile(
        activities=[TorchActivity.CPU, TorchActivity.PrivateUse1], experimental_config=config
    ) as prof:
        _work()
    assert [e for e in prof.key_averages() if e.key.startswith("tpu:")]


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"worker_rank": 1}, TypeError, "worker_rank must be a str"),
        ({"worker_rank": "a,b"}, ValueError, "must not contain"),
        ({"experimental_options": {"run_dir": "x"}}, ValueError, "is a stable option"),
        ({"experimental_options": {"a:b": 1}}, ValueError, "keys must not contain"),
        ({"experimental_options": {"f": 1.5}}, TypeError, "int, bool or str"),
    ],
)
def test_tpu_profiler_config_refusals(kwargs: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        TpuProfilerConfig(**kwargs)
