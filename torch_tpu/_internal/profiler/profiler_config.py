"""TorchTPU's `torch.tpu.profiler.TpuProfilerConfig`: the tracer levels and options of a TPU profile, passed as
`torch.profiler.profile(experimental_config=...)`.

It is a `torch.profiler._ExperimentalConfig` carrying TorchTPU's option string in `custom_profiler_config`
(`key:value` pairs joined by commas), built and validated as TorchTPU does. torch_tpu's tpu rows reach the profile
through Kineto (`ProfilerActivity.PrivateUse1`) whatever the levels say, and it writes no XPlane file, so `run_dir`
and `worker_rank` are recorded in the string (and on the object) but no file is written from them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import torch

__all__ = ["TpuProfilerConfig"]

_STABLE_KEYS = frozenset(
    {
        "check_experimental_options",
        "device_tracer_level",
        "host_tracer_level",
        "python_tracer_level",
        "run_dir",
        "worker_rank",
    }
)


def _format(value: int | bool | str) -> str:
    """A value as the option string spells it: booleans lower-case, strings quoted with `\\` and `"` escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"profiler option values must be int, bool or str, got {type(value).__name__}")


class TpuProfilerConfig(torch.profiler._ExperimentalConfig):
    """Profiler options with XLA's usual defaults: host tracer level 2, device tracer level 1, Python tracer off.

    `worker_rank` must be a string without ':' or ','; `experimental_options` maps extra keys (no ':' or ',', none
    of the stable keys) to int, bool or str values. `config_string` is the resulting option string.
    """

    def __init__(
        self,
        *,
        host_tracer_level: int = 2,
        device_tracer_level: int = 1,
        python_tracer_level: int = 0,
        run_dir: os.PathLike[str] | str | None = None,
        worker_rank: str | None = None,
        experimental_options: Mapping[str, int | bool | str] | None = None,
        check_experimental_options: bool = True,
    ) -> None:
        if worker_rank is not None:
            if not isinstance(worker_rank, str):
                raise TypeError(f"worker_rank must be a str, got {type(worker_rank).__name__}")
            if ":" in worker_rank or "," in worker_rank:
                raise ValueError(f"worker_rank must not contain ':' or ',': {worker_rank!r}")
        extra = dict(experimental_options or {})
        for key in extra:
            if key in _STABLE_KEYS:
                raise ValueError(f"experimental option {key!r} is a stable option: pass it as a keyword instead")
            if ":" in key or "," in key:
                raise ValueError(f"experimental option keys must not contain ':' or ',': {key!r}")

        def parts() -> Iterator[str]:
            yield f"host_tracer_level:{host_tracer_level}"
            yield f"device_tracer_level:{device_tracer_level}"
            yield f"python_tracer_level:{python_tracer_level}"
            if run_dir is not None:
                yield f"run_dir:{os.fspath(run_dir)}"
            if worker_rank is not None:
                yield f"worker_rank:{_format(worker_rank)}"
            if extra:
                yield from (f"{k}:{_format(v)}" for k, v in extra.items())
                yield f"check_experimental_options:{_format(bool(check_experimental_options))}"

        self.config_string = ",".join(parts())
        self.run_dir = None if run_dir is None else os.fspath(run_dir)
        self.worker_rank = worker_rank
        super().__init__(custom_profiler_config=self.config_string)
